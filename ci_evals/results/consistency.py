"""Does a results file agree with itself? Every way it could not, as one line each.

`results.json` travels as a CI artifact, and the agent under test can write
where it lies: anyone may have edited it. The report therefore believes no
single field. `problems` cross-checks what the runner and `ci-evals grade`
always write together (a shard's units, the run's totals and repeats, the same
stages in every scenario, each stage's status against its verdict, each
verdict against its criteria, the summaries recomputed), and lists every
disagreement; a report of a file with any problem is an error, never a pass.

The scoring rules themselves live in `verdict` (this package):
`ci_evals.report.verify` recomputes the verdicts with them and adds its
findings to these. What no check can catch is a file rewritten *consistently*
(every score, verdict, summary and cost forged together): the file carries no
signature. Every check: docs/results.md#consistency.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.results import MISSED_BY, miss_source
from ci_evals.results.criteria import ANALYTIC_MAX, ANALYTIC_MIN, CHECKLIST_SCORES
from ci_evals.results.model import IMPORTED_TOOL
from ci_evals.results.summary import mean_delta, summarize_run

if TYPE_CHECKING:
    from ci_evals.results.criteria import StageVerdict
    from ci_evals.results.model import RunResult, ScenarioResult, StageResult

RAN = frozenset({"completed", "passed", "failed", "error", "limit", "running"})
NOT_RAN = frozenset({"skipped", "pending"})
GOES_ON = frozenset({"completed", "passed"})  # the runner starts the next stage after these
VERDICT_STATUSES = frozenset({"passed", "failed", "error"})
# Costs are sums of floats: equal within a millionth of a cent.
COST_TOLERANCE = 1e-8


def problems(result: RunResult) -> list[str]:
    """Every inconsistency in `result`, one line each; empty when it agrees with itself."""
    found = list(_run(result))
    found += _scenarios(result)
    for scenario in result.scenarios:
        for stage in scenario.stages:
            where = stage_where(result, scenario, stage)
            found += [f"{where}: {problem}" for problem in _stage(stage)]
            if stage.grading is not None:
                found += [f"{where}: {problem}" for problem in _verdict(stage.grading)]
    found += _summaries(result)
    return found


def stage_where(result: RunResult, scenario: ScenarioResult, stage: StageResult) -> str:
    """`acme stage 3 (plan)`, `acme#2 stage 3 (plan)` with repeats."""
    return f"{result.label_of(scenario)} stage {stage.number} ({stage.name})"


def _stages(result: RunResult) -> Iterator[StageResult]:
    return (stage for scenario in result.scenarios for stage in scenario.stages)


def _run(result: RunResult) -> Iterator[str]:
    status = result.status
    if status == "running":
        if result.finished_at is not None:
            yield "the run is still running but has a finished_at time"
    elif result.finished_at is None:
        yield f"the run is {status} but has no finished_at time"
    if status == "completed":
        for scenario in result.scenarios:
            for stage in scenario.stages:
                if stage.status in ("pending", "running"):
                    where = stage_where(result, scenario, stage)
                    yield f"the run is completed but {where} is {stage.status}"
    if result.isolated and result.sandbox == "local":
        yield "the run says it was isolated, but its agent ran in the local sandbox"
    yield from _replay(result)
    yield from _imported(result)
    if result.repeat < 1:
        yield f"repeat is {result.repeat}: a run runs each scenario at least once"
    k = result.pass_at_least
    if k is not None and not 1 <= k <= max(result.repeat, 1):
        yield f"pass_at_least is {k} but the run repeated each scenario {result.repeat} time(s)"
    if status != "running":  # a writer that died mid-stage may not have added the last cost
        yield from _total_cost(result)


def _replay(result: RunResult) -> Iterator[str]:
    """A replay always records its recording's origin (`unknown` at worst): one
    without it, or an origin on a run that replayed nothing, was edited."""
    replay = result.model_endpoint.startswith("replay:")
    if replay and result.replayed_from is None:
        yield "the run replayed a recording but does not say what made it (replayed_from)"
    if not replay and result.replayed_from is not None:
        yield f"the run says it replayed a recording, but its endpoint is {result.model_endpoint}"


def _imported(result: RunResult) -> Iterator[str]:
    """An imported run (`ci-evals import plugin-eval`) is cases, each with its record of
    the document, and says so everywhere; a partial document never finished."""
    imported = result.imported_from
    endpoint = result.model_endpoint == IMPORTED_TOOL
    if imported is None:
        if endpoint:
            yield f"the run's endpoint is {IMPORTED_TOOL} but it records no imported document"
        return
    if not endpoint:
        yield f"the run was imported but its endpoint is {result.model_endpoint}"
    if imported.partial and result.status == "completed":
        yield "the run is completed but was imported from a partial document"
    cases = {s.id for s in result.scenarios if s.unit == "case"}
    if len(cases) != len({s.id for s in result.scenarios}):
        yield "the run was imported but not all of its scenarios are cases"
    recorded = [case.scenario for case in imported.cases]
    if sorted(recorded) != sorted(cases):
        yield (
            f"the imported document's cases {sorted(recorded)} are not the run's "
            f"{sorted(cases)}, each once"
        )
    for case in imported.cases:  # the without-plugin arm: its runs read as any stage's
        for index, stage in enumerate(case.without):
            where = f"{case.scenario} without the plugin, run {index + 1}"
            found = [*_stage(stage), *(_verdict(stage.grading) if stage.grading else ())]
            yield from (f"{where}: {problem}" for problem in found)


def _total_cost(result: RunResult) -> Iterator[str]:
    if result.forwarded is not None:
        spent, what = result.forwarded.cost_usd, "the model endpoint forwarded"
    else:
        # A resumed run also spent what its discarded attempts cost (`Resumed`).
        spent = result.stages_cost_usd + result.discarded_usd
        what = "the stages and reviewers cost"
    if not math.isclose(result.total_cost_usd, spent, abs_tol=COST_TOLERANCE):
        yield f"total_cost_usd is {result.total_cost_usd:.6f} but {what} {spent:.6f}"


def _scenarios(result: RunResult) -> list[str]:
    ran: dict[str, list[ScenarioResult]] = defaultdict(list)
    for scenario in result.scenarios:
        ran[scenario.id].append(scenario)
    found = list(_repeats(result, ran))
    found += _shapes(result, ran)
    # Graders and the scoring policy are the suite's, per stage: the same in every scenario.
    graded: dict[int, set[bool]] = defaultdict(set)
    thresholds: dict[int, set[float]] = defaultdict(set)
    for stage in _stages(result):
        graded[stage.number].add(stage.graded)
        if stage.grading is not None:
            thresholds[stage.number].add(stage.grading.analytic_threshold)
    found += [
        f"stage {n} has graders in some scenarios only" for n, g in graded.items() if len(g) > 1
    ]
    found += [
        f"stage {n} was graded against different analytic thresholds {sorted(t)}"
        for n, t in thresholds.items()
        if len(t) > 1
    ]
    for scenario in result.scenarios:
        label = result.label_of(scenario)
        numbers = [stage.number for stage in scenario.stages]
        expected = list(range(result.from_stage, result.from_stage + len(numbers)))
        if numbers != expected:
            found.append(
                f"{label}: stages {numbers} are not the stages from {result.from_stage} on, "
                "in order, without a gap"
            )
        found += [
            f"{label}: {p}" for p in _order(scenario, regraded=result.regraded_at is not None)
        ]
    return found


def _repeats(result: RunResult, ran: dict[str, list[ScenarioResult]]) -> Iterator[str]:
    """Each scenario ran its `repeats` times (a shard: only its units), each repeat
    saying so alike."""
    for sid, entries in ran.items():
        if len({(result.repeats_of(e), e.unit) for e in entries}) > 1:
            yield f"scenario {sid}'s repeats disagree on how many it ran, or its unit"
    if result.shard is not None:  # a shard holds exactly its units
        yield from _shard(result)
        return
    for sid, entries in ran.items():
        with_arm = [e for e in entries if e.arm == "with"]
        seen, count = sorted(e.repeat for e in with_arm), result.repeats_of(entries[0])
        count -= result.repeats_stopped.get(sid, 0)  # decided early: never started
        if seen != list(range(count)):
            yield (
                f"scenario {sid} has repeats {[r + 1 for r in seen]} but the run "
                f"repeated it {count} time(s)"
            )
    yield from _arms(result)


def _arms(result: RunResult) -> Iterator[str]:
    """A run without the plugin only under `ablation: with-without`, once per unit
    that ran with it (a unit that runs single-arm has none)."""
    without = [(s.id, s.repeat) for s in result.scenarios if s.arm == "without"]
    if without and result.ablation != "with-without":
        yield "some units ran without the plugin, but the run's ablation is none"
    units = {(s.id, s.repeat) for s in result.scenarios if s.arm == "with"}
    if len(set(without)) != len(without) or not set(without) <= units:
        yield "a unit ran without the plugin twice, or without its run with it"


def _shapes(result: RunResult, ran: dict[str, list[ScenarioResult]]) -> Iterator[str]:
    """The suite's scenarios all run its stages; a case unit runs its own one stage."""
    if len({scenario.unit for scenario in result.scenarios}) > 1:
        yield "some scenarios are claude plugin eval cases and some are not"
    shapes = {
        tuple((s.number, s.name) for s in scenario.stages)
        for scenario in result.scenarios
        if scenario.unit == "scenario"
    }
    if len(shapes) > 1:
        yield "the scenarios do not all have the same stages (one was added or removed)"
    for sid, entries in ran.items():
        own = {tuple((s.number, s.name) for s in e.stages) for e in entries}
        if entries[0].unit == "case" and (len(own) > 1 or any(len(e.stages) != 1 for e in entries)):
            yield f"case {sid} does not run one stage, the same in each of its runs"


