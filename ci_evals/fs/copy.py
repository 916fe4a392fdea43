"""Copy regular files the way `cp` does: content and permission bits (never
setuid/setgid), kernel-side.

`os.copy_file_range` keeps the data in the kernel and makes a reflink on file
systems that support it, but recent Linux refuses it between two different
file systems (EXDEV: fixtures on disk, the run folder on tmpfs) and some file
systems refuse it outright. Then `os.sendfile` (also kernel-side) takes over,
and where even that is refused, a plain read/write loop. Used for fixtures
(many files, speed matters) and for the files a stage produced (copied out of
the workspace; links are never followed).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator

# Permission bits a copy keeps: never setuid or setgid. The files are the
# agent's, and one it made setuid in a stage run as root (bwrap as root, a
# grader's container) must not become a setuid-root program on the host.
KEPT_MODE = 0o1777
_CHUNK = 1 << 30  # ask the kernel for at most this much per call
_BLOCK = 1 << 20  # read/write block when nothing kernel-side works
# copy_file_range errors that mean "not between these files", not "broken".
_UNSUPPORTED = frozenset(
    code
    for code in (
        errno.EXDEV,
        errno.EINVAL,
        errno.ENOSYS,
        errno.EOPNOTSUPP,
        getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
        errno.EBADF,
        errno.ETXTBSY,
    )
)


def copy_file(
    source: str,
    dest: str,
    *,
    follow_links: bool = True,
    kernel: bool = True,
    check: Callable[[int, os.stat_result], None] | None = None,
) -> os.stat_result:
    """Copy `source` to `dest` (created or truncated) with `source`'s permission bits
    (but setuid and setgid, `KEPT_MODE`).

    Returns the stat of `dest` as written (for a snapshot that needs no second
    look). With `follow_links=False` a `source` that is a symbolic link raises
    `OSError` (ELOOP) instead of copying what it points at. `kernel=False`
    skips `copy_file_range` (tests use it to exercise the fallbacks). `check`
    is given the open source (descriptor and stat) before `dest` is touched and
    may raise to refuse it: it sees the file that will be copied, not what the
    path names a moment later (a link swapped meanwhile).
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
        if check is not None:
            check(src, info)
        dst = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, info.st_mode & KEPT_MODE)
        try:
            if not (kernel and _copy_range(src, dst, info.st_size)):
                _copy_fallback(src, dst, info.st_size)
            return os.fstat(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def copy_many(
    jobs: Iterable[tuple[str, str]], *, kernel: bool = True, follow_links: bool = True
) -> Iterator[os.stat_result]:
    """`copy_file` for many (source, dest) pairs; yields each dest's stat in order.

    `follow_links=False`: a source that is a link raises `OSError` (ELOOP), as
    `copy_file` does.

    The same system calls as `copy_file`, in one loop with everything bound
    locally: for 10,000 small files the interpreter's per-call overhead is
    what separates Python from `cp -r`. Once `copy_file_range` is refused
    between the two folders, it is not tried again for the rest.
    """
    open_, fstat, close = os.open, os.fstat, os.close
    use_range = kernel and hasattr(os, "copy_file_range")
    read_flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow_links:
        read_flags |= getattr(os, "O_NOFOLLOW", 0)
    write_flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    is_regular = stat.S_ISREG
    for source, dest in jobs:
        src = open_(source, read_flags)
        try:
            info = fstat(src)
            if not is_regular(info.st_mode):
                raise IsADirectoryError(f"not a regular file: {source}")
            dst = open_(dest, write_flags, info.st_mode & KEPT_MODE)
            try:
                size = info.st_size
                if size:
                    if use_range:
                        use_range = _copy_range(src, dst, size)
                    if not use_range:
                        _copy_fallback(src, dst, size)
                yield fstat(dst)
            finally:
                close(dst)
        finally:
            close(src)


def copy_open(src: int, dst: int, size: int) -> None:
    """Copy `size` bytes from the open file `src` to the open file `dst` (both at
    offset 0), kernel-side where it can: for a caller that opened both itself
    (by descriptor, never through a link: `fs.links`)."""
    if not (size and _copy_range(src, dst, size)):
        _copy_fallback(src, dst, size)


def _copy_range(src: int, dst: int, size: int) -> bool:
    """Copy with copy_file_range; False (nothing written) if it is refused here."""
    remaining = size
    try:
        # Up to the size fstat saw: saves the call that would only confirm EOF.
        while remaining > 0:
            sent = os.copy_file_range(src, dst, min(remaining, _CHUNK))
            if sent == 0:
                break  # the file shrank meanwhile
            remaining -= sent
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
        if remaining != size:  # refused midway: start again from the top
            os.lseek(src, 0, os.SEEK_SET)
            os.lseek(dst, 0, os.SEEK_SET)
            os.ftruncate(dst, 0)
        return False
    return True


def _copy_fallback(src: int, dst: int, size: int) -> None:
    """sendfile, else read/write; `src` and `dst` are at offset 0."""
    sendfile = getattr(os, "sendfile", None)
    if sendfile is not None:
        offset = 0
        try:
            while offset < size:
                sent = sendfile(dst, src, offset, min(size - offset, _CHUNK))
                if sent == 0:
                    break
                offset += sent
            return
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            os.lseek(dst, 0, os.SEEK_SET)
            os.ftruncate(dst, 0)
    os.lseek(src, 0, os.SEEK_SET)
    while block := os.read(src, _BLOCK):
        view = memoryview(block)
        while view:
            view = view[os.write(dst, view) :]
