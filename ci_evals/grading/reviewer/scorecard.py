"""Read a reviewer's final message as a scorecard — and fail closed on anything else.

A scorecard is a JSON array of `{criterion | id, score, rationale?, type?}`.
It may be the whole message, inside a ```json fence, or follow prose; a
message holding two scorecards that differ is ambiguous (identical repeats
are fine). Anything else — no JSON, invalid JSON, an empty
array, a missing, non-numeric or non-finite score, a score outside its scale, a
duplicate, a criterion no rubric defines, a criterion whose kind is unknown —
raises `ScorecardError` with a one-line reason. `grade_scorecard` turns that
into a `GraderResult` with `error` set, so the stage becomes `error`, never a pass.

Each criterion's kind comes from the rubrics (`rubrics.RubricSet`), never from
the score: an analytic criterion scored 1 is a failing analytic score. An
item's optional `type` must agree with its rubric.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ci_evals.grading.reviewer.rubrics import KINDS, Kind, RubricSet
from ci_evals.results import DEFAULT_ANALYTIC_THRESHOLD, normalize_id
from ci_evals.results.criteria import (
    ANALYTIC_MAX,
    ANALYTIC_MIN,
    Criterion,
    GraderResult,
    RawOutput,
    RubricRef,
)
from ci_evals.text import one_line

# The analytic pass mark used for each criterion's own `passed` before a
# policy is applied; `results.verdict.evaluate` recomputes it with the policy's threshold.

# A scorecard is a few KiB; a megabyte of output is a reviewer gone wrong.
MAX_OUTPUT_CHARS = 1_000_000
# Where a scorecard can start: `[` before an object or `]`. Prose brackets such
# as `[1]` or `[TODO]` are never tried.
_ARRAY_START = re.compile(r"\[(?=\s*[{\]])")

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)


class ScorecardError(Exception):
    """The reviewer's output is not a usable scorecard; `reason` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_scorecard(
    text: str, rubrics: RubricSet | None, *, require_all: bool = False
) -> list[Criterion]:
    """The criteria of a reviewer's final message, in the order given.

    `rubrics` is the reviewer's rubric set; `None` means none is configured,
    and then every item must carry its own `type` (less safe: nothing checks
    the reviewer scored what the rubrics define). `require_all` makes a rubric
    criterion the scorecard does not score an error.
    """
    items = _find_array(text)
    if not items:
        raise ScorecardError("the scorecard is an empty JSON array")
    criteria: list[Criterion] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        criterion = _criterion(index, item, rubrics)
        key = normalize_id(criterion.id)
        if key in seen:
            raise ScorecardError(
                f"item {index}: criterion {criterion.id!r} is scored twice (also item {seen[key]})"
            )
        seen[key] = index
        criteria.append(criterion)
    if require_all and rubrics is not None:
        missing = sorted(rubric.id for key, rubric in rubrics.items() if key not in seen)
        if missing:
            raise ScorecardError(f"the scorecard does not score: {', '.join(missing)}")
    return criteria


def grade_scorecard(
    text: str,
    rubrics: RubricSet | None,
    *,
    grader: str = "reviewer",
    raw_path: Path | None = None,
    judge_model: str | None = None,
    require_all: bool = False,
) -> GraderResult:
    """`parse_scorecard` as a grader: never raises on bad output, records the raw text.

    When `raw_path` is given the raw message is written there (it belongs in
    the run folder, out of the agent's reach) and the result points at it.
    """
    data = text.encode("utf-8", "surrogateescape")
    if raw_path is not None:
        raw_path.parent.mkdir(parents=True, exist_ok=True)
        raw_path.write_bytes(data)
    raw = RawOutput(
        path=None if raw_path is None else str(raw_path),
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )
    refs = tuple(
        RubricRef(id=r.id, kind=r.kind, path=str(r.path), sha256=r.sha256)
        for r in ([] if rubrics is None else rubrics.files())
    )
    try:
        criteria = parse_scorecard(text, rubrics, require_all=require_all)
    except ScorecardError as exc:
        return GraderResult(
            grader=grader,
            error=f"unusable scorecard: {exc.reason}",
            raw_output=raw,
            judge_model=judge_model,
            rubrics=refs,
        )
    warnings: tuple[str, ...] = ()
    if rubrics is not None:
        scored = {normalize_id(c.id) for c in criteria}
        unscored = sorted(rubric.id for key, rubric in rubrics.items() if key not in scored)
        if unscored:
            warnings = (f"rubric criteria not scored: {', '.join(unscored)}",)
    return GraderResult(
        grader=grader,
        criteria=tuple(criteria),
        raw_output=raw,
        judge_model=judge_model,
        rubrics=refs,
        warnings=warnings,
    )


# -- finding the array -------------------------------------------------------