def _shard(result: RunResult) -> list[str]:
    """A shard's scenarios are its units, each once, in plan order, within its run's repeats."""
    shard = result.shard
    assert shard is not None
    found: list[str] = []
    if shard.index > shard.count:
        found.append(f"shard {shard.index} of {shard.count} does not exist")
    units = [(unit.scenario, unit.repeat) for unit in shard.units]
    # A unit's run without the plugin is in the shard of its run with it (`_arms`).
    ran = [(s.id, s.repeat) for s in result.scenarios if s.arm == "with"]
    if ran != units:
        found.append(f"the scenarios run {ran} are not the shard's units {units}")
    positions = [unit.position for unit in shard.units]
    if positions != sorted(set(positions)) or any(p >= shard.units_total for p in positions):
        found.append(f"the shard's unit positions {positions} are not in plan order")
    found += [
        f"scenario {s.id} repeat {s.repeat + 1} is beyond its {result.repeats_of(s)} repeat(s)"
        for s in result.scenarios
        if s.repeat >= result.repeats_of(s)
    ]
    return found


def _order(scenario: ScenarioResult, *, regraded: bool) -> Iterator[str]:
    """The runner's rule between stages: once one did not pass, the rest did not run.

    Re-grading may turn an earlier stage's pass into a failure (or back) while
    the later ones keep their statuses, so in a re-graded file only "nothing
    ran after a stage that did not run" holds.
    """
    stopped: StageResult | None = None
    for stage in scenario.stages:
        if stopped is not None and stage.status in RAN:
            yield (
                f"stage {stage.number} is {stage.status} although stage {stopped.number} "
                f"before it was {stopped.status}: the runner would not have started it"
            )
        if stopped is None and (
            stage.status in NOT_RAN or (not regraded and stage.status not in GOES_ON)
        ):
            stopped = stage


