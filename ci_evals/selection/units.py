"""Which units a change selects: the cases of a suite of cases, or the scenarios
of a suite of stages whose map names them. The stage (`selection.decide`) says
where the run starts; this says which units run.

For one changed path the selection found relevant: a path inside a case's
folder selects that case, one under a `mocks/` folder every case below the
folder that holds it (the CLI grants every mocked tool to every case), any other
path of the eval folder every case below its folder; a path the entries match
the units of *every* entry matching it (`cases:`, `tags:`, `scenarios:`; none for
`stage: none`; every unit when an entry names no units or a case that is not
there); a scenario's own fixture that scenario. Anything else that selects a
stage — a global, an uncovered file, the suite's fixtures, a changed suite or
manifest, a link's target — selects every unit, as do a fallback and a case file
that cannot be read. docs/compute-stage.md (*Units: which cases (or scenarios)
run*).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ci_evals.selection import decide
from ci_evals.selection.matcher import GlobMatcher

if TYPE_CHECKING:
    from ci_evals.selection.case_index import CaseIndex, CaseInfo
    from ci_evals.selection.stage_map import MapEntry, StageMap

CASES = "cases"
MOCKS = "mocks"  # `<eval dir>/mocks/<server>/`, also in a case group's or a case's folder
SCENARIOS = "scenarios"
# Why every unit runs, beside the selection's own reasons (decide.py's codes).
UNKNOWN_CASE = "unknown-case"  # an entry names a case or tag no case has
UNREADABLE_CASE = "unreadable-case"
# Reasons of a selection that cannot list its paths: every unit.
_FALLBACKS = frozenset(
    {decide.BASE_MISSING, decide.BASE_ZERO_SHA, decide.NO_MERGE_BASE, decide.LINK_TARGET_CHANGED}
)
_FIXTURE_SET = re.compile(r"[0-9]+-")


@dataclass(frozen=True)
class Units:
    """The units to run: `ids` (None: every unit), and why."""

    kind: str  # CASES or SCENARIOS
    ids: tuple[str, ...] | None
    reason: str  # why every unit runs (a decide reason or UNKNOWN_CASE...), else "selected"
    detail: str  # one line for a person
    why: Mapping[str, str] = field(default_factory=dict)  # id -> the first path selecting it

    @property
    def every(self) -> bool:
        return self.ids is None

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "all": self.ids is None,
            "ids": None if self.ids is None else list(self.ids),
            "reason": self.reason,
            "detail": self.detail,
        }

    def text(self) -> str:
        """`all` or the ids, space-separated (`none` when there are none)."""
        if self.ids is None:
            return "all"
        return " ".join(self.ids) or "none"


class _Every(Exception):
    """Raised inside the walk: every unit runs (reason, detail)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def select_units(
    stage_map: StageMap, selection: decide.Selection, index: CaseIndex | None = None
) -> Units | None:
    """The units `selection` runs (None: the map selects no units, only a stage).

    `index`: the eval folder's cases (read from the work tree when not given)."""
    if not stage_map.selects_units:
        return None
    kind = CASES if stage_map.evals is not None else SCENARIOS
    if stage_map.evals is not None and index is None:
        from ci_evals.selection.case_index import read_cases  # noqa: PLC0415 - case maps only

        index = read_cases(stage_map.repo_root, stage_map.evals)
    try:
        if selection.reason in _FALLBACKS or (selection.from_stage and not selection.matches):
            raise _Every(selection.reason, decide.quote_path(selection.detail))
        if index is not None and index.problem is not None:
            raise _Every(UNREADABLE_CASE, index.problem)
        chosen = _Walk(stage_map, index).run(selection.matches)
    except _Every as every:
        return Units(kind, None, every.reason, every.detail)
    ids = tuple(sorted(chosen))
    one = kind[:-1]  # "case", "scenario"
    detail = f"{len(ids)} {kind if len(ids) != 1 else one} selected" if ids else f"no {one} reached"
    return Units(kind, ids, "selected", detail, chosen)


