"""`claude plugin eval`'s aggregate-result.json (schemaVersion 1), read as hostile input.

The document (`--json PATH`, or `<eval dir>/results/<time>/aggregate-result.json`)
comes from another machine or an artifact: it is read as every foreign JSON file
is (`fs.json_input`: a regular file, no link, capped in bytes and in depth, no
number out of range) and then field by field into frozen records. A key this
reader needs that is missing or of the wrong type, a number out of its range, or
a document that disagrees with itself is one `UserError` naming the file and the
JSON path (`out.json: $.cases[3].arms.with[0].score: ...`). Keys it does not read
are left alone: a newer CLI of schema 1 may add some (its schema is additive).

What must agree, as the CLI computes it (its own code, 2.1.337): a run's score is
the weighted share of its passed graders that are scored (`with_only` ones are
not), 0 when none are; `passed` is `score >= 1`; a case's score is the mean of
its with-arm runs' scores (`scoreWithout` of the without-arm's), `delta` their
difference; a finished document holds `runsPerCase` runs per arm. A document
whose numbers do not add up was edited or broken: refused, never half-believed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.results import model_id_problem

SCHEMA_VERSION = 1
MAX_BYTES = 256 * 1024 * 1024  # a judge's evidence is kept per grader and run: documents grow
MAX_DEPTH = 16  # the schema nests about 9 deep (cases, arms, runs, mocks)
MAX_TEXT = 1 << 20  # characters of any one string this reader keeps
_CLOSE = 1e-9  # the CLI's scores are float sums; equal within this


@dataclass(frozen=True)
class GraderRun:
    """One grader's result in one run."""

    name: str
    passed: bool
    weight: float
    explanation: str
    with_only: bool
    scored: bool


@dataclass(frozen=True)
class Run:
    """One run of a case in one arm."""

    score: float
    passed: bool
    turns: int
    cost_usd: float  # the agent's and its judges'
    judge_cost_usd: float
    duration_s: float | None
    started_at: datetime | None
    error: str | None
    trace_path: str
    skipped_paid_graders: bool
    aborted: str | None  # "server/tool: reason" when an agent mock stopped the run
    graders: tuple[GraderRun, ...]


@dataclass(frozen=True)
class GraderDef:
    """A case's grader as the document describes it."""

    name: str
    type: str
    weight: float


@dataclass(frozen=True)
class DocCase:
    name: str
    dir: str
    prompt: str
    model: str | None
    runs_per_case: int
    timeout_s: int | None
    max_turns: int | None
    graders: tuple[GraderDef, ...]
    with_runs: tuple[Run, ...]
    without_runs: tuple[Run, ...] | None  # None: no without-arm
    score: float
    score_without: float | None
    delta: float | None


@dataclass(frozen=True)
class DocPlugin:
    name: str
    version: str | None
    path: str


@dataclass(frozen=True)
class Document:
    file: Path
    sha256: str
    claude_version: str
    started_at: datetime
    duration_s: float
    cost_usd: float
    partial: bool
    partial_reason: str | None
    root: str
    ablation: Literal["none", "with-without"]
    model: str | None
    judge_model: str | None
    threshold: float
    concurrency: int | None
    plugins: tuple[DocPlugin, ...]
    cases: tuple[DocCase, ...]


