"""Temp folders whose owner is gone: what a SIGKILLed run leaves in `$TMPDIR`.

A run's workspaces and the agent's HOME live in one temp folder
(`ci-evals-<run-id>-*`). An orderly end removes it; a SIGKILL, an OOM kill or a
lost machine do not. `claim` writes the owner into it (`pid:start`, the
process's start time from /proc, so a pid reused later is another process);
`find` lists the folders under a temp root whose owner is gone, for `ci-evals
gc` and for the next run, which removes them before it starts.

Only real folders of ours are touched: named `PREFIX*`, owned by our uid, not
a link, holding an owner file that is a regular file we wrote. What the agent
could plant there names only folders it could have removed itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path

PREFIX = "ci-evals-"
OWNER_FILE = ".ci-evals-owner"
_MAX_OWNER_BYTES = 64


def process_start(pid: int) -> str:
    """When process `pid` started (field 22 of /proc/PID/stat), '' when it is gone."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat_line.rsplit(")", 1)[-1].split()[19]  # fields after the command name


def claim(folder: Path) -> None:
    """Record this process as `folder`'s owner."""
    pid = os.getpid()
    (folder / OWNER_FILE).write_text(f"{pid}:{process_start(pid)}\n")


def find(root: Path) -> list[Path]:
    """The claimed folders directly under `root` whose owner is gone, sorted."""
    found: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith(PREFIX) and _abandoned(Path(entry.path)):
            found.append(Path(entry.path))
    return sorted(found)


def _abandoned(folder: Path) -> bool:
    try:
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        fd = os.open(folder / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            text = os.read(fd, _MAX_OWNER_BYTES).decode("ascii")
        finally:
            os.close(fd)
    except (OSError, UnicodeDecodeError):
        return False
    pid_text, _, started = text.strip().partition(":")
    if not pid_text.isdigit():
        return False
    return process_start(int(pid_text)) != started


def remove(folders: list[Path]) -> list[str]:
    """Remove `folders` (read-only folders inside made writable first); the problems."""
    problems = []
    for folder in folders:
        shutil.rmtree(folder, onerror=_writable_then_retry)
        if folder.exists():
            problems.append(f"{folder}: could not be removed")
    return problems


def _writable_then_retry(function: object, path: str, _: object) -> None:
    """An agent may leave folders without write permission: open them up and retry once."""
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), 0o700)
        if callable(function):
            function(path)
