"""JUnit XML of a run, as CI test reporters read it (GitHub reporter actions, Jenkins, GitLab).

One `<testsuite>` per scenario (per scenario and repeat when the run repeated
them), one `<testcase>` per stage. `failed` and `limit` stages are
`<failure>`s listing the failed criteria, `error` stages `<error>`s; a stage
skipped after one of its scenario that did not pass is `<skipped>`, skipped
for any other reason (the budget ran out) an `<error>` with the reason; a
stage an interrupted run never finished is an `<error>` ("run interrupted"),
never a pass. A run that did not pass though no stage says so (it never
finished, or recorded no stage) gets a suite `ci-evals.run` with one
`<error>` case saying why, first: no document of a run that did not pass
reads green. Turns, cost, tokens and the criteria count
go to each test case's `<system-out>`, run facts to each suite's
`<properties>` (the Ant schema most reporters follow has no test-case
properties).

Built with ElementTree, so `<`, `&` and quotes are escaped for us; characters
XML 1.0 cannot hold at all are written as visible `\\xNN` text first.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ci_evals.report import (
    INCONSISTENT,
    INTERRUPTED,
    Outcome,
    cap,
    counted_criteria,
    criterion_line,
    delta_text,
    endpoint_miss_lines,
    failed_criteria,
    grader_errors,
    reason,
    run_problems,
    run_reason,
    scenario_label,
    scenario_outcomes,
    score_text,
    stage_label,
    status_word,
    unfinished,
    without_note,
    xml_safe,
)

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult, ScenarioResult, StageResult

# A reporter shows the message on one line and the body in a fold; the body of
# a command grader's criterion can be a 64 KiB output tail.
MESSAGE_LIMIT = 1000
CRITERION_LIMIT = 2000
BODY_LIMIT = 64 * 1024


def _element(
    parent: ET.Element | None, tag: str, text: str | None = None, **attrs: str
) -> ET.Element:
    safe = {key: xml_safe(value) for key, value in attrs.items()}
    element = ET.Element(tag, safe) if parent is None else ET.SubElement(parent, tag, safe)
    if text is not None:
        element.text = xml_safe(text)
    return element


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _counts(result: RunResult, scenarios: Sequence[ScenarioResult]) -> dict[str, str]:
    found = [scenario_outcomes(result, scenario) for scenario in scenarios]
    stages = [stage for pairs in found for stage, _ in pairs]
    outcomes = [kind for pairs in found for _, kind in pairs]
    return {
        "tests": str(len(stages)),
        "failures": str(outcomes.count("failure")),
        "errors": str(outcomes.count("error")),
        "skipped": str(outcomes.count("skipped")),
        "time": _seconds(sum(stage.duration_s or 0.0 for stage in stages)),
    }


def _body(stage: StageResult) -> str:
    """The failure's details: every failed criterion, grader errors, the stage's error."""
    lines = [cap(criterion_line(c), CRITERION_LIMIT) for c in failed_criteria(stage)]
    lines += [cap(error, CRITERION_LIMIT) for error in grader_errors(stage)]
    lines += [cap(line, CRITERION_LIMIT) for line in endpoint_miss_lines(stage)]
    verdict = stage.grading.reason if stage.grading else None
    if stage.error and stage.error != verdict:  # the grading reason is already the message
        lines.append(f"stage error: {stage.error}")
    return cap("\n".join(lines), BODY_LIMIT)


def _metrics(stage: StageResult) -> str:
    """`key=value` lines of what the stage used, for the test case's output."""
    values: list[tuple[str, object]] = [
        ("status", status_word(stage)),
        ("turns", stage.turns),
        ("cost_usd", stage.cost_usd),
        ("grading_cost_usd", stage.grading_cost_usd),
        ("input_tokens", stage.input_tokens),
        ("output_tokens", stage.output_tokens),
        ("duration_s", stage.duration_s),
        ("attempts", stage.attempts),
        ("produced_files", len(stage.produced) + stage.produced_omitted),
    ]
    if stage.grading is not None:
        counted = counted_criteria(stage)
        passed = sum(1 for c in counted if c.passed)
        values.append(("criteria_passed", f"{passed}/{len(counted)}"))
        values.append(("analytic_mean", stage.grading.analytic_mean))
    return "".join(f"{key}={_number(value)}\n" for key, value in values if value is not None)


def _number(value: object) -> str:
    # 0.07100000000000001 is what float sums look like; costs are cents.
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _testcase(
    suite: ET.Element,
    result: RunResult,
    scenario: ScenarioResult,
    stage: StageResult,
    kind: Outcome,
) -> None:
    case = _element(
        suite,
        "testcase",
        classname=f"ci-evals.{scenario_label(result, scenario)}",
        name=stage_label(stage),
        time=_seconds(stage.duration_s or 0.0),
    )
    message = cap(reason(result, stage), MESSAGE_LIMIT)
    if kind == "failure":
        _element(case, "failure", _body(stage), message=message, type=status_word(stage))
    elif kind == "error" and unfinished(result, stage):
        _element(case, "error", message, message=INTERRUPTED, type=stage.status)
    elif kind == "error":
        _element(case, "error", _body(stage), message=message, type=status_word(stage))
    elif kind == "skipped" and scenario.arm == "without":
        _element(case, "skipped", message=cap(without_note(stage), MESSAGE_LIMIT))
    elif kind == "skipped":
        _element(case, "skipped", message=cap(stage.error or "skipped", MESSAGE_LIMIT))
    _element(case, "system-out", _metrics(stage))


