"""Run stages N..last of every chosen scenario, each in a fresh workspace.

The runner owns the order of things; everything else is delegated:
`workspace` lays down the plugin copy and fixtures, the agent backend
(`ci_evals.agents`) runs one stage, `snapshot` says what the stage produced,
`results` writes `results.json`. The runner adds the rules between stages: a
stage in `error` or `limit` stops its scenario; a spent budget, or
`ENDPOINT_DOWN_AFTER` stages in a row failed by the endpoint, starts no new
stage; a stage with graders ends `passed`, `failed` or `error`, never
`completed`; `results.json` is rewritten as stages start and end, at a bounded
pace (`results.writer`), and at once at the end or an interrupt, so what is left
is a truthful partial record; `interrupt()` (Ctrl-C, SIGTERM) ends every running
stage's processes and lets the scenarios wind down.

    <run>/results.json
    <run>/<scenario>/[r<i>/]<k>-<stage>/trajectory.jsonl, stderr.log, produced/, after/
    $TMPDIR/ci-evals-<run-id>-*/<scenario>/  the workspace (plugin/ workspace/ agent/)

Each rule and the run folder in full: docs/run.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from ci_evals import __version__
from ci_evals.agents import (
    STDERR_MAX_BYTES,
    STREAM_FILE,
    Abort,
    Agent,
    Progress,
    StageOutcome,
    StageRequest,
)
from ci_evals.agents.environment import agent_environment
from ci_evals.endpoints.base import EndpointCaller, FaultReportingCaller
from ci_evals.endpoints.ledger import Metered
from ci_evals.errors import EXIT_USAGE, UserError
from ci_evals.fs import abandoned, owned
from ci_evals.fs.checkpoint import FolderCheckpoint
from ci_evals.fs.digest import file_sha256, tree_sha256
from ci_evals.fs.snapshot import (
    Snapshot,
    TooLarge,
    copy_produced,
    diff_snapshots,
    take_snapshot,
)
from ci_evals.fs.state import restore_state
from ci_evals.results.model import (
    RESULTS_FILE,
    Forwarded,
    ReplayedFrom,
    ResourceLimits,
    Resumed,
    Revision,
    RunResult,
    ScenarioResult,
    Shard,
    StageResult,
    SuiteIdentity,
    dump_results,
    file_changes,
    listed,
    record_endpoint_misses,
)
from ci_evals.results.summary import SINGLE_ARM, mean_delta, summarize_run
from ci_evals.results.verdict import stage_verdict
from ci_evals.results.writer import ResultsWriter
from ci_evals.run import adaptive
from ci_evals.run.case_context import (
    SCAFFOLD_LOG,
    Laid,
    ScaffoldFailed,
    copy_case,
    lay_history,
    record_scaffold,
    run_scaffold,
    scaffold_env,
)
from ci_evals.run.resume import Resume, require_same_units
from ci_evals.sandbox.base import ON_HOST, SandboxConfig, SandboxLost
from ci_evals.sandbox.registry import close_all, kind_of, offline
from ci_evals.suite.ablation import ARMS, Arm, stage_for_arm, unrunnable
from ci_evals.suite.load import Scenario, Stage, Suite
from ci_evals.text import one_line
from ci_evals.workspace.create import Workspace, create_workspace
from ci_evals.workspace.mocks import mock_request, record_calls

# Stages in a row ended by the model endpoint's fault before the run stops
# starting stages: one may be bad luck, three an outage.
ENDPOINT_DOWN_AFTER = 3


@dataclass(frozen=True)
class RunPlan:
    """A validated run: everything decided, nothing started."""

    suite: Suite
    from_stage: Stage
    scenarios: tuple[Scenario, ...]
    run_dir: Path
    run_id: str
    model: str | None
    environ: Mapping[str, str]  # the user's environment (only allow-listed names are used)
    # The model endpoint's variables for the agent (`OpenEndpoint.env`: the stub's
    # URL, or the forwarding proxy's URL and per-run token).
    endpoint: Mapping[str, str] = field(default_factory=dict, repr=False)
    # `OpenEndpoint.new_caller`: a caller per stage, whose unanswered requests make
    # the stage an error (the stub); None: every stage uses `endpoint`.
    new_caller: Callable[[int | None], EndpointCaller] | None = field(default=None, repr=False)
    # `OpenEndpoint.meter`: what the endpoint forwarded so far -- the run's cost
    # and budget (it includes the agent's own calls); None: the stages' costs.
    meter: Callable[[], Metered] | None = field(default=None, repr=False)
    jobs: int = 1
    keep_workspace: bool = False
    temp_root: Path | None = None  # where workspaces go; None = the system temp folder
    model_endpoint: str = "anthropic"  # recorded in results: "anthropic", "stub:PATH", "replay:..."
    # `OpenEndpoint.replayed_from`: what made a replayed recording's answers (results record it).
    replayed_from: ReplayedFrom | None = None
    sandbox: SandboxConfig = ON_HOST  # where stages, reviewers and command graders run
    repeat: int = 1  # runs per scenario, each in its own workspace and run subfolder
    pass_at_least: int | None = None  # k of `repeat` must pass (None: all)
    # Recorded in results so a later run can be compared with this one (docs/report.md).
    suite_identity: SuiteIdentity | None = None
    revision: Revision | None = None
    shard: Shard | None = None  # `run --shard I/K`: only its units run
    # `with-without`: every unit also runs without the plugin (`suite.ablation`).
    ablation: Literal["none", "with-without"] = "none"
    # `run --resume`: the run folder read back, what is kept and what runs again.
    resume: Resume | None = None

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self.suite.stages[self.from_stage.number - 1 :]

    def stages_of(self, scenario: Scenario) -> tuple[Stage, ...]:
        """What `scenario` runs: its own stage (a case unit), else the plan's stages."""
        return (scenario.stage,) if scenario.stage is not None else self.stages

    def repeats_of(self, scenario: Scenario) -> int:
        return scenario.repeat if scenario.repeat is not None else self.repeat


