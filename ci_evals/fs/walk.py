"""The one tree walk: every folder, file and link under a folder; one link policy.

`walk(top)` yields `(rel, kind, entry)` for each entry below `top`: `rel` its POSIX
path relative to `top`, `kind` one of `dir`, `file`, `link` (whatever it points
at) or `other` (a pipe, a socket, a device), `entry` the `os.DirEntry` (its
`lstat` cached): one `scandir` per folder, names sorted, a folder before its
content, depth first, no recursion (an agent can make a tree thousands deep).

Links are never followed by default. With `follow_links` (a link-following copy
of a plugin) a link is classified by its target and a linked folder entered; one
that cannot be followed stays `link`, and one that leads back into or above a
folder it is inside is `loop`, not entered, so a walk always ends. Any error is
raised by default (a tree that cannot be read whole must not be copied in part);
a live tree is walked with `skip_vanished` and `skip_unreadable`.

`selection.case_index` alone walks with `os.walk` (links not entered): it stops
at a folder once its case file is seen (tests/test_claims.py keeps it the only one).
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
