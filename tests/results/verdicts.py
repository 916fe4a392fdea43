"""A stage verdict with only a binary score, for tests of the rules over runs' scores."""

from __future__ import annotations

from ci_evals.results.criteria import StageVerdict, Verdict


def scored(verdict: Verdict, score: float | None) -> StageVerdict:
    """A run's verdict with its binary score (0-100; None: a limit or an error)."""
    return StageVerdict(
        verdict=verdict,
        reason="",
        graders=(),
        checklist_all_passed=None,
        analytic_mean=None,
        analytic_threshold=3.0,
        binary_score=score,
    )
