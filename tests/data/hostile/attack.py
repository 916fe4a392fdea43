"""What a hostile agent's server.py does to the hidden tests that start it (issue 20).

Imported by a server that never persists: `attempt()` tries, once and in order,
to stop, trace, reach the stdout of and outrun every process running check.py,
and to plant all-passed results where they are read; `watch()` forks a
detached watcher that keeps stopping check.py, and whenever the real results
are there replaces them with forged ones and lets it go on. The log of what
each try got is kept in /tmp for the next server process to tell (in an SQL
error's text, which the hidden tests copy into their failure detail).
"""

import contextlib
import json
import os
import signal
import time

LOG = "/tmp/hostile-attack.json"  # the sandbox's own /tmp, shared by both identities
NAMES = ("entry-point", "compiles", "dependencies", "round-trip", "persists", "list-tables",
         "sql-error")  # fmt: skip
FORGED = [{"name": name, "passed": True, "detail": "forged"} for name in NAMES]


def graders():
    """The pids of the processes running check.py that /proc shows."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if b"check.py" in handle.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def targets():
    """Where results may be read: the graded folder (before issue 20) and $CI_EVALS_RESULTS
    (the launcher no longer passes it on: its documented place, then)."""
    paths = [os.path.abspath("hidden-results.json")]
    results = os.environ.get("CI_EVALS_RESULTS") or "/run/ci-evals-grader/results"
    paths.append(os.path.join(results, "hidden-results.json"))
    return paths


def plant(path):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(FORGED, handle)


def _try(log, what, action):
    try:
        action()
        log.append(f"{what}: done")
    except OSError as exc:
        log.append(f"{what}: {type(exc).__name__}")


def attempt():
    log = []
    pids = graders()
    log.append(f"graders seen: {len(pids)}")
    for pid in pids:
        _try(log, "sigstop", lambda pid=pid: os.kill(pid, signal.SIGSTOP))
        _try(log, "sigcont", lambda pid=pid: os.kill(pid, signal.SIGCONT))
        _try(log, "mem", lambda pid=pid: os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR)))
        _try(log, "stdout", lambda pid=pid: os.close(os.open(f"/proc/{pid}/fd/1", os.O_WRONLY)))
    for path in targets():
        where = os.path.basename(os.path.dirname(path))
        _try(log, f"plant {where}", lambda path=path: plant(path))
    with open(LOG, "w", encoding="utf-8") as handle:
        json.dump(log, handle)


def told():
    try:
        with open(LOG, encoding="utf-8") as handle:
            return " attack: " + "; ".join(json.load(handle))
    except (OSError, ValueError):
        return " attack: no log"


def _real_results(path):
    try:
        with open(path, encoding="utf-8") as handle:
            rows = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(rows, list) and any(row.get("detail") != "forged" for row in rows)


def _stopped(pid):
    for _ in range(200):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
                if handle.read().rsplit(")", 1)[-1].split()[0] in ("T", "t"):
                    return True
        except OSError:
            return False
        time.sleep(0.001)
    return False


def watch():
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    start, last = time.monotonic(), time.monotonic()
    while time.monotonic() - start < 120:
        pids = graders()
        if pids:
            last = time.monotonic()
        elif time.monotonic() - last > 5:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                continue
            if _stopped(pid):
                for path in targets():
                    if _real_results(path):
                        with contextlib.suppress(OSError):
                            plant(path)
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.002)
    os._exit(0)
