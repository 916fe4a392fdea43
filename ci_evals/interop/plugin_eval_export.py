"""A ci-evals run as a `claude plugin eval` document: `report --plugin-eval-json PATH`.

The document has the CLI's schemaVersion 1 shape, every key its own schema
requires, so tooling written for the CLI's `--json` reads a ci-evals run: one
case per (scenario, stage), one run per repeat in `arms.with` (an imported run's
without-plugin arm in `arms.without`), one grader per criterion, and the
aggregates as the CLI computes them.

Fail closed, as everywhere: a run that is not a verdict (an `error`, a stage
skipped or never run, a limit hit without one) is written as the CLI writes a
run that ended on an error: `error` set, score 0, no graders — never a graded
pass; a run that did not finish is `partial`. What results.json does not record
is written empty or 0. Field by field: docs/plugin-evals.md (*Exporting a
ci-evals run*).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ci_evals.interop.plugin_eval_import import SKIPPED_PAID
from ci_evals.results.criteria import Criterion
from ci_evals.results.model import RunResult, ScenarioResult, StageResult

Json = dict[str, Any]


def export_document(result: RunResult) -> Json:
    """The run as a `claude plugin eval` aggregate-result.json (schemaVersion 1)."""
    imported = result.imported_from
    by_scenario = {case.scenario: case for case in (imported.cases if imported else [])}
    threshold = result.score_at_least if result.score_at_least is not None else 1.0
    cases = []
    arms_without = _without_arm(result)
    for (scenario, stages), first in _groups(result):
        case = by_scenario.get(scenario.id)
        without = case.without if case and case.without else None
        if without is None:  # a run of ci-evals with `ablation: with-without`
            without = arms_without.get((scenario.id, first.number))
        name = case.name if case else _case_name(scenario, first)
        folder = case.dir if case else ""
        cases.append(
            _case(result, scenario, stages, name=name, folder=folder, without_stages=without)
        )
    deltas = [c["aggregates"]["delta"] for c in cases if "delta" in c["aggregates"]]
    partial = result.status != "completed"
    reason = imported.partial_reason if imported else None
    document: Json = {
        "schemaVersion": 1,
        "claudeVersion": imported.claude_version if imported else f"ci-evals {result.tool_version}",
        "startedAt": _time(result.started_at),
        "durationSeconds": _duration(result),
        "costUsd": imported.cost_usd if imported else result.total_cost_usd,
        "partial": partial,
        **({"partialReason": reason or "interrupted"} if partial else {}),
        "suite": _suite(result, threshold),
        "cases": cases,
        "aggregates": {
            "casesTotal": len(cases),
            "casesPassed": sum(1 for c in cases if c["aggregates"]["score"] >= threshold),
            "overallScore": _mean([c["aggregates"]["score"] for c in cases]),
            "overallPassRate": _mean([c["aggregates"]["passRate"] for c in cases]),
            **({"meanDelta": _mean(deltas)} if deltas else {}),
        },
    }
    return document


def dump_document(result: RunResult) -> bytes:
    return (json.dumps(export_document(result), indent=2) + "\n").encode("utf-8")


def _groups(
    result: RunResult,
) -> list[tuple[tuple[ScenarioResult, list[StageResult]], StageResult]]:
    """Per (scenario, stage), in the order they first appear: its repeats' stages."""
    grouped: dict[tuple[str, int], tuple[ScenarioResult, list[StageResult]]] = {}
    for scenario in sorted(result.scenarios, key=lambda s: s.repeat):
        if scenario.arm == "without":  # `arms.without`, never runs of the with-arm
            continue
        for stage in scenario.stages:
            grouped.setdefault((scenario.id, stage.number), (scenario, []))[1].append(stage)
    return [((scenario, stages), stages[0]) for scenario, stages in grouped.values()]


def _without_arm(result: RunResult) -> dict[tuple[str, int], list[StageResult]]:
    """Per (scenario, stage) of a run with `ablation: with-without`: the without-arm's
    runs of it (a stage that ran single-arm has none: skipped, not run)."""
    found: dict[tuple[str, int], list[StageResult]] = {}
    for scenario in sorted(result.scenarios, key=lambda s: s.repeat):
        if scenario.arm != "without":
            continue
        for stage in scenario.stages:
            if stage.status != "skipped":
                found.setdefault((scenario.id, stage.number), []).append(stage)
    return found


def _case_name(scenario: ScenarioResult, stage: StageResult) -> str:
    if scenario.unit == "case":
        return scenario.id
    return f"{scenario.id}/{stage.number}-{stage.name}"


