"""The arms of a run with and without the plugin (`ablation: with-without`) compared as
`claude plugin eval --ablation with-without` compares a case, and checked in a file."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ci_evals.report.verify import problems
from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict, Verdict
from ci_evals.results.model import RunResult, ScenarioResult, StageResult
from ci_evals.results.stats import compare_arms, summarize_repeats
from ci_evals.results.summary import SINGLE_ARM, mean_delta, summarize_run
from ci_evals.results.verdict import ScoringPolicy, evaluate
from tests.results.verdicts import scored


@pytest.mark.parametrize(
    ("with_arm", "without_arm", "expected"),
    [
        ([("passed", 100.0), ("failed", 50.0)], [("failed", 0.0), ("failed", 50.0)], 0.5),
        ([("passed", 100.0)], [("passed", 100.0)], 0.0),
        ([("failed", 25.0)], [("passed", 100.0)], -0.75),  # the plugin made it worse
        ([("failed", None)], [("failed", 50.0)], -0.5),  # a limit scores 0
    ],
)
def test_delta_is_the_mean_score_with_minus_without(
    with_arm: list[tuple[Verdict, float | None]],
    without_arm: list[tuple[Verdict, float | None]],
    expected: float,
) -> None:
    runs = [scored(v, s) for v, s in without_arm]
    arms = compare_arms([scored(v, s) for v, s in with_arm], runs, summarize_repeats(runs))
    assert arms.delta == pytest.approx(expected) and arms.note is None
    assert arms.without is not None and arms.without.runs == len(without_arm)


@pytest.mark.parametrize("errored", ["with", "without"])
def test_a_run_in_error_in_either_arm_withholds_the_delta(errored: str) -> None:
    fine, broken = [scored("passed", 100.0)] * 2, [scored("passed", 100.0), scored("error", None)]
    with_arm, without_arm = (broken, fine) if errored == "with" else (fine, broken)
    arms = compare_arms(with_arm, without_arm, summarize_repeats(without_arm))
    assert arms.delta is None and arms.note == "no delta: 1 run(s) ended in error"
    assert arms.score == arms.score_without == 1.0  # the runs that have a score


def test_a_single_arm_stage_says_why() -> None:
    arms = compare_arms([scored("passed", 100.0)], None, None, "its prompt is a command")
    assert (arms.delta, arms.score_without, arms.single_arm) == (
        None,
        None,
        "its prompt is a command",
    )
    assert arms.note == "single-arm: its prompt is a command"


def _graded(passed: int, of: int) -> StageVerdict:
    criteria = tuple(
        Criterion(id=f"c{i}", kind="checklist", score=float(i < passed), passed=i < passed,
                  source="check")
        for i in range(of)
    )  # fmt: skip
    return evaluate([GraderResult(grader="checks", criteria=criteria)], ScoringPolicy())


def _stage(number: int, passed: int | None, error: str | None = None) -> StageResult:
    if passed is None:
        return StageResult(number=number, name=f"s{number}", status="skipped", error=error)
    grading = _graded(passed, 2)
    return StageResult(number=number, name=f"s{number}", status=grading.verdict, grading=grading)


def _result(ablation: str = "with-without") -> RunResult:
    now = datetime.now(timezone.utc)
    single = SINGLE_ARM + "its prompt is the plugin command /demo:s2"
    result = RunResult(
        run_id="r",
        tool_version="0",
        started_at=now,
        finished_at=now,
        status="completed",
        from_stage=1,
        suite_file="ci-evals.yaml",
        ablation=ablation,  # type: ignore[arg-type]
        scenarios=[
            ScenarioResult(id="acme", stages=[_stage(1, 2), _stage(2, 2)]),
            ScenarioResult(
                id="acme",
                arm="without",
                stages=[_stage(1, 1), _stage(2, None, single)],
            ),
        ],
    )
    result.summaries = summarize_run(result, None)
    result.mean_delta = mean_delta(result.summaries)
    return result


def test_the_verdict_is_the_with_arms_and_the_summary_compares() -> None:
    result = _result()
    first, second = result.summaries
    assert first.summary.verdict == second.summary.verdict == "passed"
    assert first.summary.runs == 1  # the without-arm is no repeat
    assert first.arms is not None and first.arms.delta == 0.5
    assert second.arms is not None and second.arms.single_arm == (
        "its prompt is the plugin command /demo:s2"
    )
    assert result.mean_delta == 0.5
    assert problems(result) == []


def test_a_file_whose_arms_or_mean_delta_were_edited_is_inconsistent() -> None:
    result = _result()
    result.mean_delta = 0.9
    assert any("mean_delta is 0.9" in p for p in problems(result))
    one_arm = _result()
    one_arm.ablation = "none"
    found = problems(one_arm)
    assert "some units ran without the plugin, but the run's ablation is none" in found
    twice = _result()
    twice.scenarios.append(twice.scenarios[1].model_copy())
    assert "a unit ran without the plugin twice, or without its run with it" in problems(twice)
