"""A run's verdict per scenario and stage, over its repeats (k-of-n).

Every (scenario, stage) gets one `StageSummary` folding the stage's runs in
all repeats of the scenario with `stats.summarize_repeats`: mean, standard
deviation and pass rate per criterion, the analytic mean's 95% interval, and
the verdict under the suite's `pass_at_least` rule (default: every repeat).
With one repeat the summary is simply that run's verdict.

A run that reached no verdict still counts toward k-of-n:

| stage status | counts as |
|---|---|
| `passed` / `failed` / `error` with a verdict | that verdict |
| `completed` (the stage has no graders) | passed |
| `limit` (turns, time, budget) | failed — a limit is the agent's failure |
| `error` from the agent, `skipped`, `pending`, `running` | error — nothing was judged |

The run passes (exit 0) when every summary passed.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ci_evals.grading.criteria import StageVerdict, Verdict
from ci_evals.grading.scoring import DEFAULT_ANALYTIC_THRESHOLD
from ci_evals.grading.stats import RepeatSummary, summarize_repeats
from ci_evals.results import RunResult, StageResult


class StageSummary(BaseModel):
    """One stage of one scenario over its repeats."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    stage: int
    name: str
    summary: RepeatSummary


def stage_verdict(result: StageResult) -> StageVerdict:
    """The stage's recorded verdict, or one standing in for a run without a verdict."""
    if result.grading is not None and result.status in ("passed", "failed", "error"):
        grading = result.grading
        return (
            grading if isinstance(grading, StageVerdict) else StageVerdict.model_validate(grading)
        )
    kind: Verdict
    if result.status == "completed":
        kind, reason = "passed", "completed (no graders)"
    elif result.status == "limit":
        kind, reason = "failed", f"hit its {result.limit_hit} limit"
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


def summarize_run(result: RunResult, pass_at_least: int | None) -> list[StageSummary]:
    """One summary per (scenario, stage), in the order they first appear."""
    grouped: dict[tuple[str, int], tuple[str, list[StageVerdict]]] = {}
    for scenario in sorted(result.scenarios, key=lambda s: s.repeat):
        for stage in scenario.stages:
            key = (scenario.id, stage.number)
            grouped.setdefault(key, (stage.name, []))[1].append(stage_verdict(stage))
    summaries = []
    for (scenario_id, number), (name, verdicts) in grouped.items():
        k = None if pass_at_least is None else min(pass_at_least, len(verdicts))
        summaries.append(
            StageSummary(
                scenario=scenario_id,
                stage=number,
                name=name,
                summary=summarize_repeats(verdicts, k),
            )
        )
    return summaries


def all_passed(summaries: Sequence[StageSummary]) -> bool:
    return all(s.summary.verdict == "passed" for s in summaries)
