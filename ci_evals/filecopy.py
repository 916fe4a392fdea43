"""Copy one regular file the way `cp` does: content and permission bits, kernel-side.

`os.copy_file_range` keeps the data in the kernel (and makes a reflink on file
systems that support it); where it is missing or refused, a plain read/write
loop takes over. Used for fixtures (many files, speed matters) and for the
files a stage produced (copied out of the workspace; links are never followed).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator

_CHUNK = 1 << 30  # ask copy_file_range for at most this much per call


def copy_file(source: str, dest: str, *, follow_links: bool = True) -> os.stat_result:
    """Copy `source` to `dest` (created or truncated) with `source`'s permission bits.

    Returns the stat of `dest` as written (for a snapshot that needs no second
    look). With `follow_links=False` a `source` that is a symbolic link raises
    `OSError` (ELOOP) instead of copying what it points at.
    """
    # O_NONBLOCK: a FIFO swapped in for the file must not block the open;
    # it is refused just below. Regular files ignore the flag.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    src = os.open(source, flags)
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(f"not a regular file: {source}")
        dst = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IMODE(info.st_mode))
        try:
            _copy_content(src, dst, info.st_size)
            return os.fstat(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_content(src: int, dst: int, size: int) -> None:
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is not None and size > 0:
        try:
            # Up to the size seen by fstat: saves the extra call that would
            # only confirm the end of the file.
            remaining = size
            while remaining > 0:
                sent = copy_range(src, dst, min(remaining, _CHUNK))
                if sent == 0:
                    break  # the file shrank meanwhile
                remaining -= sent
            return
        except OSError:
            # EXDEV on old kernels, EINVAL/ENOSYS on some file systems: start
            # again with plain reads and writes.
            os.lseek(src, 0, os.SEEK_SET)
            os.lseek(dst, 0, os.SEEK_SET)
            os.ftruncate(dst, 0)
    while True:
        block = os.read(src, 1 << 20)
        if not block:
            break
        view = memoryview(block)
        while view:
            view = view[os.write(dst, view) :]


def copy_many(jobs: Iterable[tuple[str, str]]) -> Iterator[os.stat_result]:
    """`copy_file` for many (source, dest) pairs; yields each dest's stat in order.

    The same system calls as `copy_file`, in one loop with everything bound
    locally: for 10,000 small files the interpreter's per-call overhead is
    what separates Python from `cp -r`.
    """
    open_, fstat, close = os.open, os.fstat, os.close
    copy_range = getattr(os, "copy_file_range", None)
    read_flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    write_flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    is_regular = stat.S_ISREG
    for source, dest in jobs:
        src = open_(source, read_flags)
        try:
            info = fstat(src)
            if not is_regular(info.st_mode):
                raise IsADirectoryError(f"not a regular file: {source}")
            dst = open_(dest, write_flags, info.st_mode & 0o7777)
            try:
                size = info.st_size
                # One call copies a whole regular file in practice; anything
                # short (or no copy_file_range at all) takes the careful path.
                if size and (copy_range is None or copy_range(src, dst, size) != size):
                    os.lseek(src, 0, os.SEEK_SET)
                    os.lseek(dst, 0, os.SEEK_SET)
                    os.ftruncate(dst, 0)
                    _copy_content(src, dst, size)
                yield fstat(dst)
            finally:
                close(dst)
        finally:
            close(src)
