"""What a stage produced: each added, modified or deleted file with its
contents, and a diff against what was there before it and against the
baseline run's same stage.

"Before" is the previous stage's saved state (`after/` of the stage before it
in the same scenario run); a stage served its inputs by the fixtures has no
earlier state in the run folder, and the page says so. Contents are read
through `source` (never a link, never outside the run folder) and capped;
a file with a NUL byte in its first 8 KiB is shown as binary.

A diff's work is bounded, not only what it shows: difflib's matcher takes
time quadratic in the lines on distinct lines in a new order (five modified
84 KB files once took 80-90 s). The lines both sides share at the start and the end
are taken off first (linear); the matcher sees only what lies between, and
every step of its search is counted against a `DiffBudget`, per diff and per
site. A diff that would go over is not matched line by line: the part that
differs is shown whole, as removed and then added, and the page says so.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal, cast

from ci_evals.fs.links import Unreadable
from ci_evals.report.html.markup import esc, fold, pre, table
from ci_evals.report.html.source import read_capped

if TYPE_CHECKING:
    from ci_evals.results.model import FileChange, StageResult

SHOWN_BYTES = 256 * 1024  # of one file's content
DIFF_LINES = 2_000  # shown of one diff; the rest is counted
CONTEXT = 3  # unchanged lines around a change, as `diff -u`


@dataclass
class DiffBudget:
    """The matching work the site's diffs may do, in steps of difflib's search (each
    line of the old side it looks at, plus each place in the new side it tries that
    line at). `per_diff` bounds one diff, `per_site` them all; `spent` counts."""

    # About 0.2 s and 2 s of a busy 2-core machine's time in the worst case
    # (benchmarks/bench_report_diffs.py); an edit within a large file takes a
    # few steps (its lines before and after the edit are never matched).
    per_diff: int = 1_000_000
    per_site: int = 10_000_000
    spent: int = 0

    def allowance(self) -> int:
        return max(0, min(self.per_diff, self.per_site - self.spent))


class _OverBudget(Exception):
    pass


_Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


class _Matcher(difflib.SequenceMatcher[str]):
    """difflib's matcher on the part of two texts between their common start and end,
    every search counted before it runs, and refused once it would exceed `allowance`."""

    def __init__(self, old: Sequence[str], new: Sequence[str], allowance: int) -> None:
        shorter = min(len(old), len(new))
        head = 0
        while head < shorter and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < shorter - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        self.head, self.tail, self.sizes = head, tail, (len(old), len(new))
        self.allowance, self.spent = allowance, 0
        self.over_budget = False
        self.middle = (old[head : len(old) - tail], new[head : len(new) - tail])
        super().__init__(None, *self.middle)

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        old = self.middle[0]
        ahi = len(old) if ahi is None else ahi
        # Its inner loop walks every position of a[i] in b, for each i in alo..ahi:
        # this many steps at most. `b2j` is difflib's own index of b (line -> its
        # positions; junk and popular lines have none), which typeshed does not declare.
        positions = cast("dict[str, list[int]]", vars(self)["b2j"])
        cost = ahi - alo + sum(len(positions.get(line, ())) for line in islice(old, alo, ahi))
        if self.spent + cost > self.allowance:
            raise _OverBudget
        self.spent += cost
        return super().find_longest_match(alo, ahi, blo, bhi)

    def get_opcodes(self) -> list[_Opcode]:
        """The whole texts' opcodes: the common start and end around the middle's,
        which is one block of removed and added lines when matching it is over budget."""
        try:
            middle = super().get_opcodes()
        except _OverBudget:
            self.over_budget = True
            removed, added = (len(side) for side in self.middle)
            tag: Literal["replace", "delete", "insert"] = (
                "replace" if removed and added else ("delete" if removed else "insert")
            )
            middle = [(tag, 0, removed, 0, added)] if removed or added else []
        head, (old, new) = self.head, self.sizes
        codes: list[_Opcode] = [("equal", 0, head, 0, head)] if head else []
        codes += [(tag, i + head, j + head, k + head, m + head) for tag, i, j, k, m in middle]
        if self.tail:
            codes.append(("equal", old - self.tail, old, new - self.tail, new))
        return codes


def unified(old: Sequence[str], new: Sequence[str], budget: DiffBudget) -> tuple[list[str], str]:
    """`diff -u` of two texts' lines within `budget` (what it spent is counted there):
    the diff's lines, and '' or why it is not matched line by line."""
    allowance = budget.allowance()
    matcher = _Matcher(old, new, allowance)
    lines = list(_hunks(matcher, old, new))
    budget.spent += matcher.spent
    if not matcher.over_budget:
        return lines, ""
    where = (
        f"more than {budget.per_diff:,} steps"
        if allowance == budget.per_diff
        else f"the site's {budget.per_site:,} steps for diffs are spent"
    )
    first = matcher.head + 1
    return lines, (
        f"Not matched line by line ({where}): lines {first:,} to {len(old) - matcher.tail:,} "
        f"before and {first:,} to {len(new) - matcher.tail:,} after are shown whole, "
        "as removed and added."
    )


