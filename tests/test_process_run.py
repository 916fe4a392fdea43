"""`process.run` and `git.run` end when the program does: a leftover holding the
pipe, a short timeout, stdin larger than the pipe, output kept whole and apart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ci_evals import git, process
from tests.conftest import git as git_cmd

# A program that ends at once but leaves a process in a session of its own
# holding stdout open (what ssh's ControlPersist master does to git); the
# leftover sleep ends by itself.
LEAVES_A_PIPE_OPEN = "setsid sleep 6 & echo hi"


def test_uncapped_run_returns_when_the_program_ends_though_a_leftover_holds_its_pipe() -> None:
    start = time.monotonic()
    done = process.run(["sh", "-c", LEAVES_A_PIPE_OPEN], timeout=30)
    took = time.monotonic() - start
    # Before: `communicate` waited for the leftover (6 s), and with a timeout
    # shorter than that reported a program that exited 0 as timed out.
    assert (done.returncode, done.timed_out, done.stdout) == (0, False, b"hi\n")
    assert took < 5


def test_uncapped_run_a_short_timeout_is_not_blamed_on_a_program_that_ended() -> None:
    done = process.run(["sh", "-c", LEAVES_A_PIPE_OPEN], timeout=1)
    assert (done.returncode, done.timed_out) == (0, False)


def test_git_run_ends_when_git_does(tmp_path: Path) -> None:
    git_cmd(tmp_path, "init", "-q")
    start = time.monotonic()
    result = git.run(tmp_path, "-c", f"alias.hold=!{LEAVES_A_PIPE_OPEN}", "hold", timeout=30)
    assert (result.returncode, result.stdout) == (0, b"hi\n")
    assert time.monotonic() - start < 5


def test_git_run_timeout_is_still_returncode_minus_one_and_git_error(tmp_path: Path) -> None:
    git_cmd(tmp_path, "init", "-q")
    start = time.monotonic()
    with pytest.raises(git.GitError) as caught:
        git.run(tmp_path, "-c", "alias.hang=!sleep 6", "hang", timeout=0.5)
    assert caught.value.result.returncode == -1
    assert "timed out after 0.5 s" in str(caught.value)
    unchecked = git.run(tmp_path, "-c", "alias.hang=!sleep 6", "hang", timeout=0.5, check=False)
    assert unchecked.returncode == -1
    assert time.monotonic() - start < 5  # the group (sh and its sleep) killed, not waited for


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