class RunListener:
    """What the runner reports while it works (the progress display implements it)."""

    def run_started(self, plan: RunPlan, result: RunResult) -> None: ...

    def stage_started(self, scenario: str, stage: StageResult) -> None: ...

    def stage_progress(self, scenario: str, stage: StageResult, progress: Progress) -> None: ...

    def stage_finished(self, scenario: str, stage: StageResult) -> None: ...

    def run_finished(self, plan: RunPlan, result: RunResult) -> None: ...

    def tick(self) -> None:
        """Called about once a second while the run goes on (to refresh elapsed times)."""


@dataclass(frozen=True)
class StageContext:
    """Everything about a stage that just ran, for an `after_stage` hook (grading).

    The hook may run more agents (`agent.run_stage(..., abort=abort)`, with
    `env_for(private_root)` as their environment), read `workspace.root` and
    `request.trajectory_path`, and set `result.status` (`passed`/`failed`/`error`)
    and `result.grading`. Add what its agents cost to `result.cost_usd`: the run
    budget counts stage costs. `results.json` is written after it returns.
    """

    plan: RunPlan
    scenario: Scenario
    stage: Stage
    workspace: Workspace
    stage_dir: Path
    request: StageRequest
    outcome: StageOutcome
    result: StageResult
    agent: Agent
    abort: Abort
    # What is left of the run budget once the stage's own cost is counted (None:
    # no run budget): the most the hook's agents may spend.
    budget_left: float | None = None
    # The stage's own endpoint variables (its `EndpointCaller`'s), so that what its
    # reviewers ask is counted with the stage; None: the plan's.
    endpoint: Mapping[str, str] | None = field(default=None, repr=False)
    # Every path the stage added, modified or deleted: `result.produced` may be cut
    # to its byte budget (`results.model.listed`), and a saved state that hard-linked
    # a changed file left out of it would hold the earlier stage's bytes.
    changed: frozenset[str] = frozenset()

    def env_for(self, private_root: Path) -> dict[str, str]:
        """An agent environment like the stage's, with its private folders under `private_root`."""
        endpoint = self.plan.endpoint if self.endpoint is None else self.endpoint
        return agent_environment(
            self.plan.environ,
            private_root=private_root,
            endpoint=endpoint,
            offline=offline(self.plan.sandbox),
        )


StageHook = Callable[[StageContext], Awaitable[None]]


@dataclass
class _Scenario:
    """One scenario's live state."""

    scenario: Scenario
    result: ScenarioResult
    parent: Path
    folder: str  # under the run folder: "<id>", or "<id>/r<i>" with repeats
    label: str  # for progress lines: "<id>", or "<id>#<i>" with repeats
    place: int  # the unit's place in the whole plan, the same in every shard
    workspace: Workspace | None = None
    last: Snapshot | None = None
    plugin_last: Snapshot | None = None  # the plugin copy as the last stage left it
    stage_results: dict[int, StageResult] = field(default_factory=dict)
    # Its arm under `ablation: with-without` (None: a run of one arm), and, in the
    # without-arm, the stages that cannot run without the plugin, with why.
    arm: Arm | None = None
    unrunnable: dict[int, str] = field(default_factory=dict)
    # `run --resume`: its stages kept from the earlier session (not run again), and
    # the saved state the first stage run again starts from (None: its fixtures).
    kept: frozenset[int] = frozenset()
    kept_state: Path | None = None