def _stage(stage: StageResult) -> Iterator[str]:
    status, verdict = stage.status, stage.grading
    if stage.endpoint_misses and status not in ("error", "limit"):
        yield (
            f"is {status} although {MISSED_BY[miss_source(stage.endpoint_misses)]} had no "
            f"answer for {len(stage.endpoint_misses)} of its requests (that makes it an error)"
        )
    if status == "limit" and stage.limit_hit is None:
        yield "status limit without the limit it hit"
    if status != "limit" and stage.limit_hit is not None:
        yield f"hit its {stage.limit_hit} limit but its status is {status}"
    if not stage.graded:
        if verdict is not None:
            yield "has a verdict but no graders"
        if stage.grading_cost_usd is not None:
            yield "has a reviewer's cost but no graders"
        if status in ("passed", "failed"):
            yield f"is {status} but has no graders to decide that"
    if verdict is None:
        if status in ("passed", "failed"):
            yield f"is {status} but has no verdict"
        return
    if status not in VERDICT_STATUSES:
        yield f"is {status} but has a verdict ({verdict.verdict})"
    elif status != verdict.verdict and not (status == "error" and stage.endpoint_misses):
        yield f"is {status} but its verdict is {verdict.verdict}"


def _scores(verdict: StageVerdict) -> Iterator[str]:
    for c in verdict.criteria:
        if c.score is None:
            if not c.advisory:
                yield f"criterion {c.id} has no score but decides the verdict"
        elif c.kind == "checklist" and c.score not in CHECKLIST_SCORES:
            yield f"checklist criterion {c.id} has score {c.score:g} (not 0 or 1)"
        elif c.kind == "analytic" and not ANALYTIC_MIN <= c.score <= ANALYTIC_MAX:
            yield f"analytic criterion {c.id} has score {c.score:g} (not 1-5)"


