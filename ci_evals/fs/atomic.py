"""The one atomic file write: readers see the old file or the new one, never half.

`write_atomic` writes to a temporary file in the target's own folder (so the
rename stays on one file system), syncs it, renames it over the target and
syncs the folder; on any failure the temporary file is removed and the target
is untouched. Used for `results.json`, re-graded results, report outputs and
the stage map's cache (`durable=False`).

Only the standard library's os-level modules: `selection` may use it on the
hot path.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_MODE = 0o644  # a CI artifact: readable by whoever uploads or reads it


def write_atomic(path: Path, data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """Replace `path` with `data` atomically. The folder must exist.

    `mode` is the new file's permission bits; None keeps those of the file it
    replaces, or `DEFAULT_MODE` for a new file (mkstemp alone would give 0600).
    `durable=False` skips the two syncs (~10 ms): for a cache, which a crash may
    lose, leave old or (the data not yet on disk) leave short: its reader must check
    it (the map cache's CRC-32 does). Raises `OSError`; the target is then
    unchanged and no temporary file is left.
    """
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = DEFAULT_MODE
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