class Runner:
    """Execute a `RunPlan` with an agent backend; `run()` returns the final `RunResult`."""

    def __init__(
        self,
        plan: RunPlan,
        agent: Agent,
        listener: RunListener | None = None,
        after_stage: StageHook | None = None,
    ) -> None:
        self.plan = plan
        self.agent = agent
        self.listener = listener or RunListener()
        self.after_stage = after_stage
        self.abort = Abort()
        self.interrupted = False
        # Stages in a row the model endpoint failed; at ENDPOINT_DOWN_AFTER no
        # further stage starts (`endpoint_down` says why, once, on the console).
        self._endpoint_failures = 0
        self.endpoint_down: str | None = None
        # Why results.json could not be written (the disk under --out is full): no
        # further stage starts, and the run ends in that one line (exit 2).
        self.disk_full: str | None = None
        self.writer = ResultsWriter(plan.run_dir)
        self.result = RunResult(
            run_id=plan.run_id,
            tool_version=__version__,
            started_at=datetime.now(timezone.utc),
            model=plan.model,
            model_endpoint=plan.model_endpoint,
            replayed_from=plan.replayed_from,
            sandbox=plan.sandbox.kind,
            isolated=kind_of(plan.sandbox).isolated,
            network=plan.sandbox.options.network,
            resource_limits=_resource_limits(plan.sandbox),
            from_stage=plan.from_stage.number,
            suite_file=str(plan.suite.file),
            suite=plan.suite_identity,
            revision=plan.revision,
            suite_sha256=file_sha256(plan.suite.file),
            plugin_sha256=tree_sha256(plan.suite.plugin.path, plan.suite.plugin.files),
            budget_usd=plan.suite.budget_usd,
            repeat=plan.repeat,
            pass_at_least=plan.pass_at_least,
            score_at_least=_score_at_least(plan.suite),
            gate=plan.suite.grading.gate,
            flaky_bounds=plan.suite.grading.flaky_bounds,
            shard=plan.shard,
            ablation=plan.ablation,
        )
        units = None if plan.shard is None else {(u.scenario, u.repeat) for u in plan.shard.units}
        # Workspaces live in a temp folder, not in the run folder: the run folder
        # is usually inside the user's repository, and Claude Code reads every
        # CLAUDE.md in the folders above its cwd and sees the repo in `git
        # status` -- context the agent would not have on a user's machine.
        # Resolved: a sandbox refuses mounts that pass through a link (sandbox/bwrap.py).
        # What a SIGKILLed run left there, its owner gone, goes first (`fs.abandoned`).
        temp_root = Path(plan.temp_root or tempfile.gettempdir())
        abandoned.remove(abandoned.find(temp_root))
        self.work_root = Path(
            tempfile.mkdtemp(prefix=f"{abandoned.PREFIX}{plan.run_id}-", dir=temp_root)
        ).resolve()
        abandoned.claim(self.work_root)
        self._states: list[_Scenario] = []
        # Each scenario's finished repeats, for `stop_repeats_early`.
        self._finished: dict[str, list[ScenarioResult]] = {}
        arms: tuple[Arm | None, ...] = ARMS if plan.ablation == "with-without" else (None,)
        place = -1
        for scenario in plan.scenarios:
            for repeat in range(plan.repeats_of(scenario)):
                place += 1
                if units is not None and (scenario.id, repeat) not in units:
                    continue
                for arm in arms:  # a unit's arms together: a shard holds both
                    self._add(scenario, repeat, arm, place)
        if plan.resume is not None:
            try:
                self._resume(plan.resume)
            except UserError:
                shutil.rmtree(self.work_root, ignore_errors=True)
                raise

    def _resume(self, resume: Resume) -> None:
        """The run folder's run goes on: its id, start and cost so far; each unit's
        kept stages in place (`run.resume`), the rest to run again."""
        require_same_units(resume, self.result)
        saved = resume.saved
        self.result.run_id, self.result.started_at = saved.run_id, saved.started_at
        self.result.resumed = [
            *saved.resumed,
            Resumed(
                at=datetime.now(timezone.utc),
                kept=resume.kept_count,
                rerun=resume.rerun_count,
                discarded_usd=0.0 if saved.forwarded is not None else resume.discarded_usd,
            ),
        ]
        for state, old in zip(self._states, saved.scenarios, strict=True):
            if resume.is_final(old):
                stages = [stage.model_copy(update={"resumed": "kept"}) for stage in old.stages]
            else:
                kept = resume.kept_of(old)
                stages = [stage.model_copy(update={"resumed": "kept"}) for stage in kept.stages]
                state.kept_state = kept.state
                stages += state.result.stages[len(stages) :]
            state.kept = frozenset(stage.number for stage in stages if stage.resumed == "kept")
            state.result.stages = stages
            state.stage_results = {stage.number: stage for stage in stages}

    def _add(self, scenario: Scenario, repeat: int, arm: Arm | None, place: int) -> None:
        """A unit's arm as a scenario of the run; `place`: the unit's in the plan (the
        stub's variants are picked by it, so a shard answers as the whole run does)."""
        plan = self.plan
        stages = [
            StageResult(number=s.number, name=s.name, graded=not s.grading.empty)
            for s in plan.stages_of(scenario)
        ]
        scenario_result = ScenarioResult(
            id=scenario.id,
            inputs=dict(scenario.inputs),
            repeat=repeat,
            repeats=plan.repeats_of(scenario),
            unit="case" if scenario.stage is not None else "scenario",
            arm="without" if arm == "without" else "with",
            stages=stages,
        )
        self.result.scenarios.append(scenario_result)
        folder = self.result.folder_of(scenario_result)
        self._states.append(
            _Scenario(
                scenario=scenario,
                result=scenario_result,
                parent=self.work_root / folder,
                folder=folder,
                label=self.result.label_of(scenario_result),
                place=place,
                stage_results={r.number: r for r in stages},
                arm=arm,
                unrunnable=unrunnable(plan.stages_of(scenario)) if arm == "without" else {},
            )
        )

    # -- control --------------------------------------------------------------

    def interrupt(self) -> None:
        """End the run now: kill running stages, start nothing new. Safe to call twice."""
        self.interrupted = True
        self.abort.set()
        # Graders run in worker threads the abort does not reach: closing every
        # open sandbox ends a command grader's program (and removes its container) now.
        close_all()

    @property
    def spent_usd(self) -> float:
        """Stages and their graders' model calls (reviewers) alike; with a metering
        endpoint, the larger of what it charged and what the CLIs reported (the two
        price tables differ: for a budget, take the higher)."""
        reported = self.result.stages_cost_usd + self.result.discarded_usd
        if self.plan.meter is None:
            return reported
        return max(reported, self._metered().cost_usd)

    def _metered(self) -> Forwarded:
        """What the endpoint forwarded, in this session and (resumed) the earlier ones."""
        assert self.plan.meter is not None
        now = forwarded(self.plan.meter())
        before = self.plan.resume.saved.forwarded if self.plan.resume is not None else None
        if before is None:
            return now
        return Forwarded(
            **{name: getattr(now, name) + getattr(before, name) for name in Forwarded.model_fields}
        )

    def budget_left(self) -> float | None:
        budget = self.plan.suite.budget_usd
        return None if budget is None else budget - self.spent_usd

    # -- the run --------------------------------------------------------------------

    async def run(self) -> RunResult:
        owner = self._own_run_dir()
        try:
            return await self._run()
        finally:
            owned.release(owner)

    def _own_run_dir(self) -> int:
        """Lock the run folder, and refuse it when another run holds it or has
        written it meanwhile (both may have found it empty before either began)."""
        run_dir = self.plan.run_dir
        try:
            fd = owned.own(run_dir)
        except owned.Taken:
            raise UserError(
                f"{run_dir} is in use by another ci-evals run", field="--out",
                hint="wait for it, or choose another folder",
            ) from None  # fmt: skip
        except OSError as exc:
            raise UserError(f"{run_dir}: cannot make the run folder: {exc.strerror}") from None
        if self.plan.resume is not None:
            if file_sha256(run_dir / RESULTS_FILE) != self.plan.resume.digest:
                owned.release(fd)
                raise UserError(
                    f"{run_dir / RESULTS_FILE} changed since it was read", field="--resume",
                    hint="resume it again",
                )  # fmt: skip
            return fd
        if (run_dir / RESULTS_FILE).exists():
            owned.release(fd)
            raise UserError(
                f"{run_dir} already holds a run", field="--out", hint="choose an empty folder"
            )
        return fd

    async def _run(self) -> RunResult:
        self._write(now=True)
        self.listener.run_started(self.plan, self.result)
        semaphore = asyncio.Semaphore(max(1, self.plan.jobs))

        async def one(state: _Scenario) -> None:
            async with semaphore:
                if self._verdict_decided(state):
                    self._stop_repeat(state)
                    return
                await self._run_scenario(state)
                self._finished.setdefault(state.scenario.id, []).append(state.result)

        ticker = asyncio.create_task(self._tick())
        try:
            await asyncio.gather(*(one(state) for state in self._states))
        finally:
            ticker.cancel()
            self.result.status = "interrupted" if self.interrupted else "completed"
            self.result.finished_at = datetime.now(timezone.utc)
            self.result.summaries = summarize_run(self.result, self.plan.pass_at_least)
            self.result.mean_delta = mean_delta(self.result.summaries)
            self._finish_workspaces()
            self._write(now=True)
        self.listener.run_finished(self.plan, self.result)
        if self.disk_full is not None:
            raise UserError(self.disk_full, exit_code=EXIT_USAGE)
        return self.result

    def _early_stopping(self) -> bool:
        """`stop_repeats_early` applies: a k-of-K rule on counts alone (see `adaptive`)."""
        plan = self.plan
        return (
            plan.suite.grading.stop_repeats_early
            and plan.ablation != "with-without"
            and plan.shard is None
            and self.result.score_at_least is None
        )

    def _verdict_decided(self, state: _Scenario) -> bool:
        """Every stage of `state`'s scenario has a k-of-K verdict its finished repeats settle."""
        finished = self._finished.get(state.scenario.id, [])
        if not finished or not self._early_stopping():
            return False
        per_stage = [
            [
                stage_verdict(s, after_agent=s.number > self.result.from_stage).verdict
                for run in finished
                for s in run.stages
                if s.number == number
            ]
            for number in state.stage_results
        ]
        total = self.plan.repeats_of(state.scenario)
        return adaptive.scenario_decided(per_stage, total, self.plan.pass_at_least)

    def _stop_repeat(self, state: _Scenario) -> None:
        """Leave out a repeat whose scenario's verdict is decided: it never starts."""
        self.result.scenarios.remove(state.result)
        sid = state.scenario.id
        self.result.repeats_stopped[sid] = self.result.repeats_stopped.get(sid, 0) + 1

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.listener.tick()
            self._write(due=True)

    async def _run_scenario(self, state: _Scenario) -> None:
        stopped: str | None = None  # why the remaining stages are skipped
        if self.plan.resume is not None:
            await asyncio.to_thread(self._discard, state)
        for stage in self.plan.stages_of(state.scenario):
            if stage.number in state.kept:  # passed in an earlier session, evidence verified
                continue
            stage_result = state.stage_results[stage.number]
            single = state.unrunnable.get(stage.number)
            if single is not None:  # recorded as such: the summary says single-arm, and why
                self._skip(stage_result, SINGLE_ARM + single)
                stopped = stopped or "single-arm"
                continue
            stopped = stopped or self._stop_reason()
            if stopped:
                self._skip(stage_result, stopped)
                continue
            try:
                await self._run_stage(state, stage, stage_result)
            except Exception as exc:  # a bug or an OS failure: this scenario errs, others go on
                stage_result.status = "error"
                stage_result.error = _own_failure(exc)
                self._write()
                self.listener.stage_finished(state.label, stage_result)
            if stage_result.status not in ("completed", "passed"):
                stopped = f"stage {stage.number} ({stage.name}) ended with {stage_result.status}"

    def _discard(self, state: _Scenario) -> None:
        """`run --resume`: the folders of the stages that run again, as the earlier
        attempt left them (a stale saved state, scorecard or trajectory), removed."""
        for stage in self.plan.stages_of(state.scenario):
            if stage.number in state.kept:
                continue
            old = self.plan.run_dir / state.folder / f"{stage.number}-{stage.name}"
            if old.is_symlink():
                old.unlink()
            elif old.exists():
                shutil.rmtree(old)

    def _stop_reason(self) -> str | None:
        if self.interrupted:
            return "the run was interrupted"
        if self.endpoint_down is not None:
            return self.endpoint_down
        if self.disk_full is not None:
            return self.disk_full
        left = self.budget_left()
        if left is not None and left <= 0:
            return f"the run budget ({self.plan.suite.budget_usd} USD) is spent"
        return None

    def _count_endpoint_failure(self, outcome: StageOutcome) -> StageOutcome:
        """After ENDPOINT_DOWN_AFTER stages in a row ended by the endpoint's fault
        (each already retried as far as `agents.retry` goes), start no more: every
        one would wait out the same outage. Any stage it served resets the count."""
        if outcome.endpoint_fault is None:
            if outcome.status != "interrupted":
                self._endpoint_failures = 0
            return outcome
        self._endpoint_failures += 1
        if self._endpoint_failures >= ENDPOINT_DOWN_AFTER and self.endpoint_down is None:
            self.endpoint_down = (
                f"the model endpoint is down: {self._endpoint_failures} stages in a row "
                f"failed on it, the last with: {outcome.endpoint_fault}"
            )
            print(f"ci-evals: {self.endpoint_down}; no further stage starts", file=sys.stderr)
        return outcome

    def _skip(self, stage_result: StageResult, reason: str) -> None:
        stage_result.status = "skipped"
        stage_result.error = reason
        self._write()

    async def _run_stage(self, state: _Scenario, stage: Stage, stage_result: StageResult) -> None:
        plan = self.plan
        workspace = await self._workspace(state)
        without = state.arm == "without"
        stage_dir = plan.run_dir / state.folder / f"{stage.number}-{stage.name}"
        stage_dir.mkdir(parents=True, exist_ok=True)
        caller = plan.new_caller(state.place) if plan.new_caller is not None else None
        endpoint = plan.endpoint if caller is None else caller.env
        env = {
            **agent_environment(
                plan.environ,
                private_root=state.parent / "agent",
                endpoint=endpoint,
                offline=offline(plan.sandbox),
            ),
            **stage.env,  # a case's EVAL_* variables
        }
        laid = await self._lay_context(state, stage, stage_result, stage_dir, env)
        if laid is None:  # its scaffold failed: the stage's error says how
            return
        # A case unit's mocks are served in its sandbox (workspace.mocks).
        request = mock_request(
            StageRequest(
                prompt=workspace.prompt_for(plan.suite, stage, state.scenario, without=without),
                cwd=workspace.cwd_for(plan.suite, stage, state.scenario),
                # The without-arm's agent is given no plugin: not loaded, not mounted.
                plugin_dir=None if without else workspace.plugin,
                env=env,
                trajectory_path=stage_dir / "trajectory.jsonl",
                stderr_path=stage_dir / "stderr.log",
                # A case unit's `trace` is the CLI's own lines (grading.kinds.plugin_eval).
                stream_path=stage_dir / STREAM_FILE if state.scenario.stage is not None else None,
                stderr_max_bytes=min(STDERR_MAX_BYTES, stage.limits.max_output_bytes),
                model=stage.model or plan.model,
                max_turns=stage.limits.max_turns,
                timeout_s=stage.limits.timeout_s,
                max_budget_usd=_stage_budget(stage.limits.max_budget_usd, self.budget_left()),
                max_output_bytes=stage.limits.max_output_bytes,
                # A retried attempt starts from the files this one starts from.
                sandbox=plan.sandbox,
                writable=(workspace.root, state.parent / "agent"),
                readonly=laid.readonly,
                resume=laid.resume,
                options=plan.suite.agent.options,
                tools=stage.tools,
                checkpoint=FolderCheckpoint(
                    (workspace.root, workspace.plugin), state.parent / f"checkpoint-{stage.number}"
                ),
                endpoint_fault=caller.fault if isinstance(caller, FaultReportingCaller) else None,
            ),
            workspace.mocks,
            stage_dir,
        )
        before = await asyncio.to_thread(_before, workspace, state, stage, stage_dir)
        if self.interrupted:  # while the workspace was being laid down
            self._skip(stage_result, "the run was interrupted")
            return
        self._started(state, stage_result, request)
        started = time.monotonic()

        def on_progress(progress: Progress) -> None:
            stage_result.turns = progress.turns
            self.listener.stage_progress(state.label, stage_result, progress)

        # Infrastructure errors are retried by the agent wrapper (ci_evals.agents.retry), not here.
        outcome = self._count_endpoint_failure(
            await self.agent.run_stage(request, abort=self.abort, on_progress=on_progress)
        )
        snapshots = await _after_snapshot(workspace, before, stage, outcome, state, stage_dir)
        if isinstance(snapshots, str):
            # Nothing of it is hashed, copied, listed or graded: the stage hit the
            # output limit, while it ran or after; its error is the only summary.
            _fill(stage_result, outcome, time.monotonic() - started)
            stage_result.status, stage_result.limit_hit = "limit", "output"
            stage_result.error = snapshots
            _record_misses(stage_result, caller)
            self._write()
            self.listener.stage_finished(state.label, stage_result)
            return
        after, plugin_after = snapshots
        changes = diff_snapshots(before, after)
        produced_dir = stage_dir / "produced"
        await asyncio.to_thread(copy_produced, changes, workspace.root, produced_dir)
        state.last = after
        await asyncio.to_thread(
            _record_plugin_changes, workspace, state, plugin_after, stage_dir, stage_result
        )
        _fill(stage_result, outcome, time.monotonic() - started)
        _hint_git(stage_result, state.scenario)
        stage_result.produced, stage_result.produced_omitted = listed(file_changes(changes.all))
        stage_result.produced_dir = _relative(produced_dir, plan.run_dir)
        if self.after_stage is not None and not self.abort.is_set:
            # The agent's end is recorded before the graders run (a reviewer may take
            # minutes): killed meanwhile, results.json says `completed` and ungraded,
            # which --resume runs again. Before, it said so only if a deferred write
            # happened to fall due while grading.
            self._write()
            graded = stage_for_arm(stage, state.arm)  # a case's with-only rule
            context = StageContext(
                plan, state.scenario, graded, workspace, stage_dir, request, outcome,
                stage_result, self.agent, self.abort, self.budget_left(), endpoint,
                frozenset(change.path for change in changes.all),
            )  # fmt: skip
            await self.after_stage(context)
        _never_graded(stage_result, interrupted=self.abort.is_set)
        _record_misses(stage_result, caller)
        self._write()
        self.listener.stage_finished(state.label, stage_result)

    async def _workspace(self, state: _Scenario) -> Workspace:
        """The scenario's workspace, made before its first stage: in the without-arm
        with the plugin copy for the graders, but none offered to the agent."""
        if state.workspace is None:
            workspace = await asyncio.to_thread(
                create_workspace,
                self.plan.suite,
                self.plan.from_stage,
                state.parent,
                state.scenario,
                run_dir=self.plan.run_dir,
                offered=state.arm != "without",
            )
            if state.kept_state is not None:  # resumed: as its last kept stage left it
                await asyncio.to_thread(
                    restore_state, state.kept_state, workspace.root, keep=workspace.unrecorded
                )
            state.workspace = workspace
        return state.workspace

    def _started(self, state: _Scenario, stage_result: StageResult, request: StageRequest) -> None:
        stage_result.status = "running"
        stage_result.started_at = datetime.now(timezone.utc)
        if self.plan.resume is not None:
            stage_result.resumed = "rerun"
        stage_result.trajectory = _relative(request.trajectory_path, self.plan.run_dir)
        stage_result.stderr = _relative(request.stderr_path, self.plan.run_dir)
        self._write()
        self.listener.stage_started(state.label, stage_result)

    async def _lay_context(
        self,
        state: _Scenario,
        stage: Stage,
        stage_result: StageResult,
        stage_dir: Path,
        env: Mapping[str, str],
    ) -> Laid | None:
        """A case's scaffold, history and add_dirs laid out (`case_context`); None
        when its scaffold failed, the stage then an `error` naming it."""
        if stage.context is None:
            return Laid()
        assert state.workspace is not None
        try:
            return await asyncio.to_thread(
                _lay_context, self.plan, stage, state.parent, state.workspace, stage_dir, env
            )
        except ScaffoldFailed as exc:
            if self.interrupted:  # its sandbox was closed under it
                self._skip(stage_result, "the run was interrupted")
                return None
            stage_result.status, stage_result.error = "error", str(exc)
            stage_result.model_ran = False
            self._write()
            self.listener.stage_finished(state.label, stage_result)
            return None

    # -- bookkeeping ----------------------------------------------------------------

    def _write(self, *, now: bool = False, due: bool = False) -> None:
        """Record the run in results.json: `now`, or at the writer's pace (`due`: only
        what is pending, once its interval passed; `results.writer`)."""
        # The run's cost: what the endpoint forwarded when it meters, else the stages'.
        if self.plan.meter is not None:
            self.result.forwarded = self._metered()
            self.result.total_cost_usd = self.result.forwarded.cost_usd
        else:
            self.result.total_cost_usd = self.result.stages_cost_usd + self.result.discarded_usd
        try:
            if due:
                self.writer.flush_due(self.result)
            else:
                self.writer.write(self.result, now=now)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # The last results written stay (the write is atomic): a partial record.
            self.disk_full = (
                f"{self.plan.run_dir}: no space left to write {RESULTS_FILE} "
                f"({len(dump_results(self.result)):,} bytes): free space there, or choose "
                "another --out; the results written before are kept"
            )

    def endpoint_closed(self) -> None:
        """Write results again once the endpoint has stopped: a request still in
        flight at the run's end (a survivor's, or a reviewer's) is settled only then."""
        self._write(now=True)

    def _finish_workspaces(self) -> None:
        for state in self._states:
            if self.plan.keep_workspace and state.workspace is not None:
                state.result.workspace = str(state.workspace.parent)
        if not self.plan.keep_workspace:
            shutil.rmtree(self.work_root, ignore_errors=True)


