"""Process-tree helpers shared by the benchmarks that run ci-evals as subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def ci_evals(*args: str) -> subprocess.Popen[bytes]:
    """`python -m ci_evals ARGS` of this checkout, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "ci_evals", *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def tree_rss_mib(root: int) -> float:
    """Resident memory of `root` and every process below it, by parent pid: the CLIs in
    their sandboxes too (another PID namespace, the same /proc here)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            pid = int(entry.name)
            parent[pid] = int(fields[1])
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # field 24: rss in pages
        except (OSError, ValueError, IndexError):
            continue
    below = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in below and pid not in below:
                below.add(pid)
                grew = True
    return sum(rss.get(pid, 0) for pid in below) / 2**20


def watched(procs: list[subprocess.Popen[bytes]]) -> tuple[float, list[float]]:
    """Wait for every process: (wall seconds from now, each one's peak tree RSS in MiB)."""
    started = time.perf_counter()
    peaks = [0.0] * len(procs)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for i, proc in enumerate(procs):
                if proc.poll() is None:
                    peaks[i] = max(peaks[i], tree_rss_mib(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{proc.args} exited {proc.returncode}: {err.decode()[-2000:]}")
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    return wall, peaks
