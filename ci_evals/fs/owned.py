"""A folder owned by one process at a time: an exclusive `flock` on the folder itself.

Two `ci-evals run --out SAME` started at once would both find the folder free
and write over each other's results. The run takes the lock before it writes
anything and looks again for a results file once it holds it; the second run
is refused in one line. The lock is on the folder's own descriptor, so no file
is left in it, and the kernel drops it when the process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class Taken(Exception):
    """Another process holds the folder."""


def own(folder: Path) -> int:
    """Lock `folder` (made if missing) for this process; its descriptor, to `release`.
    `Taken` if another process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Taken(str(folder)) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
