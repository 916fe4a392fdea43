"""A run's verdict per scenario and stage, over its repeats (k-of-n).

Every (scenario, stage) gets one `StageSummary` folding the stage's runs in
all repeats of the scenario with `stats.summarize_repeats`: mean, standard
deviation and pass rate per criterion, the analytic mean's 95% interval, and
the verdict under the suite's `pass_at_least` rule (default: every repeat),
or, for a run of cases with a threshold below 1.0 (`RunResult.score_at_least`),
under the mean run score's (`stats.mean_score_verdict`). With one repeat and
no threshold the summary is simply that run's verdict.

A run that reached no verdict still counts toward k-of-n:

| stage status | counts as |
|---|---|
| `passed` / `failed` / `error` with a verdict | that verdict |
| `completed` (the stage has no graders) | passed |
| `completed` but the stage has graders (never graded) | error |
| `limit` (turns, time, budget) | failed — a limit is the agent's failure |
| `error` from the agent, `skipped`, `pending`, `running` | error — nothing was judged |
| `error` with `endpoint_misses` (whatever its verdict) | error — the stub script did not answer |

The run passes (exit 0) when every summary passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ci_evals.results import DEFAULT_ANALYTIC_THRESHOLD, NOT_GRADED
from ci_evals.results.criteria import StageVerdict, Verdict
from ci_evals.results.model import RunResult, StageResult
from ci_evals.results.stats import RepeatSummary, StageSummary, compare_arms, summarize_repeats

# How a without-arm's stage that cannot run without the plugin is recorded: `skipped`,
# its error this and the reason (`suite.ablation.unrunnable` words it).
SINGLE_ARM = "single-arm: "


def stage_verdict(result: StageResult, *, after_agent: bool = False) -> StageVerdict:
    """The stage's recorded verdict, or one standing in for a run without a verdict.

    `after_agent`: an earlier stage's agent worked in this stage's workspace (the
    stage is not the first the run ran in it). A stage of such a workspace that
    never reached the model is then `failed`, not an error: what stopped the CLI
    (a `!`git ...`` expansion that finds no repository) may be that agent's work
    — it can delete or corrupt the workspace's `.git` — and an error would take
    the run out of the k-of-n count ("not a verdict on the agent").
    """
    stub_missed = result.status == "error" and bool(result.endpoint_misses)
    if (
        result.grading is not None
        and result.status in ("passed", "failed", "error")
        and not stub_missed  # graded on answers nobody scripted: its verdict says nothing
    ):
        return result.grading
    kind: Verdict
    if stub_missed:
        kind, reason = "error", result.error or "the stub model had no scripted answer"
    elif result.status == "completed" and result.graded:
        kind, reason = "error", NOT_GRADED
    elif result.status == "completed":
        kind, reason = "passed", "completed (no graders)"
    elif result.status == "limit":
        kind, reason = "failed", f"hit its {result.limit_hit} limit"
    elif result.status == "error" and not result.model_ran and after_agent:
        kind = "failed"
        reason = f"in the workspace the stages before left: {result.error or 'no verdict'}"
    else:
        kind, reason = "error", f"{result.status}: {result.error or 'no verdict'}"
    return StageVerdict(
        verdict=kind,
        reason=reason,
        graders=(),
        checklist_all_passed=None,
        analytic_mean=None,
        analytic_threshold=DEFAULT_ANALYTIC_THRESHOLD,
        binary_score=None,
        error=reason if kind == "error" else None,
    )


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
