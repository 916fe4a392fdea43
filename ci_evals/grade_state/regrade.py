"""Re-grade a saved run: the graders again, on the saved stage states, no agent stage.

For a changed rubric, threshold, weight or check: every stage that ran to
completion left its workspace state in `<stage folder>/after/` (see `state`)
and its trajectory, so checks and command graders run again on it under the
suite's *current* configuration. The reviewer is a model call: per stage it is
`reuse`d (its saved final message parsed again; `auto` does this while the
reviewer's fingerprint is unchanged), `rerun` (needs a model) or `skip`ped.
A case's judges (`llm`, `baseline`) are asked again through the re-grade's
endpoint. A stage that ended in `limit`, `error` or `skipped` keeps its status:
nothing ran to grade. The modes and the fingerprint: docs/grading.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ci_evals.agents import Abort, Agent
from ci_evals.endpoints.base import ENDPOINT_NAMES, EndpointCaller
from ci_evals.errors import UserError
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.state import AFTER_DIR
from ci_evals.grade_state.pipeline import GradeJob, apply_verdict, grade_state
from ci_evals.grading.kinds.plugin_eval import PluginEvalGrader
from ci_evals.grading.reviewer.review import GRADER, fingerprint, plugin_relative, state_note
from ci_evals.grading.reviewer.scorecard import grade_scorecard
from ci_evals.results import MISSED_BY, miss_source
from ci_evals.results.criteria import GraderResult
from ci_evals.results.model import (
    Forwarded,
    RunResult,
    ScenarioResult,
    StageResult,
    dump_results,
    record_endpoint_misses,
)
from ci_evals.sandbox.base import ON_HOST, SandboxConfig
from ci_evals.suite.load import Scenario, Stage, Suite

ReviewerMode = Literal["auto", "reuse", "rerun", "skip"]
GRADED_STATUSES = ("completed", "passed", "failed")


@dataclass
class Target:
    """One saved stage to re-grade, and what to do about its reviewer."""

    scenario: ScenarioResult
    result: StageResult
    stage: Stage
    stage_dir: Path
    reviewer: Literal["none", "reuse", "rerun", "skip"]
    saved_reviewer: GraderResult | None
    before: str  # the status before re-grading
    why: str = ""  # why the reviewer runs again, said when that needs a model


def plan(
    run: RunResult, suite: Suite, run_dir: Path, mode: ReviewerMode
) -> tuple[list[Target], list[str]]:
    """The stages to re-grade, and one note per stage left as it was."""
    targets: list[Target] = []
    notes: list[str] = []
    for scenario in run.scenarios:
        for result in scenario.stages:
            where = f"{label(run, scenario)} stage {result.number} ({result.name})"
            graded = result.status in GRADED_STATUSES or (
                result.status == "error" and result.grading is not None
            )
            if not graded or result.trajectory is None:
                notes.append(f"{where}: {result.status}, not graded")
                continue
            if result.endpoint_misses:
                # What the graders saw was never scripted: no re-grading makes it a result.
                notes.append(
                    f"{where}: {result.status}, "
                    f"{MISSED_BY[miss_source(result.endpoint_misses)]} had no answer for "
                    f"{len(result.endpoint_misses)} request(s); not re-graded"
                )
                continue
            # A case's graders as its arm graded them (the with-only rule, run.md *Ablation*).
            arm = scenario.arm if run.ablation == "with-without" else None
            stage = _stage(suite, scenario, result)
            stage = replace(stage, grading=stage.grading.for_arm(arm))
            stage_dir = run_dir / Path(result.trajectory).parent
            if not (stage_dir / AFTER_DIR).is_dir():
                notes.append(f"{where}: no saved state ({AFTER_DIR}/), not re-graded")
                continue
            verdict = result.grading
            saved = None
            if verdict is not None:
                saved = next((g for g in verdict.graders if g.grader == GRADER), None)
            action, why = _reviewer_action(stage, suite, saved, run_dir, stage_dir, mode=mode)
            targets.append(
                Target(
                    scenario=scenario,
                    result=result,
                    stage=stage,
                    stage_dir=stage_dir,
                    reviewer=action,
                    saved_reviewer=saved,
                    before=result.status,
                    why=why,
                )
            )
    return targets, notes


def label(run: RunResult, scenario: ScenarioResult) -> str:
    """`acme`, or `acme#2` for the second repeat of a scenario run several times."""
    return run.label_of(scenario)


def _stage(suite: Suite, scenario: ScenarioResult, result: StageResult) -> Stage:
    stages = suite.stages
    if scenario.unit == "case":  # a `claude plugin eval` case runs its own one stage
        own = next((s.stage for s in suite.scenarios if s.id == scenario.id), None)
        stages = (own,) if own is not None else ()
    if not 1 <= result.number <= len(stages) or stages[result.number - 1].name != result.name:
        raise UserError(
            f"the run's stage {result.number} ({result.name}) is not in the suite",
            file=suite.display,
            hint="re-grade with the suite the run was made with (--suite)",
        )
    return stages[result.number - 1]


def _reviewer_action(
    stage: Stage,
    suite: Suite,
    saved: GraderResult | None,
    run_dir: Path,
    stage_dir: Path,
    *,
    mode: ReviewerMode,
) -> tuple[Literal["none", "reuse", "rerun", "skip"], str]:
    """What to do with the stage's reviewer, and (for `rerun`) why, in words."""
    config = stage.grading.reviewer
    if config is None:
        return "none", ""
    if mode != "auto":
        return mode, "--reviewer rerun asks for it" if mode == "rerun" else ""
    if saved is None or _raw_path(saved, run_dir) is None:
        return "rerun", "it left no scorecard"
    assert stage.reviewer_prompt is not None
    try:
        note = state_note(stage_dir / AFTER_DIR)  # what it was told of this state
    except OSError:
        return "rerun", "its saved state cannot be read whole"
    current = fingerprint(config, suite.plugin.path, stage.reviewer_prompt, suite.root, note=note)
    if saved.fingerprint != current:
        return "rerun", "its agent file, prompt or rubrics changed"
    return "reuse", ""