def _loads(text: str) -> Any:
    # NaN and Infinity are not JSON; Python would accept them as scores.
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _find_array(text: str) -> list[Any]:
    """The scorecard array: the whole text, else the last fence, else the last array in prose.

    When the whole text or a fence fails to parse, the text is still searched
    for an array of objects (a stray `]` or a ``` inside a rationale must not
    hide a good scorecard); if none is found, the first failure is reported.
    """
    stripped = text.strip()
    if not stripped:
        raise ScorecardError("the reviewer's output is empty")
    if len(stripped) > MAX_OUTPUT_CHARS:
        raise ScorecardError(
            f"the reviewer's output is too large ({len(stripped)} characters, "
            f"at most {MAX_OUTPUT_CHARS})"
        )
    failure: ScorecardError | None = None
    if stripped[0] in "[{":
        try:
            return _expect_array(_loads(stripped), "the output")
        except ValueError as exc:
            if stripped[0] == "[" and stripped[-1] == "]":
                failure = ScorecardError(f"invalid JSON: {one_line(str(exc))}")
    scan = _Scan(stripped)
    if failure is None:
        try:
            fenced = _from_fences(stripped)
        except ScorecardError as exc:
            failure = exc
        else:
            if fenced is not None:
                return _only_one(fenced, scan)
    try:
        found = _from_prose(scan)
    except ScorecardError:
        if failure is not None:
            raise failure from None
        raise
    if failure is not None and not _of_objects(found):
        raise failure
    return _only_one(found, scan)


def _only_one(chosen: list[Any], scan: _Scan) -> list[Any]:
    """`chosen`, unless the text holds another scorecard that says something else.

    "On reflection, the real scores are: [...]" after a fenced card leaves no
    way to tell which one the reviewer meant; identical repeats are harmless.
    A scorecard here is an array of objects one of which has a `criterion` or
    a `score`.
    """
    others: list[list[Any]] = []
    for array in scan.arrays():
        if array != chosen and _looks_like_scorecard(array) and array not in others:
            others.append(array)
    if others:
        raise ScorecardError(
            f"the output holds {len(others) + 1} different scorecards; the reviewer "
            "must give exactly one (repeating the same one is accepted)"
        )
    return chosen


def _of_objects(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(item, dict) for item in value)


def _looks_like_scorecard(value: list[Any]) -> bool:
    return _of_objects(value) and any("criterion" in i or "score" in i for i in value)


def _expect_array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ScorecardError(f"{where} is JSON but not an array (got {type(value).__name__})")
    return value


def _from_fences(text: str) -> list[Any] | None:
    """The last fenced block holding a JSON array; None when no fence looks like JSON."""
    blocks = [(m.group(1).lower(), m.group(2).strip()) for m in _FENCE.finditer(text)]
    candidates = [body for lang, body in blocks if lang == "json" or body.startswith("[")]
    if not candidates:
        return None
    errors = []
    for body in reversed(candidates):
        try:
            value = _loads(body)
        except ValueError as exc:
            errors.append(one_line(str(exc)))
            continue
        return _expect_array(value, "the ```json block")
    raise ScorecardError(f"invalid JSON in the fenced block: {errors[0]}")


