"""Comparing a merged run with the unsharded one: everything but ids and timings."""

from __future__ import annotations

import re
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
# A command grader's detail says how long it took ("exit 0 in 0.07s").
_TOOK = re.compile(r"\bin \d+\.\d+s\b")


def comparable(result: RunResult) -> Any:
    return _strip(result.model_dump(mode="json"))


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, str):
        return _TOOK.sub("in _s", value)
    return value
