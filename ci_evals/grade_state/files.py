"""Grade one stage run: checks, command graders and the reviewer's scorecard -> a verdict.

The runner does the parts that need an agent (running the reviewer through
the SDK and turning its final message into a `GraderResult` with
`scorecard.grade_scorecard`); everything else happens here, from files on
disk, so `ci-evals grade RUN_DIR` can call the same function on a saved run.
A stage with a reviewer also gets one advisory criterion, `untrusted`'s flag
for a file that addresses its graders (reported, never deciding). A grader
whose criteria name a source that is neither built in nor a registered
grader kind is an error of that grader (`own_sources`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ci_evals.grading.config import StageGrading
from ci_evals.grading.kinds.base import GradeContext, ModelEndpoint
from ci_evals.grading.kinds.registry import KINDS
from ci_evals.grading.reviewer.untrusted import CRITERION_ID as ADDRESSED_ID
from ci_evals.grading.reviewer.untrusted import addressed_to_graders
from ci_evals.results.criteria import BUILTIN_SOURCES, GraderResult, StageVerdict
from ci_evals.results.verdict import PolicyOverride, ScoringPolicy, evaluate
from ci_evals.sandbox.base import ON_HOST, SandboxConfig


def grade_files(
    grading: StageGrading,
    folder: Path,
    suite_policy: ScoringPolicy,
    *,
    trajectory: Path | None,
    reviewer: GraderResult | None = None,
    env: Mapping[str, str] | None = None,
    out_dir: Path | None = None,
    sandbox: SandboxConfig = ON_HOST,
    endpoint: ModelEndpoint | None = None,
) -> StageVerdict:
    """The stage's verdict under the suite's policy with the stage's overrides on top.

    `folder` is what the graders look at (the workspace after the stage, or a
    copy of it); `trajectory` the stage's JSONL; `reviewer` the reviewer's
    graded scorecard when the stage has a reviewer (missing -> error, never a
    pass); `out_dir` receives the graders' logs (a command grader's output as
    `command-<id>.log`); graders that run programs run them in a `sandbox`; graders
    that ask a model (a judge) ask the run's `endpoint`.
    """
    ctx = GradeContext(
        folder, trajectory, out_dir=out_dir, sandbox=sandbox, env=env, endpoint=endpoint
    )
    policy = suite_policy.merge(grading.scoring)
    # Before any grader writes to the folder: what the stage left, addressed to its reviewer.
    addressed = addressed_to_graders(folder) if grading.reviewer is not None else None
    results: list[GraderResult] = [own_sources(grader.grade(ctx)) for grader in grading.graders]
    if grading.reviewer is not None:
        results.append(
            reviewer
            if reviewer is not None
            else GraderResult(grader="reviewer", error="the reviewer was configured but not run")
        )
    elif reviewer is not None:
        results.append(reviewer)
    if addressed is not None:
        results.append(addressed)
        policy = policy.merge(PolicyOverride(advisory=frozenset({ADDRESSED_ID})))
    return evaluate(results, policy)


def own_sources(result: GraderResult) -> GraderResult:
    """`result`, or its error when a criterion names a source that is neither a
    built-in one (`BUILTIN_SOURCES`) nor an installed grader kind's name."""
    unknown = sorted(
        {
            c.source
            for c in result.criteria
            if c.source not in BUILTIN_SOURCES
            and (c.source in KINDS.builtin or c.source not in KINDS)
        }
    )
    if not unknown:
        return result
    known = (*BUILTIN_SOURCES, *(k for k in KINDS.names() if k not in KINDS.builtin))
    return GraderResult(
        grader=result.grader,
        error=(
            f"criteria name the source {', '.join(map(repr, unknown))}: neither a built-in "
            f"one nor a grader kind's name (known: {', '.join(known)})"
        ),
        raw_output=result.raw_output,
    )
