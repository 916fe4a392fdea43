"""Repeats: how stable is a verdict? Mean, spread, a 95% interval, and k-of-n.

One run of an agent is one sample. With `--repeat K` each scenario runs K
times; `summarize_repeats` folds the K stage verdicts into one summary: per
stage and per criterion the mean, the sample standard deviation, the pass
rate, and for the analytic mean a 95% confidence interval (Student's t, since
K is small). The stage passes when at least `pass_at_least` runs passed.

Runs whose verdict is `error` count toward the k-of-n rule as "not passed",
and are left out of the score statistics (their scores are not trustworthy).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from ci_evals.errors import UserError
from ci_evals.results.criteria import CriterionKind, FrozenRecord, StageVerdict, Verdict

# Two-sided 95% (the 0.975 quantile) of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom.

    A table up to 30; beyond, the Cornish-Fisher expansion around the normal
    quantile (error < 1e-4 from df 30 on).
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


class Spread(FrozenRecord):
    """Statistics of one number over repeats. Fields are None where undefined."""

    n: int
    mean: float | None = None
    stdev: float | None = None  # sample standard deviation (n - 1); needs n >= 2
    ci95_low: float | None = None  # mean -/+ t(0.975, n-1) * stdev / sqrt(n)
    ci95_high: float | None = None


def spread(values: Sequence[float]) -> Spread:
    n = len(values)
    if n == 0:
        return Spread(n=0)
    mean = statistics.fmean(values)
    if n == 1:
        return Spread(n=1, mean=mean)
    stdev = statistics.stdev(values)
    half = t_quantile_975(n - 1) * stdev / math.sqrt(n)
    return Spread(n=n, mean=mean, stdev=stdev, ci95_low=mean - half, ci95_high=mean + half)


class CriterionSummary(FrozenRecord):
    id: str
    kind: CriterionKind
    runs: int  # how many repeats scored this criterion
    passed: int
    pass_rate: float
    # Passed in some runs and failed in others: a verdict that rests on it is luck.
    flaky: bool
    score: Spread


class RepeatSummary(FrozenRecord):
    """A stage over its repeats, and its verdict under the k-of-n rule."""

    verdict: Verdict
    reason: str
    runs: int
    passed: int
    failed: int
    errors: int
    pass_at_least: int
    pass_rate: float
    analytic_mean: Spread
    binary_score: Spread
    criteria: tuple[CriterionSummary, ...]
    verdicts: tuple[Literal["passed", "failed", "error"], ...]
    # The mean-score rule's threshold when it decided the verdict (None: k-of-n).
    score_at_least: float | None = None


class ArmsSummary(FrozenRecord):
    """A stage with and without the plugin (`ablation: with-without`), as `claude plugin
    eval --ablation with-without` compares a case: each arm's score is the mean of its
    runs' scores (binary score / 100), `delta` = score - score_without. The verdict is
    the with-arm's (`StageSummary.summary`) alone."""

    score: float | None = None  # None: no run of the with-arm has a score
    score_without: float | None = None
    delta: float | None = None  # None: see `note`
    # Why there is no delta: the stage ran single-arm (`single_arm`), or a run of
    # either arm ended in error (a run without a score is no measure of the plugin).
    note: str | None = None
    single_arm: str | None = None  # why it ran with the plugin only
    without: RepeatSummary | None = None  # the without-arm's runs (None: single-arm)


class StageSummary(FrozenRecord):
    """One stage of one scenario over its repeats (what `results.json` keeps)."""

    scenario: str
    stage: int
    name: str
    summary: RepeatSummary
    # With `ablation: with-without`: the arms compared; None: a run of one arm.
    arms: ArmsSummary | None = None


def summarize_repeats(
    verdicts: Sequence[StageVerdict],
    pass_at_least: int | None = None,
    *,
    score_at_least: float | None = None,
) -> RepeatSummary:
    """Fold the verdicts of one stage's repeats. `pass_at_least` None means all must pass;
    `score_at_least` replaces that rule by the mean run score's (`mean_score_verdict`)."""
    runs = len(verdicts)
    if runs == 0:
        raise ValueError("summarize_repeats needs at least one verdict")
    k = runs if pass_at_least is None else pass_at_least
    if not 1 <= k <= runs:
        raise UserError(
            f"pass_at_least is {k} but the stage ran {runs} time(s)",
            field="pass_at_least",
            hint="raise --repeat or lower pass_at_least",
        )
    outcomes = tuple(v.verdict for v in verdicts)
    passed = outcomes.count("passed")
    errors = outcomes.count("error")
    failed = outcomes.count("failed")
    if passed >= k:
        verdict: Verdict = "passed"
        reason = f"{passed} of {runs} runs passed (needs {k})"
    elif passed + errors >= k:
        # The errored runs could have made the difference: not a verdict on the agent.
        verdict = "error"
        reason = f"{passed} of {runs} runs passed (needs {k}); {errors} ended in error"
    else:
        verdict = "failed"
        reason = f"{passed} of {runs} runs passed (needs {k})"
    if score_at_least is not None:
        verdict, reason = mean_score_verdict(verdicts, score_at_least)
    judged = [v for v in verdicts if v.verdict != "error"]
    return RepeatSummary(
        verdict=verdict,
        reason=reason,
        runs=runs,
        passed=passed,
        failed=failed,
        errors=errors,
        pass_at_least=k,
        pass_rate=passed / runs,
        analytic_mean=spread([v.analytic_mean for v in judged if v.analytic_mean is not None]),
        binary_score=spread([v.binary_score for v in judged if v.binary_score is not None]),
        criteria=_per_criterion(judged),
        verdicts=outcomes,
        score_at_least=score_at_least,
    )


