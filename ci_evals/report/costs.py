"""What a run cost, what it did not have to run, and what that saved.

A run from stage N serves stages 1..N-1 from fixtures: they cost nothing.
What they would have cost is estimated from a baseline that ran them all (a
full run, `from_stage` 1): per (scenario, stage) the mean cost of its runs
there (the stage and its reviewer), times this run's scenario runs. A
scenario the baseline did not run is priced at the stage's mean over the
baseline's scenarios. Without a full-run baseline there is no estimate, and
the report says why. Costs of a stub-model run are simulated: the stub
reports prices, nobody paid them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ci_evals.report.baseline import is_stub, stage_cost, stage_costs
from ci_evals.report.shards import ShardCost, shard_cost
from ci_evals.results.model import RunResult


@dataclass(frozen=True)
class CostSummary:
    live: tuple[str, ...]  # "4 plan-chapter": the stages this run was to run (from_stage on)
    fixtures: tuple[str, ...]  # "1 research-company" (or "1" when no name is known)
    stage_runs: int  # stage runs that did run (a stage after a failed one is skipped)
    never_ran: int  # stage runs that started but never reached the model (not live)
    run_cost: float
    simulated: bool  # the run's costs come from the stub model
    saving: float | None  # estimated; None: `no_estimate` says why
    saving_simulated: bool  # the estimate comes from a stub-model baseline
    basis: str = ""  # where the estimate comes from
    no_estimate: str = ""
    shards: ShardCost | None = None  # a merged run's shards (`report.shards`)


def _live(result: RunResult) -> tuple[tuple[str, ...], int, int]:
    # (number, name): case units (`plugin_evals:`) each run a stage 1 of their own name.
    names: dict[tuple[int, str], None] = {}
    runs = never_ran = 0
    for scenario in result.scenarios:
        for stage in scenario.stages:
            names.setdefault((stage.number, stage.name))
            runs += stage_cost(stage) is not None
            never_ran += stage.status not in ("pending", "skipped") and not stage.model_ran
    live = sorted(names, key=lambda key: key[0])  # stable: a number's names as first seen
    return tuple(f"{n} {name}" for n, name in live), runs, never_ran


def _fixture_names(current: RunResult, baseline: RunResult | None) -> tuple[str, ...]:
    known: dict[int, str] = {}
    if baseline is not None:
        for scenario in baseline.scenarios:
            for stage in scenario.stages:
                known.setdefault(stage.number, stage.name)
    return tuple(f"{k} {known[k]}" if k in known else str(k) for k in range(1, current.from_stage))


def estimate_saving(current: RunResult, baseline: RunResult | None) -> tuple[float | None, str]:
    """(the estimated saving, its basis) or (None, why there is no estimate)."""
    if current.from_stage == 1:
        return 0.0, "every stage ran live"
    if baseline is None:
        return None, "no baseline to take the stages' costs from"
    if baseline.from_stage != 1:
        return None, (
            f"the baseline is not a full run (it started at stage {baseline.from_stage}), so it "
            "has no costs for the stages served from fixtures"
        )
    costs = stage_costs(baseline)
    by_stage: dict[int, list[float]] = {}
    for (_, number), mean in costs.items():
        by_stage.setdefault(number, []).append(mean)
    total = 0.0
    for scenario in current.scenarios:  # one entry per scenario and repeat
        for number in range(1, current.from_stage):
            cost = costs.get((scenario.id, number))
            others = by_stage.get(number)
            if cost is None and others:
                cost = sum(others) / len(others)  # a scenario the baseline did not run
            if cost is None:
                return None, f"the baseline's full run recorded no cost for stage {number}"
            total += cost
    return total, f"the per-stage costs of the baseline's full run {baseline.run_id}"


def cost_summary(current: RunResult, baseline: RunResult | None) -> CostSummary:
    live, runs, never_ran = _live(current)
    saving, why = estimate_saving(current, baseline)
    return CostSummary(
        live=live,
        fixtures=_fixture_names(current, baseline),
        stage_runs=runs,
        never_ran=never_ran,
        run_cost=current.total_cost_usd,
        simulated=is_stub(current),
        saving=saving,
        saving_simulated=baseline is not None and is_stub(baseline),
        basis=why if saving is not None else "",
        no_estimate=why if saving is None else "",
        shards=shard_cost(current),
    )


def usage_outputs(result: RunResult) -> dict[str, str]:
    """The run's cost and token counts as step outputs (`cost_usd`, `input_tokens`,
    `output_tokens`). Metered (the real API): what the proxy forwarded, the agent's
    own calls included; else what the stages' CLIs reported (a stub's is simulated)."""
    if result.forwarded is not None:
        tokens_in, tokens_out = result.forwarded.input_tokens, result.forwarded.output_tokens
    else:
        stages = [stage for scenario in result.scenarios for stage in scenario.stages]
        tokens_in = sum(stage.input_tokens or 0 for stage in stages)
        tokens_out = sum(stage.output_tokens or 0 for stage in stages)
    return {
        "cost_usd": f"{result.total_cost_usd:.4f}",
        "input_tokens": str(tokens_in),
        "output_tokens": str(tokens_out),
    }
