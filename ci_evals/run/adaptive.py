"""Adaptive repeats: start no further repeat of a scenario once its verdict is decided.

With `repeat: K`, `pass_at_least: k` (default: all K) and `stop_repeats_early:
true`, a scenario's repeats are started one by one (up to `--jobs` at once);
before each, the finished repeats are counted per stage: `p` passed, `e`
errors, and `r` repeats not finished (running or not started). The k-of-K
verdict (`results.summary`) of a stage is then already decided when

- `p >= k`: it passes whatever the rest do; or
- `p + e + r < k`: it cannot reach k, and the errors cannot have made the
  difference either: it fails.

When every stage of the scenario is decided, its remaining repeats are not
started; the summary over the runs that did run gives the same verdict as
all K would (`k` is cut to the runs present there: `p >= k` still holds, and
`p + e < k - r <= min(k, n)` keeps a failure a failure, not an error).

This is exact — no statistics, so no error rate to spend: the rule looks only
at counts that can no longer change, so stopping on it is valid under
optional stopping by construction. It is used only where the verdict is
counts alone: not with `score_at_least` (an analytic mean threshold, whose
mean moves with every run) nor under ablation (the arms are compared).
What the runs left out would have cost is saved; their scores are not
known, so the spread of a stopped stage rests on fewer runs.
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