def _before(workspace: Workspace, state: _Scenario, stage: Stage, stage_dir: Path) -> Snapshot:
    """The workspace as the stage starts on it; with a case's scaffold, what it left
    recorded beside the stage: no file the stage created (`case_context`)."""
    before = take_snapshot(workspace.root, previous=state.last, exclude=workspace.unrecorded)
    if stage.context is not None and stage.context.scaffold_script is not None:
        record_scaffold(stage_dir, list(before.entries))
    return before


async def _after_snapshot(  # noqa: PLR0917 - one private call site
    workspace: Workspace,
    before: Snapshot,
    stage: Stage,
    outcome: StageOutcome,
    state: _Scenario,
    stage_dir: Path,
) -> tuple[Snapshot, Snapshot | None] | str:
    """The workspace and the plugin copy as the stage left them, or why nothing of
    them may be read: their folders grew past the output limit while it ran, or
    either holds more bytes or entries than the stage's limits now. A case unit's
    mock calls are read back and saved beside the stage first (`workspace.mocks`)."""
    if workspace.mocks is not None:
        await asyncio.to_thread(record_calls, workspace.mocks, stage_dir)
    if outcome.status == "limit" and outcome.limit == "output":
        return outcome.error or "limit: output"
    plugin = await asyncio.to_thread(_plugin_snapshot, workspace, state, stage)
    if isinstance(plugin, str):
        return plugin
    try:
        after = await asyncio.to_thread(
            take_snapshot,
            workspace.root,
            previous=before,
            max_bytes=stage.limits.max_output_bytes,
            max_files=stage.limits.max_output_files,
            exclude=workspace.unrecorded,
        )
    except TooLarge as exc:  # bytes, or entries (`TooMany`)
        return str(exc)
    return after, plugin


