"""One suite's run (`ci-evals run`), and what `run --tasks` shares: check, build, execute.

`prepare` makes every check `run` makes before anything starts (`ci-evals
check` collects them); `build` gives the run its id, folder and a ready
sandbox; `execute` runs it under SIGINT/SIGTERM handlers, grading every stage
that completes, and prints its summary. `run` is the three in a row.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ci_evals import git
from ci_evals.agents import StageOutcome, StageRequest
from ci_evals.agents.registry import build_agent
from ci_evals.endpoints.base import Endpoint, EndpointOptions
from ci_evals.endpoints.registry import endpoint_for
from ci_evals.endpoints.replay import PREFIX as REPLAY_PREFIX
from ci_evals.errors import EXIT_INTERRUPTED, EXIT_OK, Problems, UserError
from ci_evals.fs import upload
from ci_evals.results.model import RunResult, Shard, read_results
from ci_evals.results.summary import exit_code, repeat_table
from ci_evals.run import (
    isolation,
    provenance,
    regrade_base,
    resume,
    score_change,
    shard,
    shard_mac,
)
from ci_evals.run.grading_hook import GradingHook
from ci_evals.run.process_environment import RunEnvironment
from ci_evals.run.progress import make_progress, summary_table, verdict_line
from ci_evals.run.runner import Runner, RunPlan
from ci_evals.sandbox.base import SandboxConfig
from ci_evals.sandbox.registry import HOST
from ci_evals.selection import diff as diff_range
from ci_evals.selection.decide import Selection
from ci_evals.selection.grader_change import with_regrade
from ci_evals.selection.stage_map import load_stage_map
from ci_evals.selection.units import Units, select_units, with_units
from ci_evals.suite.ablation import unrunnable
from ci_evals.suite.load import Scenario, Stage, Suite, find_suite, load_suite
from ci_evals.suite.tool_grant import split_entries
from ci_evals.workspace.create import check_fixtures

if TYPE_CHECKING:
    from ci_evals.run.grade import Inconsistencies

RUNS_DIR = Path(".ci-evals") / "runs"
RECORD_FILE = "model-exchanges.jsonl"


@dataclass(frozen=True)
class Prepared:
    """A run checked before anything starts (`prepare`)."""

    suite: Suite
    from_stage: Stage | None  # None: --base found nothing to run (or it could not be known)
    selection: Selection | None  # with --base: what compute-stage decided
    scenarios: tuple[Scenario, ...]
    endpoint: Endpoint | None  # None only when collecting: it could not be made
    sandbox: SandboxConfig
    repeat: int
    pass_at_least: int | None
    shard: Shard | None = None  # `--shard I/K`: only these units


# Told the finished run: its results, folder and exit code (`run --json`).
OnResult = Callable[[RunResult, Path, int], None]


def run(
    args: argparse.Namespace,
    started: RunEnvironment,
    on_result: OnResult | None = None,
    problems: resume.Problems | None = None,
    inconsistencies: Inconsistencies | None = None,
) -> int:
    """`ci-evals run` on one suite (`commands/run.py`): checked first (raising at the
    first problem), then run; its exit code. `started`: the environment the command
    took (`process_environment.take`, the shard key already out of the process's).
    `on_result` is told the run's outcome (not called when there was nothing to run).
    `problems`: how a saved run disagrees with itself or its folder (`run --resume`
    keeps nothing then). `inconsistencies`: the report's check of a results file, for
    a re-grade of `--base-run` when only graders changed."""
    environ, key = started.variables, started.shard_key
    resumed = None
    if getattr(args, "resume", None) is not None:
        assert problems is not None
        resumed = resume.read(args.resume, problems)
        args = resume.arguments(args, resumed.saved, resumed.run_dir)
    ready = prepare(args, environ, Problems())  # raises at the first problem
    assert ready is not None and ready.endpoint is not None
    endpoint = ready.endpoint
    if ready.from_stage is None:
        return EXIT_OK
    if resumed is not None:
        head = provenance.revision(ready.suite)
        resume.require_same_suite(resumed.saved, ready.suite, head.commit if head else None)
        resumed = resume.without_git_history(resumed, ready.suite)
        ready = replace(ready, shard=resumed.saved.shard)
        print(
            f"ci-evals: resuming {resumed.saved.run_id}: {resumed.kept_count} stage(s) kept, "
            f"{resumed.rerun_count} to run again",
            file=sys.stderr,
        )
    elif ready.selection is not None and ready.selection.regrade and inconsistencies is not None:
        out = (args.out or RUNS_DIR / new_run_id()).resolve()
        code = regrade_base.regrade(
            args,
            ready.selection,
            scenarios=ready.scenarios,
            suite_file=ready.suite.file,
            out=out,
            environ=shard_mac.without_key(environ),
            inconsistencies=inconsistencies,
        )
        if code is not None:
            if on_result is not None and (out / "results.json").is_file():
                on_result(read_results(out), out, code)
            return code
    plan = build(ready, args, environ, resumed=resumed)
    _say_single_arm(plan)
    with upload.sealed(plan.run_dir, "the run folder"):  # before it is signed
        code = execute(plan, endpoint, record=args.record, verbosity=getattr(args, "verbosity", 0))
    if key is not None and (args.shard or (resumed is not None and resumed.saved.shard)):
        shard_mac.sign(plan.run_dir, key)
    if on_result is not None:
        on_result(read_results(plan.run_dir), plan.run_dir, code)
    return code


def _say_single_arm(plan: RunPlan) -> None:
    """Under ablation, each stage that cannot run without the plugin, said before the
    run (results.json and every report say it again)."""
    if plan.ablation != "with-without":
        return
    for number, why in sorted(unrunnable(plan.stages).items()):
        stage = plan.suite.stages[number - 1]
        print(
            f"ci-evals: stage {number} ({stage.name}) runs only with the plugin: {why}",
            file=sys.stderr,
        )


def prepare(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    problems: Problems,
    *,
    suite: Suite | None = None,
) -> Prepared | None:
    """Everything `run` validates before it starts, in its order: the suite (with its
    stage map, slash commands, reviewer agents and rubrics), the stage, the
    scenarios and their fixtures, the model endpoint (a stub script is loaded),
    the sandbox, the repeats.

    `suite`: that one instead of `--suite`'s. Each mistake goes to `problems`:
    `run` raises at the first; `ci-evals check` collects them all, going on
    wherever a later check does not depend on a failed one (None: the suite did
    not load; the endpoint is still checked).
    """
    if suite is None:  # else a suite loaded already (`run --tasks`, a configuration of it)
        with _checking(problems):
            path = args.suite or find_suite(Path.cwd())
            suite = load_suite(path, problems=problems, allow_tools=allow_tools(args))
    if suite is None:
        with _checking(problems):
            endpoint_for(args.model).check(environ, "ci-evals run")
        return None
    if suite.plugin_evals is not None:  # what the CLI says of the grant before it runs
        for note in suite.plugin_evals.grant_notes:
            print(f"ci-evals: warning: {note}", file=sys.stderr)
    start = Start(None)
    with _checking(problems):
        start = from_stage_of(suite, args)
    from_stage, selection = start.stage, start.selection
    scenarios: tuple[Scenario, ...] = suite.scenarios
    with _checking(problems):
        scenarios = scenarios_for(suite, args, start)
    if not scenarios and (args.base is not None or getattr(args, "units", None) is not None):
        from_stage = None  # the change selects no unit of this run
    if from_stage is not None:
        for scenario in scenarios:
            with _checking(problems):
                check_fixtures(suite, from_stage, scenario)
    endpoint = None
    with _checking(problems):
        endpoint = endpoint_for(args.model)
        endpoint.check(environ, "ci-evals run")
        refuse_recording_a_replay(args, endpoint.name)
    sandbox = SandboxConfig(HOST)
    with _checking(problems):
        sandbox = isolation.choose(args, suite, environ, needed=True)
    repeat = args.repeat or suite.grading.repeat
    if args.repeat:  # --repeat overrides a case's runs, as the CLI's --runs does
        scenarios = tuple(replace(s, repeat=None) for s in scenarios)
    pass_at_least = suite.grading.pass_at_least
    if pass_at_least is not None and pass_at_least > repeat:
        problems.report(
            UserError(
                f"pass_at_least is {pass_at_least} but --repeat is {repeat}",
                file=suite.display,
                field="pass_at_least",
                hint="raise --repeat, or lower pass_at_least",
            )
        )
    chosen: Shard | None = None
    if getattr(args, "shard", None) and from_stage is not None:
        with _checking(problems):
            chosen = _shard(args, suite, from_stage, scenarios, repeat)
    return Prepared(
        shard=chosen,
        suite=suite,
        from_stage=from_stage,
        selection=selection,
        scenarios=scenarios,
        endpoint=endpoint,
        sandbox=sandbox,
        repeat=repeat,
        pass_at_least=pass_at_least,
    )


def refuse_recording_a_replay(args: argparse.Namespace, endpoint: str) -> None:
    """`--record` with `--model replay:...`: one line, before anything starts.

    A replay asks no model: recording it would copy part of the recording
    again, with the `replay: ...` answers of any divergence taken for a
    model's, and a replay of that copy would then "pass" where this one diverged.
    """
    if getattr(args, "record", False) and endpoint.startswith(REPLAY_PREFIX):
        raise UserError(
            "nothing to record: --model replay: asks no model, it serves recorded answers",
            field="--record",
            hint="record with the real model or stub:PATH, or replay without --record",
        )


def _shard(
    args: argparse.Namespace,
    suite: Suite,
    from_stage: Stage,
    scenarios: tuple[Scenario, ...],
    repeat: int,
) -> Shard:
    """`--shard I/K`: the units `ci-evals plan` gave shard I (the same inputs, the same split)."""
    index, count = shard.parse_spec(args.shard)
    durations = shard.read_durations(args.durations)
    assignment = shard.suite_assignment(
        suite, from_stage, scenarios, repeat, count=count, durations=durations
    )
    return shard.shard_of(assignment, index, count, budget_usd=suite.budget_usd)


@contextmanager
def _checking(problems: Problems) -> Iterator[None]:
    """One check: its `UserError` goes to `problems` (raised again unless collecting)."""
    try:
        yield
    except UserError as exc:
        problems.report(exc)


def build(
    ready: Prepared,
    args: argparse.Namespace,
    environ: Mapping[str, str],
    *,
    resumed: resume.Resume | None = None,
) -> RunPlan:
    """The run of a prepared suite: its id and folder (`--out`, or `run_dir`), its sandbox
    ready (a docker image built at its first use); `resumed`: the run folder's run."""
    assert ready.from_stage is not None and ready.endpoint is not None
    run_id = new_run_id()
    if resumed is not None:
        run_id = resumed.saved.run_id
    run_dir = (args.out or RUNS_DIR / run_id).resolve()
    if resumed is None and (run_dir / "results.json").exists():
        raise UserError(
            f"{run_dir} already holds a run", field="--out", hint="choose an empty folder"
        )
    environ = shard_mac.without_key(environ)  # what the run hands on never holds it
    sandbox = isolation.prepare(ready.sandbox, environ, run_id)  # may build the image
    return RunPlan(
        suite=_shard_concurrency(_shard_budget(ready.suite, ready.shard), ready.shard),
        from_stage=ready.from_stage,
        scenarios=ready.scenarios,
        run_dir=run_dir,
        run_id=run_id,
        model=ready.suite.model,
        environ=environ,
        jobs=args.jobs,
        keep_workspace=args.keep_workspace,
        model_endpoint=ready.endpoint.name,
        sandbox=sandbox,
        repeat=ready.repeat,
        pass_at_least=ready.pass_at_least,
        suite_identity=provenance.suite_identity(ready.suite),
        revision=provenance.revision(ready.suite, ready.selection),
        shard=ready.shard,
        ablation=getattr(args, "ablation", None) or ready.suite.ablation,
        resume=resumed,
    )


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _shard_budget(suite: Suite, chosen: Shard | None) -> Suite:
    """A shard spends its part of the run's budget (`shard.budget_share`), said on stderr."""
    if chosen is None or chosen.run_budget_usd is None or chosen.budget_usd is None:
        return suite
    print(
        f"ci-evals: shard {chosen.index}/{chosen.count}: budget ${chosen.budget_usd:.4f}, "
        f"its part of the run's ${chosen.run_budget_usd:.4f} by the units it runs "
        "(docs/scale-out.md)",
        file=sys.stderr,
    )
    return replace(suite, budget_usd=chosen.budget_usd)


def _shard_concurrency(suite: Suite, chosen: Shard | None) -> Suite:
    """A shard sends its part of the run's `max_concurrency` (at least 1): K runners
    share one API key's rate limit, so together they stay within it where K allows."""
    if chosen is None or suite.max_concurrency is None or chosen.count == 1:
        return suite
    part = max(1, suite.max_concurrency // chosen.count)
    print(
        f"ci-evals: shard {chosen.index}/{chosen.count}: {part} model request(s) at once, "
        f"its part of the run's max_concurrency {suite.max_concurrency} (docs/scale-out.md)",
        file=sys.stderr,
    )
    return replace(suite, max_concurrency=part)


def allow_tools(args: argparse.Namespace) -> list[str] | None:
    """`--allow-tools` (each given list split as the CLI splits it); None: not given."""
    given: list[str] | None = getattr(args, "allow_tools", None)
    if given is None:
        return None
    return [entry for text in given for entry in split_entries(text)]


def _from_a_case_stage(suite: Suite, from_stage: object) -> None:
    """`--from-stage` on a suite of cases: each case runs one stage, stage 1, from an
    empty workspace; there are no fixtures of earlier stages to start a later one
    from. Stage 1 (every case from its start) is what a run does anyway; anything
    else is refused in one line saying how to run fewer cases."""
    if from_stage is None or str(from_stage).strip() == "1":  # "1": as the action passes it
        return
    given = str(from_stage)
    named = next((s.id for s in suite.scenarios if s.stage and s.stage.name == given), None)
    hint = (
        f"to run only that case: --scenario {named}"
        if named is not None
        else "run every case from its start (no --from-stage), or some: --scenario CASE"
    )
    raise UserError(
        f"--from-stage {given}: a suite of cases (plugin_evals:) runs one stage per case, "
        "stage 1, from an empty workspace: there is no later stage to start from",
        file=suite.display,
        hint=hint,
    )


class Start(NamedTuple):
    """Where a run starts: its first stage (None: nothing to run) and, with `--base`,
    what the change selects: the stage and, for a map that selects units, the units."""

    stage: Stage | None
    selection: Selection | None = None
    units: Units | None = None


def from_stage_of(suite: Suite, args: argparse.Namespace) -> Start:
    """The first stage to run (None: nothing to run) and, with `--base`, the selection."""
    if suite.plugin_evals is not None:  # case units: each runs its own one stage
        _from_a_case_stage(suite, args.from_stage)
        first = suite.scenarios[0].stage
        assert first is not None
        if args.base is None:
            return Start(first)
    elif args.base is None:
        return Start(suite.stage(args.from_stage or 1))
    if suite.stage_map is None:
        raise UserError(
            "--base needs a stage map",
            file=suite.display,
            hint="set `stage_map:` in the suite (`ci-evals init` drafts one)",
        )
    stage_map = load_stage_map(suite.stage_map)
    selection = diff_range.compute(git.toplevel(suite.root), stage_map, args.base)
    units = select_units(stage_map, selection)
    selection = with_units(selection, units, stage_map)
    selection = with_regrade(git.toplevel(suite.root), selection, stage_map)
    if selection.from_stage is None:
        print(f"nothing to run: {selection.reason} {selection.detail}".rstrip())
        return Start(None, selection, units)
    print(f"from stage {selection.from_stage}: {selection.reason} {selection.detail}".rstrip())
    if units is not None:
        shown = "all" if units.ids is None else " ".join(units.ids)
        print(f"{units.kind}: {shown} ({units.reason}: {units.detail})")
    if selection.regrade is not None:
        print(f"regrade: {selection.regrade}")
    if suite.plugin_evals is not None:
        return Start(suite.scenarios[0].stage, selection, units)
    return Start(suite.stage(selection.from_stage), selection, units)


def scenarios_for(suite: Suite, args: argparse.Namespace, start: Start) -> tuple[Scenario, ...]:
    """`--scenario`'s scenarios (default: every one), less those the change leaves
    out when the map selects units (`run --base`); () when it leaves out all."""
    chosen = tuple(suite.scenario(s) for s in dict.fromkeys(args.scenario)) or suite.scenarios
    named = getattr(args, "units", None)  # `--units`: compute-stage's answer, handed on
    if named is not None and named.split() != ["all"]:
        wanted = set(named.split())
    elif start.units is not None and start.units.ids is not None:
        wanted = set(start.units.ids)
    else:
        return chosen
    kept = tuple(s for s in chosen if s.id in wanted)
    if not kept:
        print("nothing to run: no unit of this run is selected")
    return kept


def execute(plan: RunPlan, endpoint: Endpoint, *, record: bool = False, verbosity: int = 0) -> int:
    """Run `plan` under SIGINT/SIGTERM handlers, grading as it goes; print its summary
    (`verbosity` < 0: only the verdict line; > 0: every stage's detail as it goes)."""
    # Only infrastructure errors (the endpoint's 5xx/529) are retried; see ci_evals.agents.retry.
    agent = build_agent(plan.suite.agent, on_retry=_say_retry)
    options = EndpointOptions(
        default_model=plan.model,
        budget_usd=plan.suite.budget_usd,
        record_path=plan.run_dir / RECORD_FILE if record else None,
        max_concurrency=plan.suite.max_concurrency,
    )
    with endpoint.open(plan.environ, options) as opened:
        plan = replace(
            plan,
            endpoint=dict(opened.env),
            model=opened.model,
            new_caller=opened.new_caller,
            meter=opened.meter,
            replayed_from=opened.replayed_from,
        )
        grading = GradingHook(keep_work=plan.keep_workspace)
        progress = make_progress(sys.stderr, verbosity=verbosity)
        runner = Runner(plan, agent, progress, after_stage=grading)
        result = asyncio.run(_run_with_signals(runner))
        notes = opened.notes
    runner.endpoint_closed()  # what was still in flight is settled and recorded now
    if verbosity < 0:
        print(verdict_line(result, plan.run_dir))
        if runner.interrupted:
            print("ci-evals: interrupted; partial results written", file=sys.stderr)
            return EXIT_INTERRUPTED
        return exit_code(result)
    print(summary_table(result))
    if result.repeats_stopped:  # stop_repeats_early: said with what it saved
        saved = sum(result.repeats_stopped.values())
        each = ", ".join(f"{sid} {n}" for sid, n in result.repeats_stopped.items())
        print(
            f"adaptive repeats: {saved} repeat(s) not run, the k-of-K verdict decided "
            f"before them ({each})"
        )
    # Said when it explains something: scores that moved between repeats or since
    # the last run of this suite, or a first run (not under every run's table).
    if notes and score_change.scores_changed(result, plan.run_dir):
        for note in notes:
            print(note)
    if result.repeated:
        print(repeat_table(result.summaries))
    if result.resumed:
        print(result.resumed_note)
    print(f"run folder: {plan.run_dir}")
    for line in _kept_workspaces(result):
        print(line)
    if not result.isolated:  # said at the start too; repeated where the verdict is read
        print("ci-evals: this run was not isolated (see docs/isolation.md)", file=sys.stderr)
    if runner.interrupted:
        print("ci-evals: interrupted; partial results written", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(_next_line(plan.run_dir))
    return exit_code(result)


def _kept_workspaces(result: RunResult) -> list[str]:
    """Where `--keep-workspace` left each scenario's workspace (a temp folder, not
    the run folder: nothing else says where)."""
    repeated = result.repeat > 1
    return [
        f"workspace kept: {scenario.workspace} "
        f"({scenario.id}{f'#{scenario.repeat + 1}' if repeated else ''})"
        for scenario in result.scenarios
        if scenario.workspace
    ]


def _next_line(run_dir: Path) -> str:
    """The next useful command: every stage's criteria, files and trajectory."""
    shown = os.path.relpath(run_dir) if run_dir.is_relative_to(Path.cwd()) else str(run_dir)
    site = shlex.quote(os.path.join(shown, "site"))
    return f"next: ci-evals report {shlex.quote(shown)} --html {site}"


def _say_retry(request: StageRequest, outcome: StageOutcome, attempt: int, delay: float) -> None:
    print(
        f"ci-evals: the model endpoint failed (HTTP {outcome.api_error_status}) in "
        f"{request.trajectory_path.parent.name}; attempt {attempt + 1} in {delay:.0f} s",
        file=sys.stderr,
        flush=True,
    )


async def _run_with_signals(runner: Runner) -> RunResult:
    loop = asyncio.get_running_loop()
    # Put back what was there (`main.entry`'s handlers), not asyncio's default
    # (SIG_DFL for SIGTERM: a signal after the run would end it with 143).
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        loop.add_signal_handler(signum, runner.interrupt)
    try:
        return await runner.run()
    finally:
        # Blocked while swapping, so that none arrives to find SIG_DFL in between.
        signal.pthread_sigmask(signal.SIG_BLOCK, previous)
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            if handler is not None:
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, previous)
