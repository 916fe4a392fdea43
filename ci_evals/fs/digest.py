"""SHA-256 of a file and of a folder tree: what a run records of the suite and the plugin.

`fixtures update` compares them with the suite and plugin of today, so that a
run of another revision is not promoted to a fixture by mistake.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ci_evals.fs.walk import walk

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(folder: Path) -> str:
    """Every file below `folder` (links followed by `fs.walk`, as the plugin copy follows
    them; a link back to a folder it is inside not entered):
    its relative path and content, in sorted order; folders themselves do not count."""
    digest = hashlib.sha256()
    found: list[tuple[str, str]] = []
    for rel, kind, entry in walk(folder, follow_links=True):
        if kind in ("file", "link"):  # a link that cannot be followed fails to read
            found.append((rel, entry.path))
        elif kind == "other":  # a pipe would block the read: never hash one
            raise OSError(f"{entry.path}: not a regular file")
    for rel, path in sorted(found):
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(file_sha256(Path(path)).encode("ascii") + b"\n")
    return digest.hexdigest()
