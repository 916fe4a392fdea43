"""Adaptive repeats: start no further repeat of a scenario once its verdict is decided.

With `repeat: K`, `pass_at_least: k` and `stop_repeats_early: true`, a scenario's
repeats are started one by one (up to `--jobs` at once); before each, the finished
repeats are counted per stage: `p` passed, `e` errors, `r` not finished. A stage's
k-of-K verdict (`results.summary`) is decided when `p >= k` (it passes whatever
the rest do) or `p + e + r < k` (it cannot reach k, and the errors cannot have made
the difference: it fails). When every stage is decided, the remaining repeats are
not started, and the summary over the runs that ran gives the same verdict as all
K would.

This is exact — no statistics, so no error rate to spend: the rule looks only at
counts that can no longer change. It is used only where the verdict is counts
alone: not with `score_at_least` nor under ablation. The rule and its proof:
docs/grading.md (*Adaptive repeats*).
"""

from __future__ import annotations

from collections.abc import Sequence


def decided(verdicts: Sequence[str], total: int, pass_at_least: int | None) -> bool:
    """Whether one stage's k-of-`total` verdict is settled by the finished runs'
    `verdicts` ("passed", "failed", "error"); None: every run must pass."""
    need = total if pass_at_least is None else pass_at_least
    passed = sum(1 for v in verdicts if v == "passed")
    errors = sum(1 for v in verdicts if v == "error")
    unfinished = total - len(verdicts)
    return passed >= need or passed + errors + unfinished < need


def scenario_decided(
    stages: Sequence[Sequence[str]], total: int, pass_at_least: int | None
) -> bool:
    """Every stage's verdict settled (`stages`: per stage, the finished runs' verdicts)."""
    return bool(stages) and all(decided(v, total, pass_at_least) for v in stages)
