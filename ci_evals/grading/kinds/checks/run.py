"""Running a stage's loaded checks: an outcome each, or one `GraderResult`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.grading.kinds.checks.base import Check, CheckOutcome, Evidence

if TYPE_CHECKING:
    from ci_evals.results.criteria import GraderResult


def check_outcomes(
    checks: Sequence[Check], folder: Path, trajectory: Path | None = None
) -> list[CheckOutcome]:
    """Run every check on `folder` (and the stage's trajectory JSONL); one outcome each.

    A check never raises on what the agent wrote: a missing or malformed file
    is a failed outcome with the reason in its `detail`. Imports no pydantic:
    what the fixtures' contract check (a commit hook) runs.
    """
    evidence = Evidence(folder, trajectory)
    return [check.run(evidence) for check in checks]


def run_checks(
    checks: Sequence[Check],
    folder: Path,
    trajectory: Path | None = None,
    *,
    grader: str = "checks",
) -> GraderResult:
    """`check_outcomes` as one `GraderResult` named `grader`: a checklist criterion each."""
    # pydantic (the result records) only here: the hook path runs `check_outcomes`.
    from ci_evals.results.criteria import Criterion, GraderResult  # noqa: PLC0415

    criteria = tuple(
        Criterion(
            id=outcome.id,
            kind="checklist",
            score=1.0 if outcome.passed else 0.0,
            passed=outcome.passed,
            source="check",
            detail=outcome.detail,
        )
        for outcome in check_outcomes(checks, folder, trajectory)
    )
    return GraderResult(grader=grader, criteria=criteria)