def _plugin_snapshot(workspace: Workspace, state: _Scenario, stage: Stage) -> Snapshot | str | None:
    """The plugin copy as the stage left it, under the stage's output limits; or why
    nothing of it may be read (over them); None without a baseline to compare."""
    previous = state.plugin_last if state.plugin_last is not None else workspace.plugin_baseline
    if previous is None:
        return None
    try:
        return workspace.plugin_snapshot(
            previous,
            max_bytes=stage.limits.max_output_bytes,
            max_files=stage.limits.max_output_files,
        )
    except TooLarge as exc:
        return f"the plugin copy: {exc}".replace("the workspace holds", "it holds")


def _record_plugin_changes(
    workspace: Workspace,
    state: _Scenario,
    now: Snapshot | None,
    stage_dir: Path,
    stage_result: StageResult,
) -> None:
    """Record what this stage changed in the plugin copy (`plugin_changes`, and
    `plugin-changes.json` in its folder).

    The agent can write into the copy: through the component links (superpowers'
    `docs/` is one, where its skills write plans) or by its path. Those files
    are in no saved state, so no grader sees them, and later stages and
    reviewers load the changed plugin. Nothing in the repository is affected,
    but the stage's reason and its page say so.
    """
    previous = state.plugin_last if state.plugin_last is not None else workspace.plugin_baseline
    if previous is None or now is None:  # no baseline (`_plugin_snapshot`)
        return
    state.plugin_last = now
    changes = file_changes(diff_snapshots(previous, now).all)
    if not changes:
        return
    stage_result.plugin_changes, stage_result.plugin_changes_omitted = listed(changes)
    records = [change.model_dump() for change in changes]
    (stage_dir / "plugin-changes.json").write_text(json.dumps(records, indent=2) + "\n")


