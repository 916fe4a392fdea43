"""Handing folders to the sandbox's uid and back, for sandboxes that run code under
another uid than ci-evals (docker's `sandbox` user; a command grader's code under test).

Links are never followed: the folders are the agent's, and a link planted in
them (`dir -> /etc`) must not make ci-evals change a host file's owner.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ci_evals.fs.walk import walk

Owners = dict[Path, tuple[int, int]]


def hand_over(folder: Path, uid: int, gid: int, owners: Owners) -> None:
    """Give `folder` and everything in it to `uid:gid` (links not followed), noting
    each entry's owner in `owners` first (a user's own folder, under
    `mcp-check --image`, must not stay another uid's)."""
    entries = [(folder, folder.lstat())]
    entries += [(folder / rel, entry.stat(follow_symlinks=False)) for rel, _, entry in walk(folder)]
    for path, info in entries:
        if (info.st_uid, info.st_gid) != (uid, gid):
            owners.setdefault(path, (info.st_uid, info.st_gid))
            os.lchown(path, uid, gid)


def give_back(owners: Owners) -> None:
    """The owners `hand_over` noted, restored where the entry is still there
    (what the sandbox created stays the sandbox user's)."""
    for path, (uid, gid) in owners.items():
        # The sandbox may have swapped a folder on the way for a link (`dir ->
        # /etc`): follow none. It is gone by now, so nothing changes meanwhile.
        if os.path.realpath(path.parent) != str(path.parent):
            continue
        with contextlib.suppress(OSError):
            os.lchown(path, uid, gid)
    owners.clear()


def strip_setid(folder: Path) -> None:
    """Clear the setuid and setgid bits of every file and folder in `folder`
    (links not followed). Run once nothing inside runs any more: code that ran
    as root there (a grader's container, `bwrap` as root) could otherwise leave
    `cp /bin/sh x; chmod 4755 x`, a root shell for any host user who reaches it."""
    entries = walk(folder, skip_vanished=True, skip_unreadable=True)
    for path in (folder, *(Path(entry.path) for _, _, entry in entries)):
        with contextlib.suppress(OSError):
            info = path.lstat()
            if info.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISLNK(info.st_mode):
                os.chmod(path, stat.S_IMODE(info.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