def _hunks(matcher: _Matcher, old: Sequence[str], new: Sequence[str]) -> Iterator[str]:
    """The lines of `difflib.unified_diff` (its format), from `matcher`'s opcodes."""
    groups = list(matcher.get_grouped_opcodes(CONTEXT))
    if not groups:
        return
    yield "--- before"
    yield "+++ after"
    for group in groups:
        first, last = group[0], group[-1]
        yield f"@@ -{_span(first[1], last[2])} +{_span(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in old[i1:i2])
                continue
            yield from ("-" + line for line in old[i1:i2])
            yield from ("+" + line for line in new[j1:j2])


def _span(start: int, stop: int) -> str:
    """A hunk's range as `diff -u` writes it (difflib's `_format_range_unified`)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


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
    stage: StageResult,
    here: StateRef | None,
    before: StateRef | None,
    baseline: StateRef | None,
    budget: DiffBudget,
) -> str:
    if not stage.produced:
        return '<p class="muted">The stage changed no file.</p>'
    rows = [
        [esc(c.change), f"<code>{esc(c.path)}</code>", esc(c.kind), f"{c.size:,}"]
        for c in stage.produced
    ]
    parts = [table(["change", "path", "kind", "bytes"], rows)]
    if stage.produced_omitted:
        parts.append(
            f'<p class="muted">and {stage.produced_omitted:,} more change(s) the results '
            "file does not list (its listing's byte budget): see the stage's "
            "<code>produced/</code> folder.</p>"
        )
    if before is None:
        parts.append(
            '<p class="muted">What the files held before this stage came from the fixtures, '
            "which are not in the run folder: no diff against them.</p>"
        )
    for change in stage.produced:
        parts.append(_file(change, here, before, baseline, budget))
    return "".join(parts)


def _file(
    change: FileChange,
    here: StateRef | None,
    before: StateRef | None,
    baseline: StateRef | None,
    budget: DiffBudget,
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
            parts.append("<h4>Against the state before this stage</h4>" + _diff(old, now, budget))
    if baseline is not None:
        theirs = _read(baseline, change.path)
        parts.append("<h4>Against the baseline run</h4>" + _diff(theirs, now, budget))
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


def _diff(old: _Read | None, new: _Read | None, budget: DiffBudget) -> str:
    if old is None or old.data is None or new is None or new.data is None:
        missing = old if old is None or old.data is None else new
        why = missing.problem if missing is not None else "not in the run folder"
        return f'<p class="muted">No diff: {esc(why)}.</p>'
    if _binary(old.data) or _binary(new.data):
        return f'<p class="muted">Binary: {old.size:,} → {new.size:,} bytes.</p>'
    if old.data == new.data and old.size == new.size:
        return '<p class="muted">The same content.</p>'
    lines, unmatched = unified(
        old.data.decode("utf-8", errors="replace").splitlines(),
        new.data.decode("utf-8", errors="replace").splitlines(),
        budget,
    )
    said = f'<p class="muted">{esc(unmatched)}</p>' if unmatched else ""
    shown = "".join(_diff_line(line) for line in lines[:DIFF_LINES])
    more = len(lines) - DIFF_LINES
    note = f'<div class="meta">… {more:,} more diff lines</div>' if more > 0 else ""
    return f"{said}<pre>{shown}</pre>{note}"


def _diff_line(line: str) -> str:
    css = {"+": "diff-add", "-": "diff-del", "@": "diff-hunk"}.get(line[:1], "")
    return f'<span class="{css}">{esc(line)}</span>\n' if css else esc(line) + "\n"
