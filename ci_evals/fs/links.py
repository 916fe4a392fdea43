"""Laying a recorded state down again: files first, links last, nothing written through one.

A saved state records its links as data (`fs.state`), and whatever lays that
state down again — a grader's copy, a fixture promoted from a run, a merged
shard — reads the record from a run folder someone else may have written. Two
ways out of the destination hide in such a record, however each link reads as
text:

- a link resolved through the others: `d -> .` and `e -> d/..` each stay
  inside as written, yet `e` is the destination's parent;
- a write through a link: with `a -> ../..` made first, `a/x` or a folder
  made for it lands wherever `a` points.

So a record is resolved as the system will resolve it (`outside`, each link
through the other recorded links, as `workspace.create` checks the fixtures
it merges), a path whose folders run through a recorded link is refused
(`through_link`), and `lay` writes every file first, walking the folders by
descriptor with `O_NOFOLLOW` (a folder that is a link is refused, never
entered) and creating each file with `O_EXCL | O_NOFOLLOW`; the links are
made after, the same way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs.copy import KEPT_MODE, copy_open

MAX_HOPS = 40  # links followed in one resolution, as the kernel's ELOOP limit
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def outside(links: Mapping[str, str], rel: str, target: str) -> str | None:
    """None when the link `rel -> target` resolves inside the root, every other link
    of `links` (relative path -> target) followed on the way; else what is wrong."""
    if target.startswith("/"):
        return "is absolute"
    resolved: list[str] = rel.split("/")[:-1]
    todo = target.split("/")
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return "points outside the workspace by way of other links"
            resolved.pop()
            continue
        resolved.append(part)
        through = links.get("/".join(resolved))
        if through is not None:
            hops += 1
            if hops > MAX_HOPS:
                return "is part of a loop of links"
            if through.startswith("/"):
                return f"points outside the workspace by way of the absolute link {through!r}"
            resolved.pop()
            todo[:0] = through.split("/")
    return None


def through_link(links: Mapping[str, str] | Mapping[str, object], rel: str) -> str | None:
    """The first recorded link among the folders of `rel` (`a` for `a/b/x`), if any."""
    parts = rel.split("/")
    for end in range(1, len(parts)):
        folder = "/".join(parts[:end])
        if folder in links:
            return folder
    return None


def lay(
    dest: Path,
    files: Mapping[str, Path],
    links: Mapping[str, str],
    *,
    create_folders: bool,
    record: Path | None = None,
) -> None:
    """Write `files` (relative path -> source, copied not following a link), then
    make `links` (relative path -> target, as written), in `dest`, a folder of ours.

    Folders on the way are opened by descriptor, never through a link; with
    `create_folders` a missing one is made, else (a grader's copy, whose folders
    the saved state already made) the path is refused. Nothing that exists is
    replaced. A refusal is a `UserError` about `record` (or the file's source).
    """
    top = os.open(dest, _FOLDER)
    try:
        for rel, source in files.items():
            fd = _folder(top, rel, create_folders, record)
            try:
                _copy_in(source, fd, rel.rsplit("/", 1)[-1], record)
            finally:
                os.close(fd)
        for rel, target in links.items():
            fd = _folder(top, rel, create_folders, record)
            try:
                os.symlink(target, rel.rsplit("/", 1)[-1], dir_fd=fd)
            except OSError as exc:
                raise UserError(
                    f"the recorded link {rel!r} cannot be made: {exc.strerror}",
                    file=record,
                    hint="the run folder was changed after the run",
                ) from None
            finally:
                os.close(fd)
    finally:
        os.close(top)


def _folder(top: int, rel: str, create: bool, record: Path | None) -> int:
    """A descriptor of the folder `rel` lies in, walked from `top` without a link."""
    fd = os.dup(top)
    try:
        for part in rel.split("/")[:-1]:
            if create:
                # One made already, or a link: either way opened below, never followed.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                inner = os.open(part, _FOLDER, dir_fd=fd)
            except OSError as exc:
                why = "a link" if exc.errno == errno.ELOOP else exc.strerror
                raise UserError(
                    f"{rel!r} is not inside a folder of the saved state ({part}: {why})",
                    file=record,
                    hint="the run folder was changed after the run",
                ) from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy_in(source: Path, folder: int, name: str, record: Path | None) -> None:
    try:
        src = os.open(source, _READ)
    except OSError as exc:
        why = "a link" if exc.errno == errno.ELOOP else exc.strerror
        raise UserError(f"cannot read it: {why}", file=source) from None
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            raise UserError("cannot read it: not a regular file", file=source)
        try:
            dst = os.open(name, _CREATE, info.st_mode & KEPT_MODE, dir_fd=folder)
        except OSError as exc:
            raise UserError(
                f"{name!r} cannot be written: {exc.strerror}",
                file=record or source,
                hint="the run folder was changed after the run",
            ) from None
        try:
            copy_open(src, dst, info.st_size)
        finally:
            os.close(dst)
    finally:
        os.close(src)


class Unreadable(Exception):
    """A file under a folder was refused or could not be read without following a
    link (`read_inside` here, `report.html.source` for the site): the message says
    why (outside the folder, a link, not a regular file, too large, missing)."""


def read_inside(top: Path, rel: str, limit: int) -> bytes:
    """The bytes of the regular file `rel` under `top`, read without following a link.

    Every folder on the way is opened by descriptor from `top` with `O_NOFOLLOW`
    (as `_folder` walks), and the file itself with `O_NOFOLLOW | O_NONBLOCK`: a
    path through a link the agent made, or out of `top` (absolute, `..`), is
    refused, never followed on the host; so is a FIFO, a device or a folder, and
    a file larger than `limit` bytes. `Unreadable` says which.
    """
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise Unreadable(f'path "{rel}" leaves the folder (absolute, "." or "..")')
    try:
        fd = os.open(top, _FOLDER)
    except OSError as exc:
        raise Unreadable(f"the folder cannot be opened ({exc.strerror})") from None
    try:
        for number, part in enumerate(parts):
            last = number == len(parts) - 1
            try:
                inner = os.open(part, _READ if last else _FOLDER, dir_fd=fd)
            except OSError as exc:
                shown = "/".join(parts[: number + 1])
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(fd, part)):
                    raise Unreadable(f'"{shown}" is a link: not followed') from None
                if exc.errno == errno.ENOENT:
                    raise Unreadable(f'path "{rel}" does not exist') from None
                raise Unreadable(f'"{shown}": {exc.strerror}') from None
            os.close(fd)
            fd = inner
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unreadable(f'"{rel}" is not a regular file')
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Unreadable(f'"{rel}" is larger than {limit} bytes')
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        return False
