"""What a stage produced: each added, modified or deleted file with its
contents, and a diff against what was there before it and against the
baseline run's same stage.

"Before" is the previous stage's saved state (`after/` of the stage before it
in the same scenario run); a stage served its inputs by the fixtures has no
earlier state in the run folder, and the page says so. Contents are read
through `source` (never a link, never outside the run folder) and capped;
a file with a NUL byte in its first 8 KiB is shown as binary.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ci_evals.report.html.markup import esc, fold, pre, table
from ci_evals.report.html.source import Unreadable, read_capped

if TYPE_CHECKING:
    from ci_evals.results.model import FileChange, StageResult

SHOWN_BYTES = 256 * 1024  # of one file's content
DIFF_LINES = 2_000


@dataclass(frozen=True)
class StateRef:
    """A saved state to read files from: the run folder it is in, and its folder there."""

    run_dir: Path
    folder: str  # relative to run_dir: `<scenario>/<k>-<stage>/after`


def state_of(run_dir: Path, stage: StageResult) -> StateRef | None:
    """Where `stage`'s saved state is: `after/` in its folder (the trajectory's)."""
    rel = stage.trajectory or stage.produced_dir
    if not rel:
        return None
    return StateRef(run_dir, (PurePosixPath(rel).parent / "after").as_posix())


def files_section(
    stage: StageResult, here: StateRef | None, before: StateRef | None, baseline: StateRef | None
) -> str:
    if not stage.produced:
        return '<p class="muted">The stage changed no file.</p>'
    rows = [
        [esc(c.change), f"<code>{esc(c.path)}</code>", esc(c.kind), f"{c.size:,}"]
        for c in stage.produced
    ]
    parts = [table(["change", "path", "kind", "bytes"], rows)]
    if before is None:
        parts.append(
            '<p class="muted">What the files held before this stage came from the fixtures, '
            "which are not in the run folder: no diff against them.</p>"
        )
    for change in stage.produced:
        parts.append(_file(change, here, before, baseline))
    return "".join(parts)


def _file(
    change: FileChange, here: StateRef | None, before: StateRef | None, baseline: StateRef | None
) -> str:
    title = f"{esc(change.change)} <code>{esc(change.path)}</code>"
    if change.kind == "link":
        return fold(title, f"<p>a link to <code>{esc(change.target or '')}</code></p>")
    now = _read(here, change.path) if change.change != "deleted" else None
    old = _read(before, change.path) if change.change != "added" else None
    parts: list[str] = []
    if change.change == "deleted":
        parts.append("<p>Deleted. It held:</p>" + _content(old))
    else:
        parts.append(_content(now))
        if change.change == "modified":
            parts.append("<h4>Against the state before this stage</h4>" + _diff(old, now))
    if baseline is not None:
        theirs = _read(baseline, change.path)
        parts.append("<h4>Against the baseline run</h4>" + _diff(theirs, now))
    return fold(title, "".join(parts))


@dataclass(frozen=True)
class _Read:
    data: bytes | None
    size: int
    problem: str = ""


def _read(state: StateRef | None, path: str) -> _Read:
    if state is None:
        return _Read(None, 0, "not in the run folder")
    try:
        data, size = read_capped(state.run_dir, f"{state.folder}/{path}", SHOWN_BYTES)
    except Unreadable as exc:
        return _Read(None, 0, str(exc))
    return _Read(data, size)


def _binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _content(read: _Read | None) -> str:
    if read is None or read.data is None:
        why = read.problem if read is not None else "not in the run folder"
        return f'<p class="muted">Cannot show it: {esc(why)}.</p>'
    if _binary(read.data):
        return f'<p class="muted">Binary, {read.size:,} bytes.</p>'
    text = read.data.decode("utf-8", errors="replace")
    more = read.size - len(read.data)
    note = f'<div class="meta">… {more:,} more bytes not shown</div>' if more > 0 else ""
    return pre(text) + note


def _diff(old: _Read | None, new: _Read | None) -> str:
    if old is None or old.data is None or new is None or new.data is None:
        missing = old if old is None or old.data is None else new
        why = missing.problem if missing is not None else "not in the run folder"
        return f'<p class="muted">No diff: {esc(why)}.</p>'
    if _binary(old.data) or _binary(new.data):
        return f'<p class="muted">Binary: {old.size:,} → {new.size:,} bytes.</p>'
    if old.data == new.data and old.size == new.size:
        return '<p class="muted">The same content.</p>'
    lines = list(
        difflib.unified_diff(
            old.data.decode("utf-8", errors="replace").splitlines(),
            new.data.decode("utf-8", errors="replace").splitlines(),
            "before",
            "after",
            lineterm="",
        )
    )
    shown = "".join(_diff_line(line) for line in lines[:DIFF_LINES])
    more = len(lines) - DIFF_LINES
    note = f'<div class="meta">… {more:,} more diff lines</div>' if more > 0 else ""
    return f"<pre>{shown}</pre>{note}"


def _diff_line(line: str) -> str:
    css = {"+": "diff-add", "-": "diff-del", "@": "diff-hunk"}.get(line[:1], "")
    return f'<span class="{css}">{esc(line)}</span>\n' if css else esc(line) + "\n"