def _verdict(verdict: StageVerdict) -> Iterator[str]:
    yield from _scores(verdict)
    counted = [c for c in verdict.criteria if not c.advisory]
    if verdict.verdict == "error":
        return
    errors = [g.grader for g in verdict.graders if g.error is not None]
    if errors:
        yield f"verdict {verdict.verdict} although grader {', '.join(errors)} failed"
    if verdict.error is not None:
        yield f"verdict {verdict.verdict} with an error"
    if not counted:
        yield f"verdict {verdict.verdict} with no criterion deciding it"
    if verdict.verdict != "passed":
        return
    failed = [c.id for c in counted if not c.passed]
    if failed:
        yield f"verdict passed but criteria failed: {', '.join(failed)}"
    if verdict.checklist_all_passed is False:
        yield "verdict passed but the checklist did not all pass"
    mean, threshold = verdict.analytic_mean, verdict.analytic_threshold
    if mean is not None and mean < threshold:
        yield f"verdict passed with analytic mean {mean:.2f} < {threshold:g}"


def _summaries(result: RunResult) -> list[str]:
    if result.status == "running" and not result.summaries:
        return []  # written at the end of the run
    try:
        expected = summarize_run(result, result.pass_at_least)
    except UserError as exc:
        return [f"the summaries cannot be recomputed: {exc.message}"]
    recorded = {(s.scenario, s.stage): s for s in result.summaries}
    wanted = {(s.scenario, s.stage): s for s in expected}
    found: list[str] = []
    if len(recorded) != len(result.summaries):
        found.append("a (scenario, stage) has more than one summary")
    for key in sorted(recorded.keys() - wanted.keys()):
        found.append(f"a summary for {key[0]} stage {key[1]}, which has no stage")
    for key in sorted(wanted.keys() - recorded.keys()):
        found.append(f"no summary for {key[0]} stage {key[1]}")
    for key in sorted(wanted.keys() & recorded.keys()):
        mine, theirs = wanted[key], recorded[key]
        if not _same(mine.model_dump(mode="json"), theirs.model_dump(mode="json")):
            found.append(
                f"the summary of {key[0]} stage {key[1]} says {theirs.summary.verdict} "
                f"({theirs.summary.reason}); recomputed from the stages it is "
                f"{mine.summary.verdict} ({mine.summary.reason})"
            )
    if not _same(result.mean_delta, mean_delta(expected)):
        found.append(
            f"mean_delta is {result.mean_delta}, but recomputed from the stages it is "
            f"{mean_delta(expected)}"
        )
    return found


def _same(a: object, b: object) -> bool:
    """Equal JSON values, floats equal within rounding."""
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, int | float)
            and isinstance(b, int | float)
            and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
