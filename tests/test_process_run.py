"""`process.run` and `git.run` end when the program does: a leftover holding the
pipe, a short timeout, stdin larger than the pipe, output kept whole and apart."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ci_evals import git, process
from tests.conftest import git as git_cmd

# A program that ends at once but leaves a process in a session of its own
# holding stdout open (what ssh's ControlPersist master does to git); it prints
# the leftover's pid, and `_still_running` ends it.
LEAVES_A_PIPE_OPEN = "setsid sleep 600 & echo $!"


def _still_running(stdout: bytes) -> bool:
    """Whether the leftover (its pid printed on `stdout`) still ran; it is ended."""
    try:
        os.kill(int(stdout), signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def test_uncapped_run_returns_when_the_program_ends_though_a_leftover_holds_its_pipe() -> None:
    done = process.run(["sh", "-c", LEAVES_A_PIPE_OPEN], timeout=30)
    # Before: `communicate` waited for the leftover, and with a timeout shorter
    # than its life reported a program that exited 0 as timed out. Returned while
    # the leftover runs: when the program ended.
    assert (done.returncode, done.timed_out) == (0, False)
    assert _still_running(done.stdout)


def test_uncapped_run_a_short_timeout_is_not_blamed_on_a_program_that_ended() -> None:
    done = process.run(["sh", "-c", LEAVES_A_PIPE_OPEN], timeout=1)
    assert (done.returncode, done.timed_out) == (0, False)
    assert _still_running(done.stdout)


def test_git_run_ends_when_git_does(tmp_path: Path) -> None:
    git_cmd(tmp_path, "init", "-q")
    result = git.run(tmp_path, "-c", f"alias.hold=!{LEAVES_A_PIPE_OPEN}", "hold", timeout=30)
    assert result.returncode == 0
    assert _still_running(result.stdout)  # returned while the leftover runs


def test_git_run_timeout_is_still_returncode_minus_one_and_git_error(tmp_path: Path) -> None:
    git_cmd(tmp_path, "init", "-q")
    # The sleep marks its natural end: the group (sh and its sleep) killed, it
    # never does; waited for, it would (and the test would take 10 minutes).
    ended = tmp_path / "ended"
    hang = f"alias.hang=!sleep 600; touch {ended}"
    with pytest.raises(git.GitError) as caught:
        git.run(tmp_path, "-c", hang, "hang", timeout=0.5)
    assert caught.value.result.returncode == -1
    assert "timed out after 0.5 s" in str(caught.value)
    unchecked = git.run(tmp_path, "-c", hang, "hang", timeout=0.5, check=False)
    assert unchecked.returncode == -1
    assert not ended.exists()


@pytest.mark.parametrize("cap", [process.UNCAPPED, 1 << 30])
def test_stdin_larger_than_the_pipe_buffer(cap: int) -> None:
    data = bytes(range(256)) * (1 << 14)  # 4 MiB
    done = process.run(["cat"], stdin=data, timeout=20, output_cap=cap)
    assert (done.returncode, done.stdout == data) == (0, True)


def test_uncapped_stdout_and_stderr_kept_apart_and_whole() -> None:
    done = process.run(["sh", "-c", "head -c 3000000 /dev/zero; echo err >&2; exit 3"], timeout=20)
    assert (done.returncode, len(done.stdout), done.stderr) == (3, 3_000_000, b"err\n")


def test_program_that_does_not_read_its_stdin() -> None:
    done = process.run(["true"], stdin=b"x" * (1 << 22), timeout=20)
    assert done.returncode == 0
