"""Grade one stage run: checks, command graders and the reviewer's scorecard -> a verdict.

The runner does the parts that need an agent (running the reviewer through
the SDK and turning its final message into a `GraderResult` with
`scorecard.grade_scorecard`); everything else happens here, from files on
disk, so `ci-evals grade RUN_DIR` can call the same function on a saved run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ci_evals.graders.checks import run_checks
from ci_evals.graders.command import run_command_grader
from ci_evals.graders.config import StageGrading
from ci_evals.graders.scoring import ScoringPolicy, evaluate
from ci_evals.results.criteria import GraderResult, StageVerdict


def grade_stage(
    grading: StageGrading,
    folder: Path,
    suite_policy: ScoringPolicy,
    *,
    trajectory: Path | None,
    reviewer: GraderResult | None = None,
    env: Mapping[str, str] | None = None,
    out_dir: Path | None = None,
) -> StageVerdict:
    """The stage's verdict under the suite's policy with the stage's overrides on top.

    `folder` is what the graders look at (the workspace after the stage, or a
    copy of it); `trajectory` the stage's JSONL; `reviewer` the reviewer's
    graded scorecard when the stage has a reviewer (missing -> error, never a
    pass); `out_dir` receives each command grader's output as
    `command-<id>.log`.
    """
    results: list[GraderResult] = []
    if grading.checks:
        results.append(run_checks(grading.checks, folder, trajectory))
    for command in grading.graders:
        log = None if out_dir is None else out_dir / f"command-{_safe(command.id)}.log"
        results.append(run_command_grader(command, folder, env=env, output_path=log))
    if grading.reviewer is not None:
        results.append(
            reviewer
            if reviewer is not None
            else GraderResult(grader="reviewer", error="the reviewer was configured but not run")
        )
    elif reviewer is not None:
        results.append(reviewer)
    return evaluate(results, suite_policy.merge(grading.scoring))


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