class _At:
    """A value of the document and its JSON path, read with one-line errors."""

    def __init__(self, value: object, path: str, file: Path) -> None:
        self.value, self.path, self.file = value, path, file

    def error(self, message: str, hint: str | None = None) -> UserError:
        return UserError(message, file=self.file, field=self.path, hint=hint)

    def _type(self, what: str) -> UserError:
        return self.error(f"expected {what}, got {_json_type(self.value)}")

    def key(self, name: str) -> _At:
        if not isinstance(self.value, dict):
            raise self._type("an object")
        if name not in self.value:
            raise self.error(f"missing required key {name!r}")
        return _At(self.value[name], f"{self.path}.{name}", self.file)

    def optional(self, name: str) -> _At | None:
        """The key's value, None when it is absent or null."""
        if not isinstance(self.value, dict):
            raise self._type("an object")
        if self.value.get(name) is None:
            return None
        return _At(self.value[name], f"{self.path}.{name}", self.file)

    def items(self) -> Iterator[_At]:
        if not isinstance(self.value, list):
            raise self._type("an array")
        for index, item in enumerate(self.value):
            yield _At(item, f"{self.path}[{index}]", self.file)

    def text(self, *, allow_empty: bool = True) -> str:
        if not isinstance(self.value, str):
            raise self._type("a string")
        if len(self.value) > MAX_TEXT:
            raise self.error(f"a string of {len(self.value)} characters, over {MAX_TEXT}")
        if not allow_empty and not self.value.strip():
            raise self.error("must not be empty")
        return self.value

    def flag(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._type("true or false")
        return self.value

    def number(self, low: float = 0.0, high: float = math.inf) -> float:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._type("a number")
        if not low <= value <= high:
            shown = f"{low:g}..{high:g}" if high != math.inf else f"at least {low:g}"
            raise self.error(f"{value:g} is out of range ({shown})")
        return float(value)

    def whole(self, low: int = 0) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self._type("a whole number")
        if self.value < low:
            raise self.error(f"{self.value} is out of range (at least {low})")
        return self.value

    def time(self) -> datetime:
        text = self.text()
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise self.error(f"{text[:40]!r} is not an ISO 8601 time") from None
        return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def read_document(file: Path) -> tuple[Document, bytes]:
    """The document in `file` and its bytes, or a one-line `UserError` naming the file
    and the field."""
    data = json_input.read_file(file, MAX_BYTES, what="claude plugin eval document")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start})", file=file) from None
    value = json_input.parse(text, file=file, max_depth=MAX_DEPTH, text_only=True)
    return parse_document(value, file, sha256=hashlib.sha256(data).hexdigest()), data


def parse_document(value: object, file: Path, *, sha256: str = "") -> Document:
    """The document's JSON value as records, checked (the module's doc says how)."""
    top = _At(value, "$", file)
    if not isinstance(value, dict):
        raise top.error(
            f"not a claude plugin eval document (expected an object, got {_json_type(value)})"
        )
    version = top.key("schemaVersion")
    if version.value != SCHEMA_VERSION:
        raise version.error(
            f"schemaVersion {version.value!r}: this ci-evals reads claude plugin eval's "
            f"schemaVersion {SCHEMA_VERSION}",
            hint="upgrade ci-evals, or export with a Claude Code that writes version 1",
        )
    suite = top.key("suite")
    ablation = suite.key("ablation")
    if ablation.value not in ("none", "with-without"):
        raise ablation.error(f"unknown ablation {ablation.value!r}", hint="none or with-without")
    arms: Literal["none", "with-without"] = (
        "with-without" if ablation.value == "with-without" else "none"
    )
    partial = top.key("partial").flag()
    reason = top.optional("partialReason")
    cases = tuple(_case(item, partial=partial) for item in top.key("cases").items())
    total = top.key("aggregates").key("casesTotal")
    if total.whole() != len(cases):
        raise total.error(f"{total.value} but the document holds {len(cases)} case(s)")
    model = suite.optional("modelOverride")
    judge = suite.optional("judgeModel")
    concurrency = suite.optional("concurrency")
    return Document(
        file=file,
        sha256=sha256,
        claude_version=top.key("claudeVersion").text(allow_empty=False)[:100],
        started_at=top.key("startedAt").time(),
        duration_s=top.key("durationSeconds").number(),
        cost_usd=top.key("costUsd").number(),
        partial=partial,
        partial_reason=None if reason is None else reason.text()[:100],
        root=suite.key("root").text(),
        ablation=arms,
        model=None if model is None else _model_id(model),
        judge_model=None if judge is None else _model_id(judge),
        threshold=suite.key("threshold").number(0.0, 1.0),
        concurrency=None if concurrency is None else concurrency.whole(1),
        plugins=tuple(_plugin(item) for item in suite.key("plugins").items()),
        cases=cases,
    )


def _model_id(at: _At) -> str:
    """A model id the reports show and a comparison names: a plain id, bounded."""
    value = at.text()
    problem = model_id_problem(value)
    if problem:
        raise at.error(problem)
    return value


def _plugin(at: _At) -> DocPlugin:
    version = at.optional("version")
    return DocPlugin(
        name=at.key("name").text(allow_empty=False),
        version=None if version is None else version.text(),
        path=at.key("path").text(),
    )