# A mean within this of the threshold is at it: the CLI sums the same scores as
# floats in another order (its run score is a share of weights, ours a percentage).
_SCORE_TOLERANCE = 1e-9


def mean_score_verdict(verdicts: Sequence[StageVerdict], threshold: float) -> tuple[Verdict, str]:
    """`claude plugin eval --threshold T`: the mean of the runs' scores (binary score
    / 100; a failed run without one, such as a limit, scores 0) is at least T.

    A run in error has no score: it is counted 0 and then 1. Passed when even at 0
    the mean reaches T; `error` when only its score could decide, or when no run
    has a score (fail closed: not a verdict on the plugin); failed when even at 1
    it does not.
    """
    known: list[float] = []
    errors = 0
    for verdict in verdicts:
        if verdict.verdict == "error":
            errors += 1
        elif verdict.binary_score is not None:
            known.append(verdict.binary_score / 100)
        else:
            known.append(1.0 if verdict.verdict == "passed" else 0.0)
    runs = len(verdicts)
    low = sum(known) / runs
    high = (sum(known) + errors) / runs
    reason = f"mean score {low:.2f} over {runs} run(s) (needs {threshold:g})"
    if errors == runs:
        return "error", f"no run has a score: all {runs} ended in error"
    if low >= threshold - _SCORE_TOLERANCE:
        return "passed", reason
    if high >= threshold - _SCORE_TOLERANCE:
        return "error", f"{reason}; {errors} ended in error, which could reach it"
    return "failed", reason


def run_score(verdict: StageVerdict) -> float | None:
    """A run's score as `claude plugin eval` computes it (the weighted share of its
    scored graders that passed: binary score / 100); a failed run without one (a
    limit) scores 0; None for a run in error, which has none."""
    if verdict.verdict == "error":
        return None
    if verdict.binary_score is not None:
        return verdict.binary_score / 100
    return 1.0 if verdict.verdict == "passed" else 0.0


def compare_arms(
    with_arm: Sequence[StageVerdict],
    without_arm: Sequence[StageVerdict] | None,
    without: RepeatSummary | None,
    single_arm: str | None = None,
) -> ArmsSummary:
    """The arms of one stage: each arm's mean run score and their difference.

    No delta when the stage ran single-arm, or when a run of either arm has no score
    (it ended in error: the CLI counts such a run 0 and withholds the delta too)."""
    score, missing = _arm_score(with_arm)
    if without_arm is None:
        said = f"single-arm: {single_arm}" if single_arm else "single-arm"
        return ArmsSummary(score=score, note=said, single_arm=single_arm)
    score_without, missing_without = _arm_score(without_arm)
    note: str | None = None
    if missing or missing_without:
        note = f"no delta: {missing + missing_without} run(s) ended in error"
    delta = None
    if note is None and score is not None and score_without is not None:
        delta = score - score_without
    return ArmsSummary(
        score=score, score_without=score_without, delta=delta, note=note, without=without
    )


def _arm_score(verdicts: Sequence[StageVerdict]) -> tuple[float | None, int]:
    """The mean of the runs' scores that exist, and how many runs have none."""
    scores = [run_score(v) for v in verdicts]
    known = [s for s in scores if s is not None]
    return (sum(known) / len(known) if known else None), len(scores) - len(known)


def _per_criterion(verdicts: Sequence[StageVerdict]) -> tuple[CriterionSummary, ...]:
    # Keyed by source and exact id: reviewer ids are already stored in the
    # rubric's spelling, and check ids such as `files:research/company.md` and
    # `headings:research/company.md` must stay two criteria (normalising them
    # to a file stem merged them into one, with doubled counts).
    order: list[tuple[str, str]] = []
    grouped: dict[tuple[str, str], list[tuple[str, CriterionKind, float | None, bool]]] = {}
    for verdict in verdicts:
        for c in verdict.criteria:
            key: tuple[str, str] = (c.source, c.id)
            if key not in grouped:
                order.append(key)
                grouped[key] = []
            grouped[key].append((c.id, c.kind, c.score, c.passed))
    summaries = []
    for group in order:
        rows = grouped[group]
        passed = sum(1 for row in rows if row[3])
        summaries.append(
            CriterionSummary(
                id=rows[0][0],
                kind=rows[0][1],
                runs=len(rows),
                passed=passed,
                pass_rate=passed / len(rows),
                flaky=0 < passed < len(rows),
                score=spread([row[2] for row in rows if row[2] is not None]),
            )
        )
    return tuple(summaries)
