"""`claude plugin eval --threshold T` below 1.0: a stage's runs pass on their mean score.

The CLI scores a case as the mean of its runs' scores and passes it at T; ci-evals
records T in results.json (`score_at_least`) so the summaries, and any report's
check of them, follow that rule, and fails closed on runs in error.
"""

from __future__ import annotations

import pytest

from ci_evals.results.criteria import Verdict
from ci_evals.results.stats import mean_score_verdict, summarize_repeats
from tests.results.verdicts import scored


@pytest.mark.parametrize(
    ("runs", "threshold", "verdict"),
    [
        ([("passed", 100.0), ("failed", 50.0)], 0.75, "passed"),
        ([("passed", 100.0), ("failed", 50.0)], 0.8, "failed"),
        ([("failed", 70.0), ("failed", 70.0), ("failed", 70.0)], 0.7, "passed"),  # 0.7 in floats
        ([("failed", 60.0), ("failed", 80.0)], 0.7, "passed"),
        ([("failed", 100 / 3), ("failed", 200 / 3)], 0.5, "passed"),
        ([("failed", None), ("passed", 100.0)], 0.5, "passed"),  # a limit scores 0
        ([("passed", 100.0), ("passed", 100.0), ("error", None)], 0.6, "passed"),  # 2/3 even at 0
        ([("passed", 100.0), ("error", None)], 0.6, "error"),  # 0.5 or 1.0: the error decides
        ([("failed", 0.0), ("error", None)], 0.6, "failed"),  # 0.5 at best
        ([("error", None), ("error", None)], 0.0, "error"),  # no score at all: never a pass
    ],
)
def test_the_mean_run_score_decides(
    runs: list[tuple[Verdict, float | None]], threshold: float, verdict: Verdict
) -> None:
    found, _ = mean_score_verdict([scored(v, s) for v, s in runs], threshold)
    assert found == verdict


def test_the_summary_records_the_rule_that_decided() -> None:
    runs = [scored("passed", 100.0), scored("failed", 50.0)]
    summary = summarize_repeats(runs, None, score_at_least=0.75)
    assert (summary.verdict, summary.score_at_least) == ("passed", 0.75)
    assert summary.reason == "mean score 0.75 over 2 run(s) (needs 0.75)"
    k_of_n = summarize_repeats(runs, None)
    assert (k_of_n.verdict, k_of_n.score_at_least) == ("failed", None)
