"""LocalSandbox (`--isolation none`) with real processes: nothing it started outlives it.

With no PID namespace, what the agent starts in a session of its own and with
an empty environment (`setsid env -i …`, a double fork) used to escape both
the process-group kill and the environment marker, and outlive the run. Every
process now starts under `launch.py`'s reaper (a child subreaper).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.local import LocalSandbox
from tests.run_helpers import processes_mentioning

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def escapers(marker: str, folder: Path) -> str:
    """A script leaving three processes that neither the group nor the marker reaches."""
    late = f"sleep 3; echo survived > {folder}/"
    return (
        f"setsid env -i /bin/sh -c ': {marker}; {late}setsid' >/dev/null 2>&1 < /dev/null & "
        f"( env -i /bin/sh -c ': {marker}; {late}double' >/dev/null 2>&1 < /dev/null & ) ; "
        f"nohup env -i /bin/sh -c ': {marker}; {late}nohup' >/dev/null 2>&1 < /dev/null & "
        "sleep 0.3; echo started"
    )


def wait_until(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


def assert_none_survived(marker: str, folder: Path) -> None:
    assert processes_mentioning(marker) == []
    time.sleep(3.5)  # well past their sleep
    assert processes_mentioning(marker) == []
    assert sorted(p.name for p in folder.iterdir()) == []


def test_setsid_env_i_and_double_forks_die_with_their_exec(tmp_path: Path) -> None:
    marker = f"ci-evals-local-{uuid.uuid4().hex}"
    ws = tmp_path / "ws"
    ws.mkdir()
    with LocalSandbox(SandboxSpec(writable=(ws,))) as box:
        done = box.exec(["sh", "-c", escapers(marker, ws)], cwd=ws, env=ENV, timeout=20)
        assert (done.returncode, done.stdout) == (0, b"started\n"), done.stderr
        assert_none_survived(marker, ws)


def test_they_die_at_the_timeout_too(tmp_path: Path) -> None:
    marker = f"ci-evals-local-{uuid.uuid4().hex}"
    ws = tmp_path / "ws"
    ws.mkdir()
    with LocalSandbox(SandboxSpec(writable=(ws,))) as box:
        script = escapers(marker, ws) + f"; sleep 30 # {marker}"
        done = box.exec(["sh", "-c", script], cwd=ws, env=ENV, timeout=2)
        assert done.timed_out and done.stdout == b"started\n"
        assert_none_survived(marker, ws)


def test_a_spawned_program_killed_as_the_sdk_does_leaves_nothing(tmp_path: Path) -> None:
    """The CLI is spawned by its caller, which kills its process group and closes the
    sandbox: the reaper (in a session of its own) still ends what the CLI left."""
    marker = f"ci-evals-local-{uuid.uuid4().hex}"
    ws = tmp_path / "ws"
    ws.mkdir()
    box = LocalSandbox(SandboxSpec(writable=(ws,)))
    try:
        spawn = box.spawn(["sh", "-c", escapers(marker, ws) + "; exec cat"], cwd=ws, env=ENV)
        with subprocess.Popen(
            spawn.argv,
            env=spawn.env,
            cwd=spawn.cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        ) as proc:
            assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        box.close()
    assert_none_survived(marker, ws)


def test_stdio_and_exit_status_pass_through(tmp_path: Path) -> None:
    with LocalSandbox(SandboxSpec(writable=(tmp_path,))) as box:
        echo = box.exec(["sh", "-c", "cat; echo err >&2; exit 7"], cwd=tmp_path, env=ENV,
                        stdin=b"in\n", timeout=20)  # fmt: skip
        assert (echo.returncode, echo.stdout, echo.stderr) == (7, b"in\n", b"err\n")
        killed = box.exec(["sh", "-c", "kill -TERM $$"], cwd=tmp_path, env=ENV, timeout=20)
        assert killed.returncode == -signal.SIGTERM
        # the program's exact environment, and its marker; nothing of ours
        env = box.exec(["/usr/bin/env", "-0"], cwd=tmp_path, env=ENV, timeout=20)
        got = dict(item.split("=", 1) for item in env.stdout.decode().split("\0") if item)
        assert set(got) == {*ENV, "CI_EVALS_STAGE_ID"}
        # no signal ignored that a shell would not ignore (Python ignores SIGPIPE)
        pipe = box.exec(["sh", "-c", "grep SigIgn /proc/self/status; yes | head -1"],
                        cwd=tmp_path, env=ENV, timeout=20)  # fmt: skip
        assert (pipe.stdout, pipe.stderr) == (b"SigIgn:\t0000000000000000\ny\n", b"")
        # a background process holding stdout open ends with the program: no hang
        # (the timeout, 20 s, is shorter than its sleep: waiting for it would time out)
        held = box.exec(["sh", "-c", "sleep 30 & echo out"], cwd=tmp_path, env=ENV, timeout=20)
        assert (held.returncode, held.timed_out, held.stdout) == (0, False, b"out\n")


PARENT = "import json, subprocess, sys; sys.exit(subprocess.call(json.loads(sys.argv[1])))"


def test_everything_dies_with_ci_evals(tmp_path: Path) -> None:
    """ci-evals SIGKILLed (no clean-up of ours runs): the launcher dies with it
    (PR_SET_PDEATHSIG), and its reaper then kills the rest."""
    marker = f"ci-evals-local-{uuid.uuid4().hex}"
    ws = tmp_path / "ws"
    ws.mkdir()
    box = LocalSandbox(SandboxSpec(writable=(ws,)))
    try:
        spawn = box.spawn(["sh", "-c", escapers(marker, ws) + "; sleep 30"], cwd=ws, env=ENV)
        parent = subprocess.Popen(
            [sys.executable, "-c", PARENT, json.dumps(list(spawn.argv))],
            stdout=subprocess.PIPE,
            env={},
        )
        assert parent.stdout is not None and parent.stdout.readline() == b"started\n"
        parent.kill()
        parent.wait()
        assert wait_until(lambda: processes_mentioning(marker) == [], 10)
    finally:
        box.close()
    assert_none_survived(marker, ws)