def _lay_context(  # noqa: PLR0917 - one private call site
    plan: RunPlan,
    stage: Stage,
    parent: Path,
    workspace: Workspace,
    stage_dir: Path,
    env: Mapping[str, str],
) -> Laid:
    """A case's context laid out (`case_context`): its folder copied, its scaffold
    run in the sandbox, its history copied; `ScaffoldFailed` when the scaffold fails."""
    context = stage.context
    assert context is not None
    case = copy_case(context, parent, within=plan.suite.link_root)
    private = parent / "agent"
    # The history is laid before the scaffold runs: the scaffold may write the private
    # folder, and a link or fifo it planted there would be followed by the host's write.
    resume = None
    if context.history_file is not None:
        resume = lay_history(context.history_file, case, private)
    if context.scaffold_script is not None:
        run_scaffold(
            context.scaffold_script,
            case,
            workspace=workspace.root,
            private_root=private,
            env=scaffold_env(env),
            sandbox=plan.sandbox,
            log=stage_dir / SCAFFOLD_LOG,
            max_output_bytes=stage.limits.max_output_bytes,
        )
    return Laid(tuple(case / rel for rel in context.add_dirs), resume)


def _stage_budget(stage_cap: float | None, left: float | None) -> float | None:
    caps = [cap for cap in (stage_cap, left) if cap is not None]
    return max(min(caps), 0.0) if caps else None


