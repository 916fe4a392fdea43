"""Comparing a merged run with the unsharded one: everything but ids and timings."""

from __future__ import annotations

from typing import Any

from ci_evals.results.model import RunResult

# What differs between two runs of the same work: ids, clocks, and the shard bookkeeping.
VOLATILE = frozenset(
    {
        "run_id",
        "started_at",
        "finished_at",
        "duration_s",
        "duration_api_ms",
        "session_id",
        "shard",
        "merged_shards",
        "elapsed_s",
    }
)


def comparable(result: RunResult) -> Any:
    return _strip(result.model_dump(mode="json"))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