def _properties(suite: ET.Element, result: RunResult, scenario: ScenarioResult) -> None:
    values = {
        "run_id": result.run_id,
        "run_status": result.status,
        "model": result.model or "(suite default)",
        "model_endpoint": result.model_endpoint,
        # Not a fresh model's verdict: a stub run's or a replay's own words (else absent).
        **({"origin_note": result.origin_note} if result.origin_note else {}),
        **_replayed_from(result),
        "sandbox": result.sandbox,
        "isolated": "true" if result.isolated else "false",
        "network": "true" if result.network else "false",
        "tool_version": result.tool_version,
        "total_cost_usd": f"{result.total_cost_usd:.4f}",
        # A stub's cost is scripted usage at list price, not money spent.
        "cost_simulated": "true" if result.cost_note else "false",
        "repeat": str(scenario.repeat + 1),
        "arm": scenario.arm,  # `without`: the run without the plugin, never a verdict
        **_arms(result, scenario),
        **{f"input.{key}": value for key, value in scenario.inputs.items()},
    }
    properties = _element(suite, "properties")
    for name, value in values.items():
        _element(properties, "property", name=name, value=value)


def _arms(result: RunResult, scenario: ScenarioResult) -> dict[str, str]:
    """Under ablation, each stage's score with, without and delta, as properties."""
    values: dict[str, str] = {}
    for summary in result.summaries:
        arms = summary.arms
        if summary.scenario != scenario.id or arms is None:
            continue
        prefix = f"stage.{summary.stage}"
        values[f"{prefix}.score_with"] = score_text(arms.score)
        values[f"{prefix}.score_without"] = score_text(arms.score_without)
        values[f"{prefix}.delta"] = delta_text(arms.delta)
        if arms.note:
            values[f"{prefix}.delta_note"] = arms.note
    return values


def _replayed_from(result: RunResult) -> dict[str, str]:
    """A replay's recording, as properties: its origin, model and day."""
    recorded = result.replayed_from
    if recorded is None:
        return {}
    return {
        "replayed_from": recorded.origin,
        "replayed_model": recorded.model or "(the CLI's default)",
        "recorded_on": recorded.recorded_on.isoformat() if recorded.recorded_on else "unknown",
    }


def _testsuite(root: ET.Element, result: RunResult, scenario: ScenarioResult) -> None:
    suite = _element(
        root,
        "testsuite",
        name=scenario_label(result, scenario),
        timestamp=result.started_at.strftime("%Y-%m-%dT%H:%M:%S"),
        **_counts(result, [scenario]),
    )
    _properties(suite, result, scenario)
    for stage, kind in scenario_outcomes(result, scenario):
        _testcase(suite, result, scenario, stage, kind)


def _inconsistent(root: ET.Element, result: RunResult, problems: Sequence[str]) -> None:
    """One failing case for a results file that contradicts itself, before the stages."""
    counts = {"tests": "1", "failures": "0", "errors": "1", "skipped": "0", "time": _seconds(0)}
    suite = _element(root, "testsuite", name="ci-evals.results", **counts)
    case = _element(suite, "testcase", classname="ci-evals", name="results.json", time=_seconds(0))
    message = f"{INCONSISTENT}: {len(problems)} problem(s); the run is an error"
    body = cap("\n".join(cap(p, CRITERION_LIMIT) for p in problems), BODY_LIMIT)
    _element(case, "error", body, message=message, type="inconsistent")
    _element(case, "system-out", f"run_id={result.run_id}\n")


def _run_error(root: ET.Element, result: RunResult, why: str) -> None:
    """One error case for the run itself: it did not pass, whatever its stages say."""
    counts = {"tests": "1", "failures": "0", "errors": "1", "skipped": "0", "time": _seconds(0)}
    suite = _element(root, "testsuite", name="ci-evals.run", **counts)
    case = _element(suite, "testcase", classname="ci-evals", name="run", time=_seconds(0))
    _element(case, "error", why, message=cap(why, MESSAGE_LIMIT), type=f"run:{result.status}")
    _element(case, "system-out", f"run_id={result.run_id}\nrun_status={result.status}\n")


def junit_xml(result: RunResult, problems: Sequence[str] | None = None) -> str:
    """The run as a JUnit XML document (UTF-8 text with its XML declaration).

    `problems` are the file's inconsistencies (`verify.problems`, computed when
    not given): any adds a first suite `ci-evals.results` with one `<error>`
    case listing them, so the document never reads as a pass; a run that did
    not pass for a reason no stage shows (`run_reason`) adds `ci-evals.run`.
    """
    found = run_problems(result, problems)
    why = run_reason(result, found)
    counts = _counts(result, result.scenarios)
    extra = bool(found) + bool(why)
    counts["tests"] = str(int(counts["tests"]) + extra)
    counts["errors"] = str(int(counts["errors"]) + extra)
    root = _element(None, "testsuites", name="ci-evals", **counts)
    if found:
        _inconsistent(root, result, found)
    if why:
        _run_error(root, result, why)
    for scenario in result.scenarios:
        _testsuite(root, result, scenario)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
