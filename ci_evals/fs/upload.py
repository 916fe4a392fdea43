"""A folder CI uploads holds folders and regular files only: every other entry removed.

`actions/upload-artifact` follows links: a link in the run folder uploads
whatever it points at when the upload step reads it — `zz -> /proc/self/environ`
is the upload step's own environment, `ACTIONS_RUNTIME_TOKEN` with it. ci-evals
never makes a link or a special file there (a workspace's links are recorded
as data, docs/isolation.md, *The run folder*), but an unisolated agent or
command grader can: `--out` is on our command line (`/proc/<pid>/cmdline`).

So a command that writes such a folder ends with `seal`: one walk of the
whole folder, links not followed, removing every link, pipe, socket and
device (the entry itself, never what it points at) and then refusing, one
line naming the first. Removed and not only refused: the upload step runs
after a failed one too (`if: always()`). `clear` removes without refusing, on
the way out of a command that already fails for another reason.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs.walk import walk


def clear(folder: Path) -> list[str]:
    """Remove every entry of `folder` that is neither a folder nor a regular file, and
    `folder` itself if it is not a folder; what was removed (relative, `.` the top)."""
    try:
        top = os.lstat(folder)
    except FileNotFoundError:
        return []  # nothing written, nothing to upload
    if not stat.S_ISDIR(top.st_mode):
        if not stat.S_ISREG(top.st_mode):
            os.unlink(folder)  # the folder swapped for a link: the link goes, not its target
            return ["."]
        return []
    removed = []
    for rel, kind, entry in walk(folder):
        if kind in ("link", "other"):
            os.unlink(entry.path)
            removed.append(rel)
    return removed


def seal(folder: Path, what: str) -> None:
    """`clear(folder)`, then a one-line `UserError` naming the first entry it removed."""
    try:
        removed = clear(folder)
    except OSError as exc:  # fail closed: a folder we cannot walk whole is not sealed
        raise UserError(
            f"cannot check {what} {folder} for links before it is uploaded: "
            f"{exc.strerror or exc} ({exc.filename!r})"
        ) from None
    if not removed:
        return
    more = f" and {len(removed) - 1} more" if len(removed) > 1 else ""
    raise UserError(
        f"{what} {folder} held {removed[0]!r}{more}, a link or special file ci-evals never "
        "writes (an unisolated agent or grader's), removed so that no upload follows it",
        hint="its verdict is not to be trusted: run the agent in a sandbox (docs/isolation.md)",
    )


@contextmanager
def sealed(folder: Path, what: str) -> Iterator[None]:
    """`seal(folder, what)` when the block ends; when it raises, `clear` alone, so that
    its own error is the one reported and the folder is still safe to upload."""
    try:
        yield
    except BaseException:
        with suppress(OSError):
            clear(folder)
        raise
    seal(folder, what)
