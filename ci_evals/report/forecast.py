"""What a run will cost before it starts, priced from the base branch's last runs.

`ci-evals forecast` (`commands/forecast.py`) selects the units exactly as `run`
would and hands them here with the history: the results of the base's last
runs (the baseline artifacts). The price of one run of (scenario, stage) is
what it measured there — the stage and its reviewer, `report.baseline.stage_cost`
— and nothing else:

- per history run, the mean over that run's repeats (with the plugin);
- the estimate is the mean over the history runs that ran it, and the spread
  their lowest and highest;
- a scenario the history never ran is priced at the stage's mean over the
  scenarios it did (said as such);
- a stage no history run ran is **unknown**: no tokenizer guess. The total then
  says how many stage runs it leaves out, and a gate treats it as over.

Time: each unit's stages run one after another, units `jobs` at a time in
each of `shards` runners: the forecast is the larger of the longest unit and
the units' total over `jobs x shards`, a lower bound that ignores queueing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ci_evals.report.baseline import costed_runs, is_stub
from ci_evals.results.model import RunResult


@dataclass(frozen=True)
class Planned:
    """One (scenario, stage) the run will run, `runs` times (its repeats)."""

    scenario: str
    number: int
    name: str
    runs: int


@dataclass(frozen=True)
class RunEstimate:
    """What one run of a (scenario, stage) costs and takes, from the history."""

    cost: float | None  # None: unknown
    low: float | None
    high: float | None
    seconds: float | None
    basis: str  # "3 runs", "the stage's mean over 2 scenarios", "no history"


@dataclass(frozen=True)
class Forecast:
    planned: tuple[Planned, ...]
    prices: tuple[RunEstimate, ...]  # one per planned
    stages_total: int  # the suite's stages
    scenarios_total: int
    history: int  # how many history runs priced it
    simulated: bool  # the history ran on the stub model: its costs are simulated
    jobs: int = 1
    shards: int = 1
    last_full_usd: float | None = None  # the last full run of the history (from stage 1, all)

    @property
    def _pairs(self) -> list[tuple[Planned, RunEstimate]]:
        return list(zip(self.planned, self.prices, strict=True))

    @property
    def cost(self) -> float:
        """The known part of the total."""
        return math.fsum((p.cost or 0.0) * u.runs for u, p in self._pairs)

    @property
    def low(self) -> float:
        return math.fsum((p.low or 0.0) * u.runs for u, p in self._pairs)

    @property
    def high(self) -> float:
        return math.fsum((p.high or 0.0) * u.runs for u, p in self._pairs)

    @property
    def unknown_runs(self) -> int:
        return sum(u.runs for u, p in self._pairs if p.cost is None)

    @property
    def seconds(self) -> float:
        per_unit: dict[str, float] = {}
        longest = 0.0
        for unit, price in self._pairs:
            per_unit[unit.scenario] = per_unit.get(unit.scenario, 0.0) + (price.seconds or 0.0)
            longest = max(longest, per_unit[unit.scenario])
        runs = max((u.runs for u in self.planned), default=1)
        total = math.fsum(per_unit.values()) * runs
        return max(longest, total / max(1, self.jobs * self.shards))

    def over(self, limit: float) -> bool:
        """Above `limit`, or not known to be below it (fail closed)."""
        return self.unknown_runs > 0 or self.cost > limit

    def headline(self) -> str:
        """ "this run will run 3 of 10 stages x 2 scenarios: ~$2.10, ~6 min; the base's
        last full run: $9.80"."""
        stages = len({u.number for u in self.planned})
        scenarios = len({u.scenario for u in self.planned})
        runs = max((u.runs for u in self.planned), default=1)
        repeats = f" x {runs} repeats" if runs > 1 else ""
        sim = " (simulated: stub model)" if self.simulated else ""
        if not self.planned:
            return "this run will run nothing"
        if self.history == 0:
            money = "cost unknown (no history: no earlier run to price it from)"
        else:
            money = f"~{_usd(self.cost)}{sim}"
            if self.high > self.low:
                money += f" ({_usd(self.low)} to {_usd(self.high)} over {self.history} run(s))"
            if self.unknown_runs:
                money += f" + unknown ({self.unknown_runs} stage run(s) with no history)"
            money += f", ~{_minutes(self.seconds)}"
        full = ""
        if self.last_full_usd is not None:
            full = f"; the base's last full run: {_usd(self.last_full_usd)}{sim}"
        return (
            f"this run will run {stages} of {self.stages_total} stages x {scenarios} of "
            f"{self.scenarios_total} scenarios{repeats}: {money}{full}"
        )

    def markdown(self, gate: str = "") -> str:
        lines = [
            "## ci-evals: forecast",
            "",
            self.headline()[0].upper() + self.headline()[1:] + ".",
            "",
        ]
        if gate:
            lines += [gate, ""]
        lines += ["| scenario | stage | runs | cost per run | spread | time per run | from |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for unit, price in self._pairs:
            spread = "-"
            if price.low is not None and price.high is not None and price.high > price.low:
                spread = f"{_usd(price.low)}-{_usd(price.high)}"
            lines.append(
                f"| {unit.scenario} | {unit.number} {unit.name} | {unit.runs} | "
                f"{'unknown' if price.cost is None else _usd(price.cost)} | {spread} | "
                f"{'-' if price.seconds is None else _minutes(price.seconds)} | {price.basis} |"
            )
        return "\n".join(lines) + "\n"


def forecast(
    planned: Sequence[Planned],
    history: Sequence[RunResult],
    *,
    stages_total: int,
    scenarios_total: int,
    jobs: int = 1,
    shards: int = 1,
) -> Forecast:
    """Price `planned` from `history` (most recent first)."""
    samples: dict[tuple[str, int], list[tuple[float, float | None]]] = {}
    for result in history:
        for key, value in _per_run(result).items():
            samples.setdefault(key, []).append(value)
    prices = tuple(_price(unit, samples) for unit in planned)
    full = next((r.total_cost_usd for r in history if _full(r, stages_total)), None)
    return Forecast(
        planned=tuple(planned),
        prices=prices,
        stages_total=stages_total,
        scenarios_total=scenarios_total,
        history=len(history),
        simulated=any(is_stub(r) for r in history),
        jobs=jobs,
        shards=shards,
        last_full_usd=full,
    )


def _per_run(result: RunResult) -> dict[tuple[str, int], tuple[float, float | None]]:
    """(scenario, stage) -> this run's mean (cost, seconds) per run, with the plugin."""
    out: dict[tuple[str, int], tuple[float, float | None]] = {}
    for key, runs in costed_runs(result).items():
        times = [stage.duration_s for _, stage in runs if stage.duration_s is not None]
        out[key] = (
            math.fsum(cost for cost, _ in runs) / len(runs),
            math.fsum(times) / len(times) if times else None,
        )
    return out


def _price(
    unit: Planned, samples: dict[tuple[str, int], list[tuple[float, float | None]]]
) -> RunEstimate:
    own = samples.get((unit.scenario, unit.number))
    basis = f"{len(own)} run(s)" if own else ""
    if not own:  # the stage's mean over the scenarios the history ran it in
        others = [key for key in samples if key[1] == unit.number]
        own = [value for key in others for value in samples[key]]
        basis = f"the stage's mean over {len(others)} scenario(s)"
    if not own:
        return RunEstimate(None, None, None, None, "no history")
    costs = [c for c, _ in own]
    times = [t for _, t in own if t is not None]
    return RunEstimate(
        cost=math.fsum(costs) / len(costs),
        low=min(costs),
        high=max(costs),
        seconds=math.fsum(times) / len(times) if times else None,
        basis=basis,
    )


def _full(result: RunResult, stages_total: int) -> bool:
    """A full run: from stage 1, every stage of the suite, the whole run (no shard)."""
    numbers = {stage.number for s in result.scenarios for stage in s.stages}
    return result.from_stage == 1 and len(numbers) == stages_total and result.shard is None


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"
