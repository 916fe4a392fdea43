"""The one tree walk: every folder, file and link under a folder, links never followed.

`walk(top)` yields `(rel, kind, entry)` for each entry below `top`: `rel` is
its POSIX path relative to `top`, `kind` one of `dir`, `file` (a regular
file), `link` (a symbolic link, whatever it points at) or `other` (a pipe, a
socket, a device), and `entry` the `os.DirEntry`, which holds the full path
(`entry.path`) and caches its `lstat` (`entry.stat(follow_symlinks=False)`).
The kind comes from the directory listing itself where the file system says
it (no system call per entry), so walking costs one `scandir` per folder.

The order is stable: each folder's entries sorted by name, a folder before
everything in it, subfolders depth first in name order. A folder is listed
whole and closed before its entries are handed out, so a deep tree never
holds more than one folder open. No recursion: an agent can make a tree
thousands of folders deep.

By default any error is raised (fixtures, checkpoints: a tree that cannot be
read whole must not be copied in part). A live tree, one the agent may still
be changing or may have closed to us, is walked with `skip_vanished` (a folder
or entry removed or replaced meanwhile is passed over) and `skip_unreadable`
(a folder that cannot be listed is passed over, its content unseen).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from operator import attrgetter
from typing import Literal

Kind = Literal["dir", "file", "link", "other"]

_VANISHED = (FileNotFoundError, NotADirectoryError)
_BY_NAME = attrgetter("name")


def walk(
    top: str | os.PathLike[str],
    *,
    exclude: Collection[str] = (),
    skip_vanished: bool = False,
    skip_unreadable: bool = False,
) -> Iterator[tuple[str, Kind, os.DirEntry[str]]]:
    """`(relative POSIX path, kind, entry)` of everything under `top` (see the module doc).

    `exclude` holds relative POSIX paths left out: an excluded folder is not entered.
    """
    excluded = frozenset(exclude)
    stack = [("", os.fspath(top))]
    while stack:
        prefix, folder = stack.pop()
        listed = _listing(folder, skip_vanished, skip_unreadable)
        below: list[tuple[str, str]] = []
        for entry in listed:
            rel = prefix + entry.name
            if excluded and rel in excluded:
                continue
            kind: Kind
            try:  # the listing's file type: a system call only where it has none
                if entry.is_file(follow_symlinks=False):  # the most common first
                    kind = "file"
                elif entry.is_dir(follow_symlinks=False):
                    kind = "dir"
                elif entry.is_symlink():
                    kind = "link"
                else:
                    kind = "other"
            except FileNotFoundError:
                if skip_vanished:
                    continue
                raise
            if kind == "dir":
                below.append((rel + "/", entry.path))
            yield rel, kind, entry
        stack.extend(reversed(below))


def _listing(folder: str, skip_vanished: bool, skip_unreadable: bool) -> list[os.DirEntry[str]]:
    """The folder's entries sorted by name, read whole (the folder closed again)."""
    try:
        with os.scandir(folder) as scan:
            return sorted(scan, key=_BY_NAME)
    except _VANISHED:
        if skip_vanished:
            return []  # removed or replaced while we walked
        raise
    except PermissionError:
        if skip_unreadable:
            return []  # a folder closed to us: its entries cannot be seen
        raise
