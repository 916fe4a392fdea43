"""Grade one saved stage state: reviewer, checks, command graders -> a `StageVerdict`.

One function for the three places a stage is graded: right after it ran
(`hook.GradingHook`, inside `ci-evals run`), on a saved run (`ci-evals grade`)
and on a curated fixture (`ci-evals check-fixtures`). Each hands it a saved
workspace state (`state.AFTER_DIR`, or a fixture laid down) that no grader
writes to:

- checks read the state directly (they only read), or, when it recorded links
  (`state.state_links`: a saved state holds none), a view of it with its
  links made again (`state.view_state`);
- command graders run in a private copy of it (they may write);
- the reviewer runs in another private copy (`reviewer.run_reviewer`), or a
  scorecard saved by an earlier run is re-used, or it is left out.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.agents import Abort, Agent
from ci_evals.fs.state import CHECKS_DIR, copy_state, state_links, view_state
from ci_evals.grade_state.files import grade_files
from ci_evals.grading.kinds.base import ModelEndpoint
from ci_evals.grading.reviewer.review import ReviewJob, run_reviewer
from ci_evals.results.criteria import GraderResult, StageVerdict
from ci_evals.results.verdict import ScoringPolicy
from ci_evals.sandbox.base import ON_HOST, SandboxConfig
from ci_evals.suite.load import Scenario, Stage, Suite

if TYPE_CHECKING:
    from ci_evals.results.model import StageResult


@dataclass(frozen=True)
class GradeJob:
    """One stage state to grade, and where everything goes."""

    suite: Suite
    stage: Stage
    scenario: Scenario
    state: Path  # the saved workspace state (read only)
    trajectory: Path | None  # the stage's trajectory.jsonl (None: none, e.g. a fixture)
    out_dir: Path  # reviewer output, scorecard.json, command logs
    work_dir: Path  # private copies for graders; removed afterwards unless `keep`
    run_dir: Path  # recorded paths are made relative to it
    env_for: Callable[[Path], dict[str, str]]  # agent env with private folders under a root
    model: str | None = None
    keep: bool = False
    # What is left of the run budget for the graders' agents (None: no run budget).
    budget_usd: float | None = None
    sandbox: SandboxConfig = ON_HOST  # where the reviewer and command graders run
    # The stage's endpoint variables, for graders that ask a model (a case's judge);
    # None: there is none (re-grading, a fixture), and such a grader is an error.
    endpoint: Mapping[str, str] | None = field(default=None, repr=False)


async def grade_state(
    job: GradeJob,
    *,
    agent: Agent | None,
    abort: Abort,
    reviewer: GraderResult | None = None,
    skip_reviewer: bool = False,
) -> StageVerdict:
    """The stage's verdict. `reviewer` re-uses a saved result instead of running the
    reviewer; `skip_reviewer` leaves a configured reviewer out (checks and
    commands alone decide); otherwise the reviewer runs through `agent`."""
    grading = job.stage.grading
    if skip_reviewer:
        grading = replace(grading, reviewer=None)
    try:
        if grading.reviewer is not None and reviewer is None:
            reviewer = await _run_reviewer(job, agent, abort)
        folder = job.state
        if grading.writes:
            folder, _ = await asyncio.to_thread(
                copy_state,
                job.state,
                job.suite.plugin.path,
                job.work_dir / "graders",
                plugin_within=job.suite.plugin.link_root,
                plugin_manifest=job.suite.plugin.manifest_to_write,
                plugin_files=job.suite.plugin.files,
            )
        elif state_links(job.state):
            folder = await asyncio.to_thread(view_state, job.state, job.work_dir / CHECKS_DIR)
        policy = ScoringPolicy().merge(job.suite.grading.scoring)
        verdict = await asyncio.to_thread(
            grade_files,
            grading,
            folder,
            policy,
            trajectory=job.trajectory,
            reviewer=reviewer if grading.reviewer is not None else None,
            out_dir=job.out_dir,
            sandbox=job.sandbox,
            endpoint=None if job.endpoint is None else ModelEndpoint(job.endpoint, job.budget_usd),
        )
    finally:
        if not job.keep:
            shutil.rmtree(job.work_dir, ignore_errors=True)
    return relative_paths(verdict, job.run_dir)


async def _run_reviewer(job: GradeJob, agent: Agent | None, abort: Abort) -> GraderResult:
    stage, config, prompt = job.stage, job.stage.grading.reviewer, job.stage.reviewer_prompt
    assert config is not None
    if agent is None or prompt is None:
        return GraderResult(grader="reviewer", error="the reviewer was configured but not run")
    limits = stage.limits
    if job.budget_usd is not None:
        if job.budget_usd <= 0:  # fail closed: no verdict without the review
            return GraderResult(
                grader="reviewer", error="the run budget is spent: the reviewer was not run"
            )
        cap = limits.max_budget_usd
        left = job.budget_usd if cap is None else min(cap, job.budget_usd)
        limits = replace(limits, max_budget_usd=left)
    suite, scenario = job.suite, job.scenario

    def values(workspace: Path, plugin: Path) -> dict[str, str]:
        return suite.template_values(stage, scenario, workspace=workspace, plugin=plugin)

    review = ReviewJob(
        config=config,
        prompt=prompt,
        state=job.state,
        plugin_source=suite.plugin.path,
        plugin_manifest=suite.plugin.manifest_to_write,
        plugin_within=suite.plugin.link_root,
        plugin_files=suite.plugin.files,
        suite_dir=suite.root,
        cwd=stage_cwd(suite, stage, scenario),
        values=values,
        work_dir=job.work_dir / "reviewer",
        out_dir=job.out_dir,
        env=job.env_for(job.work_dir / "reviewer-agent"),
        sandbox=job.sandbox,
        writable=(job.work_dir / "reviewer-agent",),
        limits=limits,
        model=job.model,
        keep=job.keep,
    )
    return await run_reviewer(review, agent, abort)


def stage_cwd(suite: Suite, stage: Stage, scenario: Scenario) -> str:
    """The stage's working folder relative to the workspace ("" for its root)."""
    root = Path("/ci-evals-workspace")
    path = suite.cwd_for(stage, scenario, workspace=root, plugin=root / "plugin")
    rel = path.relative_to(root).as_posix()
    return "" if rel == "." else rel


def relative_paths(verdict: StageVerdict, run_dir: Path) -> StageVerdict:
    """The verdict with every recorded path inside `run_dir` made relative to it,
    so a run folder stays readable when it is moved (a CI artifact)."""

    def rel(path: str | None) -> str | None:
        if path is None:
            return None
        try:
            return Path(path).relative_to(run_dir).as_posix()
        except ValueError:
            return path

    graders = []
    for result in verdict.graders:
        update: dict[str, object] = {"trajectory": rel(result.trajectory)}
        if result.raw_output is not None:
            update["raw_output"] = result.raw_output.model_copy(
                update={"path": rel(result.raw_output.path)}
            )
        graders.append(result.model_copy(update=update))
    return verdict.model_copy(update={"graders": tuple(graders)})


def apply_verdict(result: StageResult, verdict: StageVerdict) -> None:
    """The stage's status and one-line reason from its verdict."""
    result.status = verdict.verdict
    result.error = None if verdict.verdict == "passed" else verdict.reason
    result.grading = verdict
    costs = [g.cost_usd for g in verdict.graders if g.cost_usd is not None]
    result.grading_cost_usd = sum(costs) if costs else None
