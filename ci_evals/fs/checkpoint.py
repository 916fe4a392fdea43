"""The workspace as it was before a stage, put back before a retried attempt.

A stage whose model endpoint failed is run again (`ci_evals.agents.retry`). The
failed attempt may already have written, changed or deleted files; the next
attempt must start from what the stage started from, or its verdict would
rest on files it did not write. `FolderCheckpoint.save` copies the folders
(the workspace and the plugin copy) before the first attempt; `restore` empties
them and copies the saved state back; `discard` removes the copy.

A full copy, made only when retries are possible: an agent's tools may write
a file in place (truncate and rewrite), so hard links would share the damage,
and which files an attempt will touch is not known before it runs. Links are
copied as links (never followed); files keep their permission bits.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

from ci_evals.fs.copy import KEPT_MODE, copy_many
from ci_evals.fs.walk import walk


class FolderCheckpoint:
    """A saved copy of `folders`, kept under `store` (which must not exist yet)."""

    def __init__(self, folders: Sequence[Path], store: Path) -> None:
        self.folders = tuple(folders)
        self.store = store
        self.saved = False

    def save(self) -> None:
        self.store.mkdir(parents=True)
        for index, folder in enumerate(self.folders):
            _mirror(folder, self.store / str(index))
        self.saved = True

    def restore(self) -> None:
        """Make each folder exactly what it was at `save` (raises OSError when it cannot).

        Never through a link: the agent may have replaced a folder (or one
        inside it) with a link to somewhere else; the link is removed, and
        what it points at is left alone.
        """
        if not self.saved:
            raise RuntimeError("restore() before save()")
        for index, folder in enumerate(self.folders):
            try:
                kind = os.lstat(folder).st_mode
            except FileNotFoundError:
                kind = None
            if kind is not None and not stat.S_ISDIR(kind):  # a link or a file in its place
                os.unlink(folder)
                kind = None
            if kind is None:
                os.mkdir(folder)
            _empty(folder)
            _mirror(self.store / str(index), folder)

    def discard(self) -> None:
        shutil.rmtree(self.store, ignore_errors=True)
        self.saved = False


def _mirror(source: Path, dest: Path) -> None:
    """Copy the tree `source` into the folder `dest` (created if missing)."""
    dest.mkdir(parents=True, exist_ok=True)
    base = str(dest) + os.sep
    files: list[tuple[str, str]] = []
    folders: list[tuple[str, str]] = [(str(source), str(dest))]
    for rel, kind, entry in walk(source):
        target = base + rel
        if kind == "dir":
            os.mkdir(target)
            folders.append((entry.path, target))
        elif kind == "link":
            os.symlink(os.readlink(entry.path), target)
        elif kind == "file":
            files.append((entry.path, target))
        # anything else (a FIFO, a socket) is not workspace content
    for _ in copy_many(files):
        pass
    for src, dst in reversed(folders):  # last: a read-only folder takes no new files
        os.chmod(dst, os.stat(src).st_mode & KEPT_MODE)  # as files: never setgid


def _empty(folder: Path) -> None:
    """Remove everything inside the real folder `folder` (not a link: checked by the
    caller), making folders writable on the way down. Links are removed, never
    followed. No recursion: an agent can make a tree thousands of folders deep."""
    top = str(folder)
    os.chmod(top, stat.S_IMODE(os.lstat(top).st_mode) | stat.S_IRWXU)
    folders = [top]
    # `walk` lists a folder only after handing it out: opened here first, then listed.
    for _, kind, entry in walk(folder):
        if kind == "dir":
            os.chmod(
                entry.path, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode) | stat.S_IRWXU
            )
            folders.append(entry.path)
        else:
            os.unlink(entry.path)
    for current in reversed(folders[1:]):  # bottom-up: each is empty by now
        os.rmdir(current)
