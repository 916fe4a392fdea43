"""Find and end every process a stage started, wherever it went.

Killing the CLI's process group is not enough: the CLI's Bash tool starts each
command in a session of its own, and `sleep 999 &` is re-parented to init as
soon as its shell exits, so neither the process group nor the parent chain
reaches it. What every such process keeps is its environment: the runner puts
a unique `CI_EVALS_STAGE_ID` into the agent's environment, and at the end of a
stage (or on an interrupt) every process whose environment carries it is
killed. Linux `/proc` only; elsewhere this finds nothing and the process group
kill is all there is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

MARK_NAME = "CI_EVALS_STAGE_ID"


def new_mark() -> str:
    """A fresh value for `MARK_NAME`, unique to one stage run."""
    return uuid.uuid4().hex


def marked_pids(mark: str, proc: Path = Path("/proc")) -> list[int]:
    """Pids of live processes whose environment has `MARK_NAME=mark`."""
    needle = f"{MARK_NAME}={mark}".encode()
    own = os.getpid()
    pids: list[int] = []
    try:
        entries = list(proc.iterdir())
    except OSError:
        return pids
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def kill_marked(mark: str, *, rounds: int = 5) -> int:
    """SIGKILL every process carrying `mark`, repeating while new ones appear (forks).

    Returns how many were signalled. Zombies keep their environ readable until
    reaped; a pid that does not die is not counted twice.
    """
    signalled: set[int] = set()
    for _ in range(rounds):
        fresh = [pid for pid in marked_pids(mark) if pid not in signalled]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            signalled.add(pid)
        time.sleep(0.01)
    return len(signalled)
