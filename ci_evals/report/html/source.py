"""Reading the run folder as untrusted data.

A results file names its trajectories and produced files by relative path.
A run records links as data (`after.links.json`), but a run folder is
untrusted: an older one, or one edited after the run, may hold links. The
site must never read past the run folder: a path with `..` or an absolute one
is refused, and every folder and file on the way is opened without following
a link (`O_NOFOLLOW`, one component at a time from the run folder), so
`after/notes -> /etc/shadow` reads as "not a regular file", not as the host's
file. Reads are capped.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ci_evals.fs.links import Unreadable

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_in(top: Path, rel: str) -> BinaryIO:
    """`top/rel` opened for reading, no link followed on the way; else `Unreadable`."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or any(p in ("..", ".") for p in parts):
        raise Unreadable(f"not a path inside the run folder: {rel}")
    try:
        fd = os.open(top, _DIR_FLAGS)
    except OSError as exc:
        raise Unreadable(f"{top}: {exc.strerror}") from None
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise Unreadable(f"{rel}: {exc.strerror}") from None
            os.close(fd)
            fd = inner
        try:
            file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise Unreadable(f"{rel}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(file_fd).st_mode):
        os.close(file_fd)
        raise Unreadable(f"{rel}: not a regular file")
    os.set_blocking(file_fd, True)
    return os.fdopen(file_fd, "rb")


def read_capped(top: Path, rel: str, limit: int) -> tuple[bytes, int]:
    """(the first `limit` bytes of `top/rel`, its whole size); else `Unreadable`."""
    with open_in(top, rel) as handle:
        size = os.fstat(handle.fileno()).st_size
        return handle.read(limit), size
