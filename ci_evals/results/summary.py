"""A run's verdict per scenario and stage, over its repeats (k-of-n).

Every (scenario, stage) gets one `StageSummary` folding the stage's runs in
all repeats of the scenario with `stats.summarize_repeats`: mean, standard
deviation and pass rate per criterion, the analytic mean's 95% interval, and
the verdict under the suite's `pass_at_least` rule (default: every repeat),
or, for a run of cases with a threshold below 1.0 (`RunResult.score_at_least`),
under the mean run score's (`stats.mean_score_verdict`). With one repeat and
no threshold the summary is simply that run's verdict.

A stage that reached no verdict still counts toward k-of-n, as what
`verdict.stage_verdict` says.

The run passes (exit 0) when every summary passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ci_evals.results.criteria import StageVerdict
from ci_evals.results.model import RunResult, StageResult
from ci_evals.results.stats import RepeatSummary, StageSummary, compare_arms, summarize_repeats
from ci_evals.results.verdict import stage_verdict

# How a without-arm's stage that cannot run without the plugin is recorded: `skipped`,
# its error this and the reason (`suite.ablation.unrunnable` words it).
SINGLE_ARM = "single-arm: "


@dataclass
class _Arms:
    name: str
    with_arm: list[StageVerdict] = field(default_factory=list)
    without_arm: list[StageVerdict] = field(default_factory=list)
    single_arm: str | None = None  # why the without-arm did not run this stage


def summarize_run(result: RunResult, pass_at_least: int | None) -> list[StageSummary]:
    """One summary per (scenario, stage), in the order they first appear. The verdict
    is the with-arm's alone; under `ablation: with-without` the without-arm's runs are
    summarised beside it and the arms compared (`stats.compare_arms`)."""
    grouped: dict[tuple[str, int], _Arms] = {}
    for scenario in sorted(result.scenarios, key=lambda s: s.repeat):
        for stage in scenario.stages:
            arms = grouped.setdefault((scenario.id, stage.number), _Arms(stage.name))
            if scenario.arm == "without" and (reason := single_arm(stage)) is not None:
                arms.single_arm = reason
                continue
            verdict = stage_verdict(stage, after_agent=stage.number > result.from_stage)
            (arms.with_arm if scenario.arm == "with" else arms.without_arm).append(verdict)
    summaries = []
    for (scenario_id, number), arms in grouped.items():
        if not arms.with_arm:  # only a without-arm: no verdict (consistency says so)
            continue
        summary = _summarize(arms.with_arm, pass_at_least, result.score_at_least)
        compared = None
        if result.ablation == "with-without":
            without = None
            if arms.without_arm:
                without = _summarize(arms.without_arm, pass_at_least, result.score_at_least)
            compared = compare_arms(
                arms.with_arm, arms.without_arm or None, without, arms.single_arm
            )
        summaries.append(
            StageSummary(
                scenario=scenario_id, stage=number, name=arms.name, summary=summary, arms=compared
            )
        )
    return summaries


def _summarize(
    verdicts: list[StageVerdict], pass_at_least: int | None, score_at_least: float | None
) -> RepeatSummary:
    k = None if pass_at_least is None else min(pass_at_least, len(verdicts))
    return summarize_repeats(verdicts, k, score_at_least=score_at_least)


def single_arm(stage: StageResult) -> str | None:
    """Why a without-arm's stage did not run (`SINGLE_ARM` in its error), or None."""
    error = stage.error or ""
    if stage.status != "skipped" or not error.startswith(SINGLE_ARM):
        return None
    return error.removeprefix(SINGLE_ARM)


def mean_delta(summaries: Sequence[StageSummary]) -> float | None:
    """`claude plugin eval`'s `meanDelta`: the mean of the deltas there are."""
    deltas = [s.arms.delta for s in summaries if s.arms is not None and s.arms.delta is not None]
    return sum(deltas) / len(deltas) if deltas else None


def all_passed(summaries: Sequence[StageSummary]) -> bool:
    return all(s.summary.verdict == "passed" for s in summaries)


def exit_code(result: RunResult) -> int:
    """The one verdict rule of `run`, `grade` and `report`: 0 or 1 (130 is the
    command's own, on interrupt).

    0 only when the run finished (`completed`), recorded at least one stage, and
    every (scenario, stage) passed — under the k-of-n rule of repeats when the
    run has summaries, else every stage `passed` or `completed` (no graders).
    Whether the file agrees with itself is `ci_evals.report.verify`'s question.
    An interrupted or unfinished run never passes, even when every stage it
    recorded did.
    """
    stages = [stage for scenario in result.scenarios for stage in scenario.stages]
    if result.status != "completed" or not stages:
        return 1
    if result.summaries:
        return 0 if all_passed(result.summaries) else 1
    return 0 if all(stage_verdict(stage).verdict == "passed" for stage in stages) else 1


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def repeat_table(summaries: Sequence[StageSummary]) -> str:
    """The repeats table printed after a run with `--repeat K` (K > 1): per stage the
    k-of-n verdict, the analytic mean with its 95% interval, the binary score;
    under it, per criterion the mean, standard deviation and pass rate."""
    rows: list[tuple[str, ...]] = [
        ("scenario", "stage", "verdict", "passed", "analytic mean", "95% CI", "stdev", "binary")
    ]
    detail: dict[int, list[str]] = {}
    for summary in summaries:
        s = summary.summary
        mean = s.analytic_mean
        ci = "-" if mean.ci95_low is None else f"[{mean.ci95_low:.2f}, {mean.ci95_high:.2f}]"
        rows.append(
            (
                summary.scenario,
                f"{summary.stage} {summary.name}",
                s.verdict,
                f"{s.passed}/{s.runs} (need {s.pass_at_least})",
                _number(mean.mean),
                ci,
                _number(mean.stdev),
                _number(s.binary_score.mean, 1),
            )
        )
        lines = []
        for c in s.criteria:
            flaky = "  flaky" if c.flaky else ""
            lines.append(
                f"    {c.id} ({c.kind}): mean {_number(c.score.mean)} stdev "
                f"{_number(c.score.stdev)} passed {c.passed}/{c.runs}{flaky}"
            )
        detail[len(rows) - 1] = lines
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for index, row in enumerate(rows):
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
        out.extend(detail.get(index, []))
    return "\n".join(out)
