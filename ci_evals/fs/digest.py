"""SHA-256 of a file and of a folder tree: what a run records of the suite and the plugin.

`fixtures update` compares them with the suite and plugin of today, so that a
run of another revision is not promoted to a fixture by mistake.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ci_evals.fs.plugin_files import PluginFiles, taker
from ci_evals.fs.walk import walk

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(folder: Path, files: PluginFiles | None = None) -> str:
    """Every file below `folder` (links followed by `fs.walk`, as the plugin copy follows
    them): its relative path and content, in sorted order; folders themselves do not
    count. A link back to a folder it is inside is not entered, but its path and
    target count, so adding one changes the digest. With `files`, only what the
    plugin's copies take (`fs.plugin_files`)."""
    digest = hashlib.sha256()
    found: list[tuple[str, str]] = []
    loops: list[tuple[str, str]] = []
    for rel, kind, entry in walk(folder, follow_links=True, takes=taker(files)):
        if kind in ("file", "link"):  # a link that cannot be followed fails to read
            found.append((rel, entry.path))
        elif kind == "loop":  # not entered, but there: two trees differing by one differ
            loops.append((rel, os.readlink(entry.path) if entry.is_symlink() else ""))
        elif kind == "other":  # a pipe would block the read: never hash one
            raise OSError(f"{entry.path}: not a regular file")
    for rel, path in sorted(found):
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(file_sha256(Path(path)).encode("ascii") + b"\n")
    for rel, target in sorted(loops):  # after the files: a tree without loops digests as before
        digest.update(b"loop\0" + rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(target.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()