def _raw_path(saved: GraderResult, run_dir: Path) -> Path | None:
    if saved.raw_output is None or saved.raw_output.path is None:
        return None
    path = run_dir / saved.raw_output.path
    return path if path.is_file() else None


def reuse_reviewer(target: Target, suite: Suite, run_dir: Path) -> GraderResult:
    """The saved scorecard parsed again against the current rubrics (no model call)."""
    config, prompt = target.stage.grading.reviewer, target.stage.reviewer_prompt
    assert config is not None and prompt is not None
    saved = target.saved_reviewer
    if saved is None:
        return GraderResult(grader=GRADER, error="no saved reviewer result to re-use")
    raw = _raw_path(saved, run_dir)
    if raw is None:
        # Nothing to parse again (it timed out, or the file is gone): the saved error stands.
        return saved.model_copy(
            update={"error": saved.error or "the saved reviewer output is missing", "reused": True}
        )
    plugin = suite.plugin.path
    try:
        rubrics = config.rubric_set(plugin, suite.root)
        note = state_note(target.stage_dir / AFTER_DIR)
        current = fingerprint(config, plugin, prompt, suite.root, note=note)
    except UserError as exc:
        return GraderResult(grader=GRADER, error=f"the reviewer's rubrics: {exc.message}")
    except OSError as exc:
        return GraderResult(grader=GRADER, error=f"cannot read the saved state: {exc}")
    text = raw.read_bytes().decode("utf-8", "surrogateescape")
    graded = grade_scorecard(
        text, rubrics, grader=GRADER, judge_model=saved.judge_model, require_all=config.require_all
    )
    warnings = graded.warnings
    if saved.fingerprint != current:
        warnings = (*warnings, "re-used a scorecard written against other rubrics or prompt")
    graded = graded.model_copy(
        update={
            "raw_output": saved.raw_output,
            "cost_usd": saved.cost_usd,  # what the scorecard in use cost
            "trajectory": saved.trajectory,
            "fingerprint": current,
            "reused": True,
            "warnings": warnings,
        }
    )
    return plugin_relative(graded, plugin, suite.root)


