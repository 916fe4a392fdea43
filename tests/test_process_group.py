"""`process.ProcessGroup`: a program in its own group, ended whole on stop/close/Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals import process
from ci_evals.process import ProcessGroup


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """The process is dead within `within_s`: a SIGKILLed process still takes a
    moment to exit and be reaped on a loaded machine, so look again until then."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie is gone for our purpose (dead, only not yet reaped).
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/stat") as stat:
            if stat.read().split(") ", 1)[1].startswith("Z"):
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _grandchild(group: ProcessGroup) -> int:
    """The pid the shell printed for the `sleep` it left running in the background."""
    assert group.proc.stdout is not None
    return int(group.proc.stdout.readline())


def test_stop_ends_the_leader_and_what_it_started_and_reaps() -> None:
    group = ProcessGroup(["sh", "-c", "sleep 60 & echo $!; sleep 60"], stdin=subprocess.DEVNULL)
    child = _grandchild(group)
    assert os.getpgid(child) == group.pid  # in the leader's group, not ours
    assert os.getsid(group.pid) == group.pid  # and its own session
    code = group.stop(grace_s=1.0)
    assert code is not None and code < 0  # killed by a signal, and reaped
    assert _gone(child)


def test_sigterm_first_lets_it_clean_up(tmp_path: Path) -> None:
    marker = tmp_path / "cleaned"
    script = f"trap 'echo done > {marker}; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
    group = ProcessGroup(["sh", "-c", script], stdin=subprocess.DEVNULL)
    assert group.proc.stdout is not None and group.proc.stdout.readline() == b"ready\n"
    group.close(grace_s=5.0)
    assert marker.read_text() == "done\n"


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print(1, flush=True); time.sleep(60)"
    )
    group = ProcessGroup([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    assert group.proc.stdout is not None and group.proc.stdout.readline() == b"1\n"
    began = time.monotonic()
    assert group.stop(grace_s=0.3) == -9  # SIGKILLed: the SIGTERM did nothing
    assert time.monotonic() - began >= 0.3  # after the grace (a lower bound: load only adds)


def test_a_finished_program_is_stopped_without_signals_or_waiting() -> None:
    group = ProcessGroup(["true"], stdin=subprocess.DEVNULL)
    group.proc.wait()
    began = time.monotonic()
    assert group.stop(grace_s=3600.0) == 0  # exit code kept: no signal was sent
    # Not the grace: no order to observe in a program that has ended, so a bound,
    # a minute against the hour it would otherwise wait.
    assert time.monotonic() - began < 60.0


def test_ctrl_c_inside_the_block_ends_the_group() -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        ProcessGroup(["sh", "-c", "sleep 60 & echo $!; wait"], stdin=subprocess.DEVNULL) as group,
    ):
        child = _grandchild(group)
        raise KeyboardInterrupt
    assert _gone(child) and group.proc.returncode is not None
    assert group.proc.stdout is not None and group.proc.stdout.closed


def test_run_kills_the_whole_group_at_its_timeout() -> None:
    result = process.run(
        ["sh", "-c", "sleep 60 & echo $!; sleep 60"], timeout=3.0
    )  # room for sh to start and print on a busy machine
    assert result.timed_out and result.returncode is None
    assert _gone(int(result.stdout))