class _Walk:
    """One pass over the changed paths, collecting unit ids (raising `_Every`)."""

    def __init__(self, stage_map: StageMap, index: CaseIndex | None) -> None:
        self.map = stage_map
        self.index = index
        self.matcher = GlobMatcher(stage_map.globs)
        excepted = [(e.index, g) for e in stage_map.entries for g in e.excepts]
        self.excepts = GlobMatcher([g for _, g in excepted]) if excepted else None
        self.excepted_entry = [i for i, _ in excepted]
        self.evals = stage_map.evals
        self.chosen: dict[str, str] = {}

    def run(self, matches: Iterable[decide.Match]) -> dict[str, str]:
        for m in matches:
            self.one(m)
        return self.chosen

    def add(self, ids: Iterable[str], why: str) -> None:
        for unit in ids:
            self.chosen.setdefault(unit, why)

    def one(self, m: decide.Match) -> None:
        shown = decide.quote_path(m.path)
        if m.rule == decide.GLOBAL_FILE:
            raise _Every(m.rule, f"{shown}: {m.why}")
        if self.evals is not None and m.path.startswith(self.evals + "/"):
            self._eval_path(m.path, shown)
            return
        if m.stage is None and m.rule != decide.STAGE_NONE:
            return  # ignored, or a listing-only change of the manifest
        if m.rule == decide.FIXTURE_CHANGED:
            self.add([self._scenario_fixture(m, shown)], f"{shown}: its own fixture")
            return
        if m.rule not in (decide.MATCHED, decide.STAGE_NONE):
            raise _Every(m.rule, f"{shown}: {m.why}")
        inside = self.map.relative_to_root(m.path)
        if inside is None:  # a compared file outside root that loads something
            raise _Every(m.rule, f"{shown}: {m.why}")
        entries = self._entries(inside)
        staged = [e for e in entries if e.stage is not None]
        if not staged and m.rule == decide.MATCHED:
            raise _Every(m.rule, f"{shown}: {m.why}")
        for entry in staged:
            where = f"entry {entry.glob!r} ({self.map.display}:{entry.line})"
            if not entry.units:
                raise _Every(decide.MATCHED, f"{shown}: {where} names no units: every unit")
            self.add(self._entry_units(entry, where), f"{shown}: {where}")

    def _entries(self, inside: str) -> list[MapEntry]:
        indices = self.matcher.matches(inside)
        if self.excepts is not None and indices:
            left_out = {self.excepted_entry[i] for i in self.excepts.matches(inside)}
            indices = [i for i in indices if i not in left_out]
        return [self.map.entries[i] for i in indices]

    def _entry_units(self, entry: MapEntry, where: str) -> list[str]:
        if entry.scenarios:
            return list(entry.scenarios)
        assert self.index is not None
        found: list[str] = []
        for pattern in entry.cases:
            hits = [c for c in self.index.cases if case_glob(pattern).fullmatch(c.name)]
            if not hits:
                raise _Every(UNKNOWN_CASE, f"{where}: no case is named like {pattern!r}")
            found += [c.unit_id for c in hits]
        for tag in entry.tags:
            hits = [c for c in self.index.cases if tag in c.tags]
            if not hits:
                raise _Every(UNKNOWN_CASE, f"{where}: no case has the tag {tag!r}")
            found += [c.unit_id for c in hits]
        return found

    def _eval_path(self, path: str, shown: str) -> None:
        assert self.index is not None and self.evals is not None
        case = self.index.case_at(path)
        if case is not None:  # its prompt, graders, anything in it: its own mocks too
            self.add([case.unit_id], f"{shown}: the case's own folder")
            return
        parts = path[len(self.evals) + 1 :].split("/")
        if MOCKS in parts[:-1]:  # the layer holding `mocks/`: every case below it
            layer = "/".join([self.evals, *parts[: parts.index(MOCKS)]])
            cases = self.index.under(layer)
            why = f"{shown}: a mock of the cases below {decide.quote_path(layer)}/"
            if layer == self.evals:
                raise _Every("mock-changed", f"{why}: every case may call it")
            self._cases(cases, why, layer)
            return
        folder = path.rpartition("/")[0]
        if folder == self.evals:
            raise _Every("eval-folder-changed", f"{shown}: in the eval folder, in no case")
        self._cases(self.index.under(folder), f"{shown}: in no case (renamed or deleted?)", folder)

    def _cases(self, cases: tuple[CaseInfo, ...], why: str, folder: str) -> None:
        if not cases:  # a case removed, or moved: nothing says which cases it touches
            raise _Every(UNKNOWN_CASE, f"{why}: no case below {decide.quote_path(folder)}/")
        self.add([c.unit_id for c in cases], why)

    def _scenario_fixture(self, m: decide.Match, shown: str) -> str:
        """The scenario of `fixtures/<name>/<k>-*/...` (the suite's own sets: every unit)."""
        fixtures = self.map.fixtures
        rest = m.path[len(fixtures) + 1 :] if fixtures else m.path
        name, _, below = rest.partition("/")
        if _FIXTURE_SET.match(name) or not below:
            raise _Every(m.rule, f"{shown}: {m.why}")
        return name


def case_glob(glob: str) -> re.Pattern[str]:
    """The CLI's case glob (`--case`): `*` any text, `?` one character, all else literal."""
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob]
    return re.compile("".join(parts), re.DOTALL)


# The stage answer's reason when only the units decided it (a case's file that
# an entry with `stage: none` also matches, say): the case's own folder wins.
CASE_CHANGED = "case-changed"


def with_units(
    selection: decide.Selection, units: Units | None, stage_map: StageMap | None = None
) -> decide.Selection:
    """`selection` whose plain answer agrees with `units`: a unit to run is stage 1,
    and a change decided by a path in the eval folder says so (the stage rules alone
    would call a case's prompt an `unmatched-file`)."""
    if units is None:
        return selection
    if units.ids and selection.from_stage is None:  # e.g. an entry with `stage: none`
        first = min(units.why.items())
        return replace(selection, from_stage=1, reason=CASE_CHANGED, detail=first[1])
    decided = selection.decided_by
    evals = stage_map.evals if stage_map is not None else None
    if evals is None or decided is None or not decided.path.startswith(evals + "/"):
        return selection
    what = "the cases it selects" if units.ids is not None else f"every case ({units.reason})"
    detail = f"{decide.quote_path(decided.path)}: in the eval folder: runs {what}"
    return replace(selection, reason=CASE_CHANGED, detail=detail)