async def regrade(
    targets: list[Target],
    *,
    suite: Suite,
    run_dir: Path,
    out_dir: Path,
    agent: Agent | None,
    env_for: Callable[[Path], dict[str, str]],
    model: str | None,
    abort: Abort | None = None,
    sandbox: SandboxConfig = ON_HOST,
    new_caller: Callable[[int | None], EndpointCaller] | None = None,
    endpoint: Mapping[str, str] | None = None,
) -> None:
    """Grade every target again; its stage result takes the new verdict.

    With `new_caller` (the stub), each reviewer that runs again, and each stage whose
    judges are asked again, is its own caller: requests of it the script could not
    answer make its stage an `error`, as in a run. `endpoint`: the endpoint
    variables the judges ask through (None: there is none, and a judge is an error).
    """
    abort = abort or Abort()
    for target in targets:
        target.result.graded = not target.stage.grading.empty
        if target.stage.grading.empty:  # graders removed since the run: nothing decides
            target.result.status, target.result.error, target.result.grading = (
                "completed", None, None,
            )  # fmt: skip
            continue
        reused = None
        if target.reviewer == "reuse":
            reused = reuse_reviewer(target, suite, run_dir)
        judging = asks_model(target.stage)
        caller = (
            new_caller(None)
            if new_caller is not None and (target.reviewer == "rerun" or judging)
            else None
        )
        scenario = Scenario(id=target.scenario.id, inputs=dict(target.scenario.inputs))
        folder = out_dir / target.stage_dir.relative_to(run_dir)
        job = GradeJob(
            suite=suite,
            stage=target.stage,
            scenario=scenario,
            state=target.stage_dir / AFTER_DIR,
            trajectory=run_dir / str(target.result.trajectory),
            out_dir=folder,
            work_dir=out_dir / ".work" / target.stage_dir.relative_to(run_dir),
            run_dir=run_dir,
            env_for=env_for if caller is None else _with_endpoint(env_for, caller.env),
            model=model,
            sandbox=sandbox,
            endpoint=(endpoint if caller is None else caller.env) if judging else None,
        )
        folder.mkdir(parents=True, exist_ok=True)
        verdict = await grade_state(
            job,
            agent=agent,
            abort=abort,
            reviewer=reused,
            skip_reviewer=target.reviewer == "skip",
        )
        apply_verdict(target.result, verdict)
        if caller is not None:
            record_endpoint_misses(target.result, caller.misses())


def _with_endpoint(
    env_for: Callable[[Path], dict[str, str]], endpoint: Mapping[str, str]
) -> Callable[[Path], dict[str, str]]:
    """`env_for`, its model endpoint variables replaced by `endpoint`'s."""

    def env(root: Path) -> dict[str, str]:
        return {
            **env_for(root),
            **{name: value for name, value in endpoint.items() if name in ENDPOINT_NAMES},
        }

    return env


def asks_model(stage: Stage) -> bool:
    """Whether re-grading the stage asks a model besides its reviewer: a case's judges."""
    return any(isinstance(g, PluginEvalGrader) and g.asks_model for g in stage.grading.graders)


def judged(targets: list[Target]) -> Iterator[Target]:
    """The targets whose judges are asked again (they need a model)."""
    return (t for t in targets if asks_model(t.stage))


def reruns(targets: list[Target]) -> Iterator[Target]:
    """The targets whose reviewer must run again (they need a model)."""
    return (t for t in targets if t.reviewer == "rerun")


def write(path: Path, result: RunResult) -> None:
    """Write a results file atomically at `path` (never the run's own results.json)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, dump_results(result), mode=0o644)


def finish(result: RunResult, suite: Suite, spent: Forwarded | None = None) -> None:
    """Mark the result re-graded; recompute its total cost and its repeat summaries
    (current k-of-n). The total: when the run recorded what its endpoint forwarded,
    that plus what the re-run reviewers' endpoint forwarded (`spent`); else the
    stages plus the reviewers in use."""
    from datetime import datetime, timezone  # noqa: PLC0415

    from ci_evals.results.summary import mean_delta, summarize_run  # noqa: PLC0415

    result.regraded_at = datetime.now(timezone.utc)
    result.pass_at_least = suite.grading.pass_at_least
    result.summaries = summarize_run(result, suite.grading.pass_at_least)
    result.mean_delta = mean_delta(result.summaries)
    if result.forwarded is not None and spent is not None:
        result.forwarded = result.forwarded.plus(spent)
    if result.forwarded is not None:
        result.total_cost_usd = result.forwarded.cost_usd
    else:
        result.total_cost_usd = result.stages_cost_usd