class _Scan:
    """Every top-level JSON array in the text, found once and kept (see `arrays`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._arrays: list[list[Any]] | None = None
        self.errors: list[str] = []  # a failure at a line-leading bracket goes first

    def arrays(self) -> list[list[Any]]:
        """Try every `[{` (and `[]`); arrays nested in an array of objects are skipped.

        A bracket in prose (`see [1]`, `[TODO]`) is not a candidate.
        """
        if self._arrays is not None:
            return self._arrays
        text = self.text
        decoder = json.JSONDecoder(parse_constant=_reject_constant)
        arrays: list[list[Any]] = []
        covered_until = -1
        # Each attempt may scan to the end of the text; bound the total so that
        # thousands of unclosed brackets cannot make this quadratic.
        budget = 20 * len(text) + 100_000
        for match in _ARRAY_START.finditer(text):
            start = match.start()
            if start < covered_until:
                continue
            if budget < 0:
                raise ScorecardError(
                    "too many bracketed fragments to search for the scorecard "
                    "(the reviewer should print the JSON array alone)"
                )
            try:
                value, end = decoder.raw_decode(text, start)
            except ValueError as exc:
                # Building the error counts lines from the start of the text: O(pos).
                budget -= exc.pos if isinstance(exc, json.JSONDecodeError) else len(text)
                if start == 0 or text[start - 1] == "\n":
                    self.errors.insert(0, one_line(str(exc)))
                else:
                    self.errors.append(one_line(str(exc)))
                continue
            except RecursionError:
                budget -= len(text)
                self.errors.append("nested too deeply")
                continue
            budget -= end - start
            arrays.append(value)
            if _of_objects(value):
                # Skip arrays nested in a scorecard; but look inside anything else,
                # so prose like "[see below: [{...}]]" cannot wrap the real one.
                covered_until = end
        self._arrays = arrays
        return arrays


def _from_prose(scan: _Scan) -> list[Any]:
    """The last scorecard-like array in the text, else the last array of objects,
    else the last array; a candidate that does not decode never beats a real one."""
    arrays = scan.arrays()
    for wanted in (_looks_like_scorecard, _of_objects):
        found = [a for a in arrays if wanted(a)]
        if found:
            return found[-1]
    if arrays:
        return arrays[-1]
    if scan.errors:
        raise ScorecardError(f"invalid JSON: {scan.errors[0]}")
    raise ScorecardError("no JSON array found in the reviewer's output")


# -- one item ----------------------------------------------------------------


def _criterion(index: int, item: Any, rubrics: RubricSet | None) -> Criterion:
    where = f"item {index}"
    if not isinstance(item, dict):
        raise ScorecardError(f"{where} is not an object (got {_json_type(item)})")
    name = _name(where, item)
    where = f"{where} ({name!r})"
    if "score" not in item or item["score"] is None:
        raise ScorecardError(f"{where}: missing score")
    score = item["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ScorecardError(f"{where}: score must be a number, got {_shown(score)}")
    try:
        value = float(score)  # an integer too big for a float raises OverflowError
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ScorecardError(f"{where}: score must be a finite number, got {_shown(score)}")
    declared = item.get("type")
    if declared is not None and declared not in KINDS:
        raise ScorecardError(
            f"{where}: type must be 'checklist' or 'analytic', got {json.dumps(declared)}"
        )
    rationale = item.get("rationale", "")
    if rationale is None:
        rationale = ""
    if not isinstance(rationale, str):
        raise ScorecardError(f"{where}: rationale must be a string")
    kind, rubric_id, rubric_path, rubric_hash = _kind(where, name, declared, rubrics)
    if kind == "checklist":
        if value not in (0.0, 1.0):
            raise ScorecardError(
                f"{where}: score {_shown(score)} is outside the checklist scale 0/1"
            )
        passed = value == 1.0
    else:
        if not ANALYTIC_MIN <= value <= ANALYTIC_MAX:
            raise ScorecardError(
                f"{where}: score {_shown(score)} is outside the analytic scale 1-5"
            )
        passed = value >= DEFAULT_ANALYTIC_THRESHOLD
    return Criterion(
        # The rubric's spelling, so repeats and reports agree whatever the reviewer wrote.
        id=rubric_id or name,
        kind=kind,
        score=value,
        passed=passed,
        rationale=rationale,
        source="reviewer",
        rubric=rubric_path,
        rubric_sha256=rubric_hash,
    )


def _shown(value: Any) -> str:
    """A value as JSON for a one-line reason, cut short (a score may have 4,000 digits)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _name(where: str, item: Mapping[str, Any]) -> str:
    names = [item[key] for key in ("criterion", "id") if key in item and item[key] is not None]
    if not names:
        raise ScorecardError(f"{where}: missing 'criterion' (or 'id')")
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ScorecardError(f"{where}: criterion must be a non-empty string")
    if len(names) == 2 and normalize_id(names[0]) != normalize_id(names[1]):
        raise ScorecardError(f"{where}: 'criterion' {names[0]!r} and 'id' {names[1]!r} disagree")
    return str(names[0]).strip()


def _kind(
    where: str, name: str, declared: Kind | None, rubrics: RubricSet | None
) -> tuple[Kind, str | None, str | None, str | None]:
    if rubrics is None:
        if declared is None:
            raise ScorecardError(
                f"{where}: cannot tell checklist from analytic "
                "(no rubric folders configured and no 'type' given)"
            )
        return declared, None, None, None
    rubric = rubrics.get(name)
    if rubric is None:
        known = ", ".join(sorted(r.id for r in rubrics.values())) or "none"
        raise ScorecardError(f"{where}: no rubric defines this criterion (known: {known})")
    if rubric.kind is None:
        # Strict even when the item declares a type: the rubric owns the kind.
        raise ScorecardError(
            f"{where}: cannot tell checklist from analytic: rubric {rubric.path.name} "
            "is in no checklist/analytic folder and has no 'type:' field"
        )
    if declared is not None and declared != rubric.kind:
        raise ScorecardError(
            f"{where}: type {declared!r} disagrees with its rubric {rubric.path.name} "
            f"({rubric.kind})"
        )
    return rubric.kind, rubric.id, str(rubric.path), rubric.sha256


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    for cls, label in names.items():
        if isinstance(value, cls):
            return label
    return "a number" if isinstance(value, (int, float)) else type(value).__name__