def _own_failure(exc: Exception) -> str:
    """One line for an error ci-evals raised during a stage (an OS error names its
    file once, not a blob of every path it was copying)."""
    if isinstance(exc, SandboxLost):  # already the one line naming the engine or the OOM kill
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return one_line(f"ci-evals failed: {exc.strerror}{where}", 500, ellipsis="…")
    return one_line(f"ci-evals failed: {type(exc).__name__}: {exc}", 500, ellipsis="…")


def _fill(stage_result: StageResult, outcome: StageOutcome, wall_s: float) -> None:
    status = outcome.status
    stage_result.status = "error" if status == "interrupted" else status
    stage_result.limit_hit = outcome.limit
    stage_result.error = outcome.error
    stage_result.duration_s = round(wall_s, 3)
    stage_result.duration_api_ms = outcome.duration_api_ms
    stage_result.turns = outcome.turns
    stage_result.input_tokens = outcome.usage.input_tokens
    stage_result.output_tokens = outcome.usage.output_tokens
    stage_result.cost_usd = outcome.cost_usd
    stage_result.session_id = outcome.session_id
    stage_result.attempts = outcome.attempts
    stage_result.model_ran = outcome.model_ran


def _hint_git(stage_result: StageResult, scenario: Scenario) -> None:
    """A stage that never reached the model because a command's `!`git ...``
    found no repository: say how to give it one."""
    error = stage_result.error or ""
    if not stage_result.model_ran and not scenario.git and "not a git repository" in error.lower():
        stage_result.error = (
            f"{error} (the workspace is no git repository: `git: true` on scenario "
            f"{scenario.id!r} makes it one, docs/suite.md)"
        )