def _case(at: _At, *, partial: bool) -> DocCase:
    runs = at.key("runsPerCase").whole(1)
    arms = at.key("arms")
    with_runs = _runs(arms.key("with"), runs, partial=partial)
    without = arms.optional("without")
    without_runs = None if without is None else _runs(without, runs, partial=partial)
    aggregates = at.key("aggregates")
    score = _mean_checked(aggregates.key("score"), with_runs)
    score_without = None
    delta = None
    if without_runs is not None and aggregates.optional("scoreWithout") is not None:
        score_without = _mean_checked(aggregates.key("scoreWithout"), without_runs)
        stated = aggregates.optional("delta")  # withheld (absent) when either arm could not say
        if stated is not None:
            delta = stated.number(-1.0, 1.0)
            if not math.isclose(delta, score - score_without, abs_tol=_CLOSE):
                raise stated.error(
                    f"{delta:g} but score - scoreWithout is {score - score_without:g}"
                )
    model = at.optional("model")
    timeout = at.optional("timeoutSeconds")
    turns = at.optional("maxTurns")
    prompt = at.optional("promptMarkdown")
    return DocCase(
        name=at.key("name").text(allow_empty=False),
        dir=at.key("dir").text(),
        prompt="" if prompt is None else prompt.text(),
        model=None if model is None else model.text(),
        runs_per_case=runs,
        timeout_s=None if timeout is None else timeout.whole(0),
        max_turns=None if turns is None else turns.whole(0),
        graders=tuple(_grader_def(item) for item in at.key("graders").items()),
        with_runs=with_runs,
        without_runs=without_runs,
        score=score,
        score_without=score_without,
        delta=delta,
    )


def _runs(at: _At, expected: int, *, partial: bool) -> tuple[Run, ...]:
    runs = tuple(_run(item) for item in at.items())
    if len(runs) > expected or (len(runs) < expected and not partial):
        raise at.error(
            f"{len(runs)} run(s) but runsPerCase is {expected}"
            + ("" if len(runs) > expected else " and the document is not partial")
        )
    return runs


def _mean_checked(at: _At, runs: tuple[Run, ...]) -> float:
    """The stated mean score of `runs`, which must be their mean (0 for none, as the CLI)."""
    stated = at.number(0.0, 1.0)
    mean = sum(run.score for run in runs) / len(runs) if runs else 0.0
    if not math.isclose(stated, mean, abs_tol=_CLOSE):
        raise at.error(f"{stated:g} but the mean of its {len(runs)} run(s)' scores is {mean:g}")
    return stated


def _grader_def(at: _At) -> GraderDef:
    return GraderDef(
        name=at.key("name").text(allow_empty=False),
        type=at.key("type").text(allow_empty=False)[:64],
        weight=at.key("weight").number(),
    )


def _run(at: _At) -> Run:
    graders = tuple(_grader_run(item) for item in at.key("graders").items())
    names = [g.name for g in graders]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise at.key("graders").error(f"two graders named {name!r} in one run")
    score_at = at.key("score")
    score = score_at.number(0.0, 1.0)
    total = sum(g.weight for g in graders if g.scored)
    share = sum(g.weight for g in graders if g.scored and g.passed) / total if total else 0.0
    if not math.isclose(score, share, abs_tol=_CLOSE):
        raise score_at.error(
            f"{score:g} but its scored graders' weighted share passed is {share:g}"
        )
    passed = at.key("passed")
    if passed.flag() != (score >= 1):
        raise passed.error(
            f"{passed.value} but the run's score is {score:g} (passed is score >= 1)"
        )
    error = at.key("error")
    aborted = at.optional("aborted")
    duration = at.optional("durationSeconds")
    started = at.optional("startedAt")
    trace = at.optional("tracePath")
    return Run(
        score=score,
        passed=passed.flag(),
        turns=at.key("turns").whole(),
        cost_usd=at.key("costUsd").number(),
        judge_cost_usd=at.key("judgeCostUsd").number(),
        duration_s=None if duration is None else duration.number(),
        started_at=None if started is None else started.time(),
        error=None if error.value is None else error.text(),
        trace_path="" if trace is None else trace.text(),
        skipped_paid_graders=at.key("skippedPaidGraders").flag(),
        aborted=None if aborted is None else _aborted(aborted),
        graders=graders,
    )


def _aborted(at: _At) -> str:
    where = f"{at.key('server').text()}/{at.key('tool').text()}"
    return f"{where}: {at.key('reason').text()}"


def _grader_run(at: _At) -> GraderRun:
    with_only = at.key("withOnly").flag()
    scored = at.key("scored").flag()
    return GraderRun(
        name=at.key("name").text(allow_empty=False),
        passed=at.key("passed").flag(),
        weight=at.key("weight").number(),
        explanation=at.key("explanation").text(),
        with_only=with_only,
        scored=scored,
    )
