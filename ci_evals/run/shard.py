"""Splitting a run into K shards for CI's job matrix: `ci-evals plan`, `run --shard I/K`.

A *unit* is one scenario's repeat (with `--tasks`, of one task under one
configuration). `plan` lists a run's units in the order the unsharded run
would run them, estimates each one's time — the mean recorded duration of
each of its stages in an earlier results file (`--durations`), else a
stage's typical duration there, else one per stage — and assigns them
longest-first to the least loaded shard (ties: the lower shard, the earlier
unit). The same inputs give the same split: `run --shard I/K` computes it
again and runs shard I's units, and each shard records the whole
assignment's digest so that `merge` refuses shards of different plans.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.results.model import RESULTS_FILE, RunResult, Shard, ShardUnit, read_results
from ci_evals.suite.load import Scenario, Stage, Suite

BENCHMARK_JSON = "benchmark.json"  # as `run.tasks` writes it (no import: tasks imports us)


@dataclass(frozen=True)
class Unit:
    scenario: str
    repeat: int  # 0-based
    run: str = ""  # with --tasks: the run folder "<n>-<configuration>/<task>"; "" for one suite


@dataclass(frozen=True)
class Assignment:
    """Every unit in plan order, its estimate (seconds, or stages) and its shard (1-based)."""

    count: int
    units: tuple[Unit, ...]
    estimates: tuple[float, ...]
    shards: tuple[int, ...]

    @property
    def sha256(self) -> str:
        return plan_sha256(self.count, zip(self.units, self.shards, strict=True))

    def positions(self, index: int) -> list[int]:
        return [i for i, k in enumerate(self.shards) if k == index]

    def load(self, index: int) -> float:
        return sum(self.estimates[i] for i in self.positions(index))

    def record(self, index: int, run: str = "", budget_usd: float | None = None) -> Shard:
        """Shard `index`'s record for a results file (with --tasks: its units in `run`);
        `budget_usd`, the run's budget, gives the shard its part (`budget_share`)."""
        units = [
            ShardUnit(scenario=self.units[i].scenario, repeat=self.units[i].repeat, position=i)
            for i in self.positions(index)
            if self.units[i].run == run
        ]
        of = sum(unit.run == run for unit in self.units)
        return Shard(
            index=index,
            count=self.count,
            units_total=len(self.units),
            plan_sha256=self.sha256,
            units=units,
            run_budget_usd=budget_usd,
            budget_usd=budget_share(budget_usd, len(units), of),
        )


