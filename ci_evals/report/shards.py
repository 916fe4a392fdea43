"""The *Cost* section's line on shards: what a merged run took in runner time, and the
cheapest shard count for the durations it recorded.

GitHub bills each job by the minute, rounded up, set-up included: K shards cost
the sum over shards of ceil((set-up + the shard's work) / 60) minutes, and
finish after set-up + the longest shard. The work per unit is what the merged
run recorded (its stages' wall clock); the units are split for each K as
`ci-evals plan` splits them (`run.shard.assign`). The set-up per runner
(checkout, install) is not in the results: `RUNNER_SETUP_S` is assumed, and
the line says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ci_evals.results.model import RunResult
from ci_evals.run.shard import Unit, assign

RUNNER_SETUP_S = 60.0


@dataclass(frozen=True)
class ShardCost:
    count: int
    longest_s: float  # the longest shard's wall time
    cheapest: int  # the shard count with the fewest billed minutes (ties: the fastest)
    cheapest_minutes: int
    cheapest_wall_s: float
    minutes: int  # billed minutes at `count` for the same durations


def shard_cost(result: RunResult) -> ShardCost | None:
    """None: not a merged run, or a shard that never finished."""
    shards = result.merged_shards
    if not shards:
        return None
    walls = [shard.wall_s for shard in shards]
    if any(wall is None for wall in walls):
        return None
    units = [Unit(s.id, s.repeat) for s in result.scenarios]
    work = [math.fsum(stage.duration_s or 0.0 for stage in s.stages) for s in result.scenarios]

    def billed(k: int) -> tuple[int, float]:
        split = assign(units, work, k)
        loads = [split.load(i) for i in range(1, k + 1)]
        minutes = sum(math.ceil((RUNNER_SETUP_S + load) / 60) for load in loads)
        return minutes, RUNNER_SETUP_S + max(loads)

    options = {k: billed(k) for k in range(1, len(units) + 1)}
    cheapest = min(options, key=lambda k: options[k])
    return ShardCost(
        count=len(shards),
        longest_s=max(wall for wall in walls if wall is not None),
        cheapest=cheapest,
        cheapest_minutes=options[cheapest][0],
        cheapest_wall_s=options[cheapest][1],
        minutes=options[min(len(shards), len(units))][0],
    )


def shard_line(cost: ShardCost) -> str:
    runner = cost.count * cost.longest_s
    return (
        f"- Shards: {cost.count} x {cost.longest_s:.0f} s (the longest shard) = "
        f"{runner:.0f} s of runner time; for these durations {cost.minutes} billed "
        f"runner-minute(s), the cheapest is {cost.cheapest} shard(s): "
        f"{cost.cheapest_minutes} minute(s), done in ~{cost.cheapest_wall_s:.0f} s "
        f"(each runner rounded up to a minute, {RUNNER_SETUP_S:.0f} s set-up assumed)"
    )