def _never_graded(stage_result: StageResult, *, interrupted: bool) -> None:
    """A stage with graders that the agent finished but nothing graded (interrupted
    before grading, or no grading hook) becomes an `error`: left `completed` it
    would read as a pass."""
    if stage_result.status == "completed" and stage_result.graded:
        stage_result.status = "error"
        why = "the run was interrupted before grading" if interrupted else "no grader ran"
        stage_result.error = f"not graded: {why}"


def forwarded(metered: Metered) -> Forwarded:
    """The results record of what a metering endpoint forwarded."""
    usage = metered.usage
    return Forwarded(
        requests=metered.requests,
        refused=metered.refused,
        cost_usd=metered.cost_usd,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
    )


def _score_at_least(suite: Suite) -> float | None:
    """A run of cases with a threshold below 1.0: its summaries' mean-score rule."""
    evals = suite.plugin_evals
    return None if evals is None or evals.threshold >= 1.0 else evals.threshold


def _record_misses(stage_result: StageResult, caller: EndpointCaller | None) -> None:
    if caller is not None:
        record_endpoint_misses(stage_result, caller.misses())


def _relative(path: Path, run_dir: Path) -> str:
    with contextlib.suppress(ValueError):
        return path.relative_to(run_dir).as_posix()
    return str(path)


def _resource_limits(sandbox: SandboxConfig) -> ResourceLimits:
    held = kind_of(sandbox).limits()
    return ResourceLimits(
        mechanism=held.mechanism,
        pids=held.pids,
        memory_bytes=held.memory_bytes,
        address_space_bytes=held.address_space_bytes,
        seccomp=held.seccomp,
    )