def plan_sha256(count: int, units: Iterable[tuple[Unit, int]]) -> str:
    """The digest of an assignment: every unit, in plan order, with its shard."""
    data = [[u.run, u.scenario, u.repeat, k] for u, k in units]
    text = json.dumps({"count": count, "units": data}, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def budget_share(budget_usd: float | None, held: int, of: int) -> float | None:
    """A shard's part of its run's budget: in proportion to the run's units it holds, so
    that K shards together spend at most the budget, not K times it (None: no budget)."""
    if budget_usd is None or of == 0:
        return None
    return budget_usd if held == of else budget_usd * held / of


def assign(units: Sequence[Unit], estimates: Sequence[float], count: int) -> Assignment:
    """Longest processing time first: each unit, longest first, to the least loaded shard
    (of two as loaded, the one holding fewer units: units recorded as taking no time
    still spread over every shard, none left empty while another holds two)."""
    shards = [0] * len(units)
    heap = [(0.0, 0, k) for k in range(1, count + 1)]
    for i in sorted(range(len(units)), key=lambda i: (-estimates[i], i)):
        load, held, k = heapq.heappop(heap)
        shards[i] = k
        heapq.heappush(heap, (load + estimates[i], held + 1, k))
    return Assignment(count, tuple(units), tuple(estimates), tuple(shards))


def parse_spec(text: str) -> tuple[int, int]:
    """`I/K` -> (I, K), 1 <= I <= K."""
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit():
        raise UserError(f"{text!r} is not I/K", field="--shard", hint="e.g. --shard 2/4")
    i, k = int(index), int(count)
    if not 1 <= i <= k:
        raise UserError(f"{text!r}: I must be between 1 and K", field="--shard")
    return i, k


class Durations:
    """Recorded stage durations, mean per (run, scenario, stage), with fallbacks."""

    def __init__(self, seen: Mapping[tuple[str, str, int], Sequence[float]]) -> None:
        self.exact = {key: statistics.fmean(v) for key, v in seen.items() if v}
        by_run: dict[tuple[str, int], list[float]] = defaultdict(list)
        by_stage: dict[int, list[float]] = defaultdict(list)
        for (run, _, stage), value in self.exact.items():
            by_run[run, stage].append(value)
            by_stage[stage].append(value)
        self.by_run = {key: statistics.fmean(v) for key, v in by_run.items()}
        self.by_stage = {key: statistics.fmean(v) for key, v in by_stage.items()}
        self.typical = statistics.fmean(self.exact.values()) if self.exact else 1.0

    def estimate(self, unit: Unit, stages: Sequence[int]) -> float:
        """The unit's seconds: per stage the closest record there is (one per stage: none)."""
        total = 0.0
        for stage in stages:
            total += self.exact.get(
                (unit.run, unit.scenario, stage),
                self.by_run.get((unit.run, stage), self.by_stage.get(stage, self.typical)),
            )
        return total


NO_DURATIONS = Durations({})


def read_durations(path: Path | None) -> Durations:
    """`--durations`: a results file or run folder; with --tasks, a benchmark's folder
    (or its `benchmark.json`), each task's results read by its row's `run_dir`."""
    if path is None:
        return NO_DURATIONS
    seen: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    bench = path if path.name == BENCHMARK_JSON else path / BENCHMARK_JSON
    if bench.is_file():
        for run, result in _benchmark_runs(bench):
            _add(seen, run, result)
    else:
        if not path.exists():
            raise UserError("no results file or benchmark here", file=path, field="--durations")
        _add(seen, "", read_results(path))
    return Durations(seen)


def _benchmark_runs(bench: Path) -> list[tuple[str, RunResult]]:
    try:
        data = json.loads(bench.read_text(encoding="utf-8"))
        rows = [row["run_dir"] for c in data["configurations"] for row in c["tasks"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"not a benchmark.json: {exc}", file=bench, field="--durations") from None
    found = []
    for run in rows:
        if not isinstance(run, str) or ".." in Path(run).parts or Path(run).is_absolute():
            raise UserError(f"run_dir {run!r} is not below it", file=bench, field="run_dir")
        if (bench.parent / run / RESULTS_FILE).is_file():
            found.append((run, read_results(bench.parent / run)))
    return found


def _add(seen: dict[tuple[str, str, int], list[float]], run: str, result: RunResult) -> None:
    for scenario in result.scenarios:
        for stage in scenario.stages:
            if stage.duration_s is not None and stage.status not in ("skipped", "pending"):
                seen[run, scenario.id, stage.number].append(stage.duration_s)


# -- one suite -------------------------------------------------------------------------


def suite_units(scenarios: Sequence[Scenario], repeat: int, run: str = "") -> list[Unit]:
    """A suite's units in the order its run starts them: each scenario's repeats (a
    case's own `runs`, unless `--repeat` cleared them: `RunPlan.repeats_of`)."""
    return [
        Unit(s.id, r, run)
        for s in scenarios
        for r in range(s.repeat if s.repeat is not None else repeat)
    ]


def plan_units(
    units: Sequence[Unit],
    stages_of: Callable[[Unit], Sequence[int]],
    durations: Durations,
    count: int,
) -> Assignment:
    estimates = [durations.estimate(unit, stages_of(unit)) for unit in units]
    return assign(units, estimates, min(count, len(units)))


def suite_assignment(
    suite: Suite,
    from_stage: Stage,
    scenarios: Sequence[Scenario],
    repeat: int,
    *,
    count: int,
    durations: Durations,
) -> Assignment:
    stages = [stage.number for stage in suite.stages[from_stage.number - 1 :]]
    own = {s.id: [s.stage.number] for s in scenarios if s.stage is not None}  # a case unit's
    return plan_units(
        suite_units(scenarios, repeat), lambda u: own.get(u.scenario, stages), durations, count
    )


def shard_of(
    assignment: Assignment,
    index: int,
    count: int,
    run: str = "",
    budget_usd: float | None = None,
) -> Shard:
    """`run --shard I/K`'s record; K must be what `plan` printed (at most one per unit)."""
    if count != assignment.count:
        raise UserError(
            f"shard {index}/{count}: the run has {len(assignment.units)} work unit(s), "
            f"so at most {assignment.count} shard(s)",
            field="--shard",
            hint="use the shard count `ci-evals plan` printed",
        )
    return assignment.record(index, run, budget_usd)
