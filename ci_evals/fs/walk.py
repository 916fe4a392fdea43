"""The one tree walk: every folder, file and link under a folder; one link policy.

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

Links are never followed by default (`kind` is `link`). With `follow_links`
— the view a link-following copy of a plugin has — a link is classified by
what it points at (`dir`, `file`, `other`) and a linked folder is entered; a
link that cannot be followed (dangling, a loop of links, closed to us) stays
`link`, and a folder that is one of the real folders it is inside, or above
one (`a/b -> ..`), is `loop` and not entered, so a walk always ends.

By default any error is raised (fixtures, checkpoints: a tree that cannot be
read whole must not be copied in part). A live tree, one the agent may still
be changing or may have closed to us, is walked with `skip_vanished` (a folder
or entry removed or replaced meanwhile is passed over) and `skip_unreadable`
(a folder that cannot be listed is passed over, its content unseen).

`selection.case_index` alone walks with `os.walk`, by the same policy (links not
entered): it stops descending at a folder once its case file is seen, which this
walk cannot be told (tests/test_claims.py keeps it the only one).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator
from operator import attrgetter
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Literal

Kind = Literal["dir", "file", "link", "other", "loop"]

_VANISHED = (FileNotFoundError, NotADirectoryError)
_BY_NAME = attrgetter("name")


def walk(
    top: str | os.PathLike[str],
    *,
    exclude: Collection[str] = (),
    skip_vanished: bool = False,
    skip_unreadable: bool = False,
    follow_links: bool = False,
    takes: Callable[[str, os.DirEntry[str]], bool] | None = None,
) -> Iterator[tuple[str, Kind, os.DirEntry[str]]]:
    """`(relative POSIX path, kind, entry)` of everything under `top` (see the module doc).

    `exclude` holds relative POSIX paths left out: an excluded folder is not entered.
    With `follow_links`, `takes(rel, entry)` may leave out more the same way
    (the plugin's files as its copy takes them: `fs.plugin_files`).
    """
    if follow_links:
        yield from _walk_following(top, exclude, takes)
        return
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


def files_ending(top: Path, suffix: str) -> list[Path]:
    """Every file below `top` whose name ends in `suffix` (`top / rel`), in path order:
    a regular file, or a link to one. A linked folder is not entered, and a folder
    that cannot be listed or vanished is passed over (what pathlib's `rglob` did for
    the rubric and command folders that read them here)."""
    return sorted(
        top / rel
        for rel, kind, entry in walk(top, skip_vanished=True, skip_unreadable=True)
        if entry.name.endswith(suffix)
        and (kind == "file" or (kind == "link" and os.path.isfile(entry.path)))
    )


def _walk_following(
    top: str | os.PathLike[str],
    exclude: Collection[str],
    takes: Callable[[str, os.DirEntry[str]], bool] | None = None,
) -> Iterator[tuple[str, Kind, os.DirEntry[str]]]:
    """`walk` with links followed: each folder entered with the real folders above it."""
    excluded = frozenset(exclude)
    start = os.fspath(top)
    stack: list[tuple[str, str, frozenset[str]]] = [
        ("", start, frozenset({os.path.realpath(start)}))
    ]
    while stack:
        prefix, folder, chain = stack.pop()
        below: list[tuple[str, str, frozenset[str]]] = []
        for entry in _listing(folder, False, False):
            rel = prefix + entry.name
            if (excluded and rel in excluded) or (takes is not None and not takes(rel, entry)):
                continue
            kind: Kind
            if entry.is_symlink():
                try:
                    mode = os.stat(entry.path).st_mode  # what the link points at
                except OSError:
                    kind = "link"  # dangling, a loop of links, or closed to us
                else:
                    kind = "dir" if S_ISDIR(mode) else "file" if S_ISREG(mode) else "other"
            elif entry.is_dir(follow_symlinks=False):
                kind = "dir"
            elif entry.is_file(follow_symlinks=False):
                kind = "file"
            else:
                kind = "other"
            if kind == "dir":
                real = os.path.realpath(entry.path)
                if any(c == real or c.startswith(real + os.sep) for c in chain):
                    kind = "loop"  # entering it would never end
                else:
                    below.append((rel + "/", entry.path, chain | {real}))
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
