"""A change to `ci-evals.yaml` that touches only phase contracts: which stages it affects.

The suite is a global file of the stage map: any change to it used to mean a
full run. But a change to stage k's `produces`/`consumes` (docs/contracts.md)
changes what stage k is graded on, and what stages after it may read; it
cannot change stages 1..k-1. So the suite is compared at the merge base and
at HEAD (`git cat-file blob REV:PATH`), structurally (parsed YAML, so
comments, layout and key order do not count):

- everything but the stages' `produces` and `consumes` is equal: the answer
  is the lowest stage whose contract differs (`contract-changed`); the later
  stages that consume what it produces are named as affected too;
- anything else differs (a prompt, a limit, a grader, a stage added), the
  file is missing on either side, or either side does not parse: a full run
  from stage 1 (`global-file`), as before — fail closed.

Hot path: only PyYAML (already needed for the stage map) and git; no
validation of the suite (the run does that).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ci_evals import git
from ci_evals.selection.decide import (
    CONTRACT_CHANGED,
    FIXTURE_CHANGED,
    GLOBAL_FILE,
    IGNORED,
    LISTING_ONLY,
    MATCHED,
    UNMATCHED_FILE,
    Match,
    Selection,
    quote_path,
    select,
)
from ci_evals.selection.manifest_change import compare_manifest, compare_marketplace

if TYPE_CHECKING:
    from ci_evals.selection.matcher import GlobMatcher
    from ci_evals.selection.stage_map import StageMap

SUITE_FILE = "ci-evals.yaml"
CONTRACT_KEYS = ("produces", "consumes")


def suite_paths(global_globs: Sequence[str]) -> frozenset[str]:
    """The suite files (`ci-evals.yaml`) the stage map's globals name, as paths.

    `global_globs` are repo-relative globs (`StageMap.global_paths`). A literal
    one names its file; one written without a slash (`ci-evals.yaml`, which
    matches at any depth: `DIR/**/ci-evals.yaml`) names the file beside the map,
    and a change to a deeper one stays a global change. Any other wildcard
    names no single file: what it matches stays global, a full run — that can
    only run more.
    """
    found = set()
    for glob in global_globs:
        path = glob.lstrip("/")
        if path == f"**/{SUITE_FILE}":
            path = SUITE_FILE
        elif path.endswith(f"/**/{SUITE_FILE}"):
            path = path[: -len(f"**/{SUITE_FILE}")] + SUITE_FILE
        if not _GLOB_META.intersection(path) and posixpath.basename(path) == SUITE_FILE:
            found.add(path)
    return frozenset(found)


_GLOB_META = frozenset("*?[\\")


@dataclass(frozen=True)
class SuiteChange:
    stage: int | None  # the lowest stage affected (1 on a fallback); None: nothing
    contracts_only: bool  # only contracts changed (else: a full run)
    detail: str  # one line for a person
    affected: tuple[int, ...] = ()  # every stage the contract change affects


# Which cause is reported when two have the same stage (as in `decide`).
_RANK = {GLOBAL_FILE: 0, UNMATCHED_FILE: 1, FIXTURE_CHANGED: 2, CONTRACT_CHANGED: 2, MATCHED: 3}


def decide_compared(
    repo: Path,
    chosen: Selection,
    stage_map: StageMap | None = None,
    matcher: GlobMatcher | None = None,
) -> Selection:
    """`chosen` with the files the Selector set aside decided by comparing their two
    versions: suite files by `compare`, the map's marketplace file and manifest
    (`StageMap.compared_paths`) by `manifest_change`."""
    if not chosen.to_compare:
        return chosen
    extra: list[Match] = []
    notes = list(chosen.notes)
    for path in chosen.to_compare:
        if stage_map is not None and path in stage_map.compared_paths:
            assert matcher is not None
            match, note = _compared(repo, path, chosen, stage_map, matcher)
            extra.append(match)
            notes.append(note)
            continue
        if chosen.head is None or not chosen.merge_bases:
            change = _full(path, "cannot be compared (no merge base)")
        else:
            change = compare(repo, path, chosen.merge_bases, chosen.head)
        if change.stage is None:
            extra.append(Match(path, None, None, IGNORED, change.detail))
        elif change.contracts_only:
            extra.append(Match(path, change.stage, None, CONTRACT_CHANGED, change.detail))
        else:
            extra.append(Match(path, 1, None, GLOBAL_FILE, change.detail))
        notes.append(
            f"{quote_path(path)} compared at the merge base and at HEAD (its YAML, "
            "not the suite loader): only `produces`/`consumes` may differ for less than a full run"
        )
    candidates = [m for m in (chosen.decided_by, *extra) if m is not None and m.stage is not None]
    best = min(candidates, key=lambda m: (m.stage, _RANK.get(m.rule, 3), m.path), default=None)
    changed = chosen.changed + len(extra)
    matches = (*chosen.matches, *extra)
    if best is None or best is chosen.decided_by:
        detail = chosen.detail
        unread = [m for m in extra if m.stage is None]
        if best is None and unread:  # say why the compared files select nothing
            detail = (
                f"{changed} changed path(s), none that a stage reads: "
                f"{quote_path(unread[0].path)}: {unread[0].why}"
            )
        return replace(
            chosen,
            changed=changed,
            matches=matches,
            detail=detail,
            notes=tuple(notes),
            to_compare=(),
        )
    return replace(
        chosen,
        from_stage=best.stage,
        reason=best.rule,
        changed=changed,
        matches=matches,
        detail=f"{quote_path(best.path)}: {best.why}",
        decided_by=best,
        notes=tuple(notes),
        to_compare=(),
    )


def _compared(
    repo: Path, path: str, chosen: Selection, stage_map: StageMap, matcher: GlobMatcher
) -> tuple[Match, str]:
    """The marketplace file or the manifest, decided by what Claude Code loads of it."""
    bases, head, ignore = chosen.merge_bases, chosen.head or "", stage_map.ignore_metadata
    market = stage_map.marketplace
    unset = "" if ignore else " (no ignore_metadata)"
    if market is not None and path == market.file:
        change = compare_marketplace(
            repo, path, market.plugin, ignore, merge_bases=bases, head=head
        )
        note = (
            f"{quote_path(path)} compared at the merge base and at HEAD (JSON): only the entry "
            f"of {market.plugin!r}, the renames naming it and the rest outside `plugins` "
            "count, less "
            f"ignore_metadata{unset}"
        )
        if change.seen:
            why = f"the marketplace, as it loads {market.plugin!r}: {change.detail}: runs all"
            return Match(path, 1, None, GLOBAL_FILE, why), note
        why = "only other plugins' entries or metadata changed in the marketplace: not loaded"
        return Match(path, None, None, LISTING_ONLY, why), note
    change = compare_manifest(repo, path, ignore, merge_bases=bases, head=head)
    note = (
        f"{quote_path(path)} compared at the merge base and at HEAD (JSON), less "
        f"ignore_metadata: {', '.join(ignore)}"
    )
    if not change.seen:
        why = "only metadata keys changed (ignore_metadata): not loaded"
        return Match(path, None, None, LISTING_ONLY, why), note
    # What Claude Code loads changed: the path as the map's entries decide it.
    decided = select(stage_map, matcher, [path]).matches[0]
    return decided._replace(why=f"{decided.why} ({change.detail})"), note


def compare(repo: Path, path: str, merge_bases: Sequence[str], head: str) -> SuiteChange:
    """How the suite at `path` changed from the merge base(s) to `head`.

    With several merge bases (criss-cross) each is compared and the lowest
    answer wins: a superset, as for the diff itself.
    """
    answers = [_compare_one(repo, path, base, head) for base in merge_bases]
    if not answers:
        return _full(path, "no merge base to compare with")
    return min(answers, key=lambda a: (a.stage is None, a.stage or 0, a.contracts_only))


def _full(path: str, why: str) -> SuiteChange:
    return SuiteChange(1, False, f"the suite {why}: any change but to a contract runs all", (1,))


def _compare_one(repo: Path, path: str, base: str, head: str) -> SuiteChange:
    old, new = git.blob_at(repo, base, path), git.blob_at(repo, head, path)
    if old is None or new is None:
        return _full(path, "added" if old is None else "removed")
    try:
        before, after = _parse(old), _parse(new)
    except ValueError as exc:
        return _full(path, f"cannot compare ({exc})")
    (rest_before, contracts_before), (rest_after, contracts_after) = before, after
    if rest_before != rest_after:
        where = _first_difference(rest_before, rest_after)
        return _full(path, f"changed more than contracts ({where})")
    changed = [
        number
        for number, (was, now) in enumerate(
            zip(contracts_before, contracts_after, strict=True), start=1
        )
        if was != now
    ]
    if not changed:
        return SuiteChange(None, True, "the suite's meaning did not change (layout, comments)")
    names = [str(stage.get("name", number)) for number, stage in enumerate(_stages(after), 1)]
    lowest = changed[0]
    affected = _affected(changed, contracts_before, contracts_after, names)
    fields = ", ".join(
        key
        for key in CONTRACT_KEYS
        if contracts_before[lowest - 1].get(key) != contracts_after[lowest - 1].get(key)
    )
    detail = f"only contracts changed: stage {lowest} ({names[lowest - 1]}) {fields}"
    if len(changed) > 1:
        detail += f"; also the contract of stage(s) {', '.join(map(str, changed[1:]))}"
    consumers = [n for n in affected if n not in changed]
    if consumers:
        detail += f"; stage(s) {', '.join(map(str, consumers))} consume what changed"
    return SuiteChange(lowest, True, detail, tuple(affected))


def _parse(data: bytes) -> tuple[Any, list[dict[str, Any]]]:
    """(the suite without contracts, each stage's contract keys) — or ValueError."""
    import yaml  # noqa: PLC0415 - only when the suite changed

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(data, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise ValueError(f"invalid YAML at {where}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stages"), list):
        raise ValueError("no list of stages")
    rest = dict(doc)
    stages, contracts = [], []
    for stage in doc["stages"]:
        if not isinstance(stage, dict):
            raise ValueError("a stage is not a mapping")
        stages.append({k: v for k, v in stage.items() if k not in CONTRACT_KEYS})
        contracts.append({k: stage[k] for k in CONTRACT_KEYS if k in stage})
    rest["stages"] = stages
    return rest, contracts


def _stages(parsed: tuple[Any, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    stages: list[dict[str, Any]] = parsed[0]["stages"]
    return stages


def _first_difference(before: dict[str, Any], after: dict[str, Any]) -> str:
    for key in sorted(set(before) | set(after), key=str):
        if before.get(key) != after.get(key):
            if key == "stages" and len(before["stages"]) == len(after["stages"]):
                for number, (was, now) in enumerate(
                    zip(before[key], after[key], strict=True), start=1
                ):
                    for name in sorted(set(was) | set(now), key=str):
                        if was.get(name) != now.get(name):
                            return f"stages[{number - 1}].{name}"
            return str(key)
    return "?"  # pragma: no cover - called only when they differ


def _affected(
    changed: list[int],
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    names: list[str],
) -> list[int]:
    """The changed stages, and each later stage that consumes a file whose
    `produces` changed (as it was or as it is)."""
    affected = set(changed)
    for number in changed:
        was, now = before[number - 1], after[number - 1]
        if was.get("produces") == now.get("produces"):
            continue  # only what it reads changed: nothing later sees a difference
        produced = _produced_globs(was) | _produced_globs(now)
        for later in range(number + 1, len(after) + 1):
            for item in _items(after[later - 1].get("consumes")):
                source = item.get("from")
                named = source in (number, str(number), names[number - 1])
                file = item.get("file")
                if named or (isinstance(file, str) and any(covers(g, file) for g in produced)):
                    affected.add(later)
    return sorted(affected)


def _items(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _produced_globs(contract: dict[str, Any]) -> set[str]:
    globs: set[str] = set()
    for item in _items(contract.get("produces")):
        files = item.get("files")
        globs.update(
            [files] if isinstance(files, str) else [f for f in files or () if isinstance(f, str)]
        )
    return globs


def covers(glob: str, path: str) -> bool:
    """A produced `glob` covers a consumed `path`: the same glob, or a path it matches
    (also how `suite.contracts` pairs a consumes item with its producer)."""
    if glob == path:
        return True
    if "**" in glob:
        return path.startswith(glob.split("**", 1)[0])
    pure = PurePosixPath(path)
    return len(pure.parts) == len(PurePosixPath(glob).parts) and pure.match(glob)
