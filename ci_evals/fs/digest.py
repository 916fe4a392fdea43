"""SHA-256 of a file and of a folder tree: what a run records of the suite and the plugin.

`fixtures update` compares them with the suite and plugin of today, so that a
run of another revision is not promoted to a fixture by mistake.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_sha256(folder: Path) -> str:
    """Every file below `folder` (links followed, as the plugin copy follows them):
    its relative path and content, in sorted order; folders themselves do not count."""
    digest = hashlib.sha256()
    found: list[tuple[str, str]] = []
    for top, dirs, files in os.walk(folder, followlinks=True):
        dirs.sort()
        for name in files:
            path = os.path.join(top, name)
            found.append((os.path.relpath(path, folder).replace(os.sep, "/"), path))
    for rel, path in sorted(found):
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(file_sha256(Path(path)).encode("ascii") + b"\n")
    return digest.hexdigest()
