"""Grading inside `ci-evals run`: the runner's `after_stage` hook.

After a stage that *completed* (the agent finished its turn), the hook:

1. saves the workspace as the stage left it to `<stage folder>/after/`
   (`state.save_state`) — what the stage is graded on, now and by
   `ci-evals grade` later;
2. grades it (`pipeline.grade_state`): checks, command graders, the reviewer;
3. sets the stage's status from the verdict — `passed`, `failed` or `error` —
   and records the verdict in `results.json`.

A stage that ended in `limit` or `error` keeps that status and is not graded,
except a `claude plugin eval` case's run that reached its `max_turns`: the CLI
grades such a run, and so does ci-evals (its turns say it reached the limit).
A stage with no graders stays `completed`; one with graders that the hook did
not grade (the run was interrupted first) is made an `error` by the runner.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.fs.state import AFTER_DIR, save_state
from ci_evals.grade_state.pipeline import GradeJob, apply_verdict, grade_state

if TYPE_CHECKING:
    from ci_evals.run.runner import StageContext

GRADING_WORK_DIR = "grading"  # under the scenario's temp folder


class GradingHook:
    """`Runner(..., after_stage=GradingHook())`."""

    def __init__(self, *, keep_work: bool = False) -> None:
        self.keep_work = keep_work
        # The last saved state per workspace: the next stage hard-links from it.
        self._saved: dict[Path, Path] = {}

    async def __call__(self, ctx: StageContext) -> None:
        import asyncio  # noqa: PLC0415 - keep module import light

        if _case_at_turn_limit(ctx):
            # `claude plugin eval` grades a run that reached `max_turns` like any
            # other (the files it wrote may pass); a case unit is graded so too.
            ctx.result.status, ctx.result.limit_hit = "completed", None
        if ctx.result.status != "completed":
            return
        state = ctx.stage_dir / AFTER_DIR
        await asyncio.to_thread(
            save_state,
            ctx.workspace.root,
            state,
            previous=self._saved.get(ctx.workspace.parent),
            changed=ctx.changed,
            exclude=ctx.workspace.unrecorded,
        )
        self._saved[ctx.workspace.parent] = state
        if ctx.stage.grading.empty:
            return
        job = GradeJob(
            suite=ctx.plan.suite,
            stage=ctx.stage,
            scenario=ctx.scenario,
            state=state,
            trajectory=ctx.request.trajectory_path,
            out_dir=ctx.stage_dir,
            work_dir=ctx.workspace.parent / GRADING_WORK_DIR / ctx.stage_dir.name,
            run_dir=ctx.plan.run_dir,
            env_for=ctx.env_for,
            model=ctx.plan.model,
            keep=self.keep_work,
            budget_usd=ctx.budget_left,
            sandbox=ctx.plan.sandbox,
            endpoint=ctx.plan.endpoint if ctx.endpoint is None else ctx.endpoint,
        )
        verdict = await grade_state(job, agent=ctx.agent, abort=ctx.abort)
        apply_verdict(ctx.result, verdict)


def _case_at_turn_limit(ctx: StageContext) -> bool:
    return (
        ctx.scenario.stage is not None  # a case unit
        and ctx.result.status == "limit"
        and ctx.result.limit_hit == "turns"
    )