def _suite(result: RunResult, threshold: float) -> Json:
    imported = result.imported_from
    plugin = result.suite.plugin if result.suite else ""
    suite: Json = {
        "root": plugin,
        "ablation": imported.ablation if imported else result.ablation,
        "threshold": threshold,
        "concurrency": 1,
        "plugins": [{"name": plugin, "path": plugin}] if plugin else [],
    }
    if result.model:
        suite["modelOverride"] = result.model
    judges = {
        grader.judge_model
        for scenario in result.scenarios
        for stage in scenario.stages
        if stage.grading is not None
        for grader in stage.grading.graders
        if grader.judge_model
    }
    if len(judges) == 1:
        suite["judgeModel"] = judges.pop()
    return suite


def _case(
    result: RunResult,
    scenario: ScenarioResult,
    stages: list[StageResult],
    *,
    name: str,
    folder: str,
    without_stages: list[StageResult] | None,
) -> Json:
    with_runs = [_run(stage) for stage in stages]
    score, rate = _mean([r["score"] for r in with_runs]), _rate(with_runs)
    aggregates: Json = {"score": score, "passRate": rate}
    arms: Json = {"with": with_runs}
    if without_stages is not None:
        without = [_run(stage) for stage in without_stages]
        arms["without"] = without
        without_score = _mean([r["score"] for r in without])
        aggregates |= {
            "scoreWithout": without_score,
            "passRateWithout": _rate(without),
            "delta": score - without_score,
        }
    return {
        "name": name,
        "dir": folder,
        "source": "ci-evals",  # the CLI's prose | case_yaml | mixed is not recorded
        "promptMarkdown": "",
        "runsPerCase": result.repeats_of(scenario),
        "timeoutSeconds": 0,
        "maxTurns": 0,
        "graders": _definitions([*stages, *(without_stages or [])]),
        "arms": arms,
        "aggregates": aggregates,
    }


def _definitions(stages: list[StageResult]) -> list[Json]:
    """The case's graders: one per criterion id any of its runs has, in first-seen order."""
    found: dict[str, Json] = {}
    for stage in stages:
        for c in stage.grading.criteria if stage.grading is not None else ():
            config: Json = {"kind": c.kind}
            if c.rubric:
                config["rubric"] = c.rubric
            found.setdefault(
                c.id, {"name": c.id, "type": c.source, "weight": c.weight, "config": config}
            )
    return list(found.values())


def _run(stage: StageResult) -> Json:
    verdict = stage.grading
    error = _error(stage)
    graders = [] if error is not None or verdict is None else list(map(_grader, verdict.criteria))
    score = 0.0
    if error is None and verdict is not None and verdict.binary_score is not None:
        score = verdict.binary_score / 100
    judges = stage.grading_cost_usd or 0.0
    run: Json = {
        "score": score,
        "passed": score >= 1,
        "turns": stage.turns or 0,
        "costUsd": (stage.cost_usd or 0.0) + judges,
        "judgeCostUsd": judges,
        "error": error,
        "tracePath": stage.trajectory or "",
        "skippedPaidGraders": stage.error == SKIPPED_PAID,
        "graders": graders,
    }
    if stage.duration_s is not None:
        run["durationSeconds"] = stage.duration_s
    if stage.started_at is not None:
        run["startedAt"] = _time(stage.started_at)
    return run


def _error(stage: StageResult) -> str | None:
    """The run's `error` (None: a verdict, passed or failed): every stage that is no
    verdict reads as a run the CLI could not grade."""
    if stage.status in ("passed", "failed") and stage.grading is not None:
        return None
    if stage.status == "limit":
        return f"hit its {stage.limit_hit} limit" + (f": {stage.error}" if stage.error else "")
    return stage.error or f"{stage.status}: no verdict"


def _grader(criterion: Criterion) -> Json:
    explanation = criterion.detail or criterion.rationale
    if criterion.kind == "analytic" and criterion.score is not None:
        explanation = f"score {criterion.score:g} of 5" + (
            f": {explanation}" if explanation else ""
        )
    return {
        "name": criterion.id,
        "passed": criterion.passed,
        "weight": criterion.weight,
        "explanation": explanation,
        "withOnly": criterion.advisory,
        "scored": not criterion.advisory,
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _rate(runs: Sequence[Json]) -> float:
    return sum(1 for r in runs if r["score"] >= 1) / len(runs) if runs else 0.0


def _time(when: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and `Z`, as JavaScript's toISOString writes it."""
    utc = when.astimezone(timezone.utc) if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _duration(result: RunResult) -> float:
    if result.finished_at is None:
        return 0.0
    return max(0.0, (result.finished_at - result.started_at).total_seconds())
