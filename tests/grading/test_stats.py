from __future__ import annotations

import math

import pytest

from ci_evals.errors import UserError
from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict
from ci_evals.results.stats import spread, summarize_repeats, t_quantile_975
from ci_evals.results.verdict import ScoringPolicy, evaluate


def run(goals: int, depth: float, error: bool = False) -> StageVerdict:
    """One repeat's verdict: a checklist and an analytic criterion from a reviewer."""
    if error:
        return evaluate(
            [GraderResult(grader="reviewer", error="empty JSON array")], ScoringPolicy()
        )
    criteria = (
        Criterion(
            id="has-goals", kind="checklist", score=goals, passed=goals == 1, source="reviewer"
        ),
        Criterion(id="depth", kind="analytic", score=depth, passed=depth >= 3, source="reviewer"),
    )
    return evaluate([GraderResult(grader="reviewer", criteria=criteria)], ScoringPolicy())


@pytest.mark.parametrize(
    ("df", "expected"),
    [
        (1, 12.7062),
        (2, 4.3027),
        (4, 2.7764),
        (30, 2.0423),
        (40, 2.0211),
        (60, 2.0003),
        (120, 1.9799),
    ],
)
def test_t_quantile_known_values(df: int, expected: float) -> None:
    assert t_quantile_975(df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_tends_to_the_normal() -> None:
    assert t_quantile_975(100_000) == pytest.approx(1.95996, abs=1e-4)
    with pytest.raises(ValueError, match="at least 1"):
        t_quantile_975(0)


def test_spread_known_values() -> None:
    s = spread([2.0, 3.0, 4.0])
    assert (s.n, s.mean, s.stdev) == (3, 3.0, 1.0)
    half = 4.3027 / math.sqrt(3)
    assert s.ci95_low == pytest.approx(3.0 - half)
    assert s.ci95_high == pytest.approx(3.0 + half)
    assert spread([4.0]).model_dump() == {
        "n": 1,
        "mean": 4.0,
        "stdev": None,
        "ci95_low": None,
        "ci95_high": None,
    }
    assert spread([]).mean is None


def test_two_of_three_passes() -> None:
    summary = summarize_repeats([run(1, 4), run(1, 2), run(1, 3)], pass_at_least=2)
    assert summary.verdicts == ("passed", "failed", "passed")
    assert (summary.verdict, summary.passed, summary.failed) == ("passed", 2, 1)
    assert summary.reason == "2 of 3 runs passed (needs 2)"
    assert summary.pass_rate == pytest.approx(2 / 3)
    assert summary.analytic_mean.mean == 3.0
    assert summary.analytic_mean.stdev == 1.0
    assert summary.analytic_mean.ci95_high == pytest.approx(3.0 + 4.3027 / math.sqrt(3))
    depth = next(c for c in summary.criteria if c.id == "depth")
    assert (depth.kind, depth.runs, depth.passed) == ("analytic", 3, 2)
    assert depth.pass_rate == pytest.approx(2 / 3)
    assert depth.flaky is True
    goals = next(c for c in summary.criteria if c.id == "has-goals")
    assert (goals.pass_rate, goals.score.mean, goals.score.stdev) == (1.0, 1.0, 0.0)
    assert goals.flaky is False


def test_default_rule_is_every_run() -> None:
    summary = summarize_repeats([run(1, 4), run(1, 2), run(1, 3)])
    assert (summary.verdict, summary.pass_at_least) == ("failed", 3)


def test_one_of_three_fails_two_of_three() -> None:
    summary = summarize_repeats([run(0, 4), run(1, 1), run(1, 5)], pass_at_least=2)
    assert summary.verdict == "failed"
    assert summary.reason == "1 of 3 runs passed (needs 2)"


def test_errors_that_could_decide_make_an_error() -> None:
    summary = summarize_repeats([run(1, 4), run(0, 0, error=True), run(0, 3)], pass_at_least=2)
    assert summary.verdict == "error"
    assert summary.reason == "1 of 3 runs passed (needs 2); 1 ended in error"
    # The errored run is left out of the score statistics.
    assert summary.analytic_mean.n == 2
    # ...but an error does not block a pass the other runs already earned.
    assert (
        summarize_repeats([run(1, 4), run(0, 0, error=True), run(1, 3)], pass_at_least=2).verdict
        == "passed"
    )


def test_pass_at_least_above_the_runs_is_a_user_error() -> None:
    with pytest.raises(UserError, match="pass_at_least is 3 but the stage ran 2 time"):
        summarize_repeats([run(1, 4), run(1, 4)], pass_at_least=3)
    with pytest.raises(ValueError, match="at least one verdict"):
        summarize_repeats([])


def test_checks_on_the_same_file_stay_separate_criteria() -> None:
    def verdict(headings_ok: bool) -> StageVerdict:
        criteria = (
            Criterion(
                id="files:research/company.md", kind="checklist", score=1, passed=True,
                source="check",
            ),
            Criterion(
                id="headings:research/company.md", kind="checklist", score=int(headings_ok),
                passed=headings_ok, source="check",
            ),
        )  # fmt: skip
        return evaluate([GraderResult(grader="checks", criteria=criteria)], ScoringPolicy())

    summary = summarize_repeats([verdict(True), verdict(False), verdict(True)])
    by_id = {c.id: c for c in summary.criteria}
    assert set(by_id) == {"files:research/company.md", "headings:research/company.md"}
    assert (by_id["files:research/company.md"].runs, by_id["files:research/company.md"].passed) == (
        3,
        3,
    )
    assert (
        by_id["headings:research/company.md"].runs,
        by_id["headings:research/company.md"].passed,
    ) == (3, 2)
