"""What changed against a baseline run: per-stage and per-criterion deltas.

`compare(current, baseline)` matches the two runs' (scenario, stage)
summaries (`results.summaries`: the k-of-n fold over repeats) and, inside
each stage, the criteria by id and kind. Every difference is a `Delta`:

- a regression (worse: a verdict no longer passed, a lower pass rate, a lower
  analytic mean or criterion score), an improvement (the reverse), or a
  change without a direction (failed <-> error, a new or vanished criterion);
- with repeats on both sides, whether it lies beyond the noise: the two 95%
  intervals the summaries carry (`stats.Spread`: the analytic mean, each
  criterion's score, and the pass rate over the repeats' verdicts) do not
  overlap. With one run on a side there is no interval: the noise is unknown,
  and the report says so instead of calling a single flip a regression
  beyond doubt.

A baseline of another suite is refused (`same_suite`); one that did not run
at the merge base of the change, or that cannot say, is said (`revision_notes`).
Nothing here changes the run's verdict or exit code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ci_evals.errors import UserError
from ci_evals.report import delta_text, score_text
from ci_evals.results.model import RunResult, StageResult
from ci_evals.results.stats import CriterionSummary, Spread, StageSummary, spread
from ci_evals.results.summary import summarize_run

Noise = Literal["beyond", "within", "unknown"]
Direction = Literal[-1, 0, 1]

STALE = "Stale baseline:"
NOT_RUN = "not run (skipped)"
# A criterion that ran, on a side whose every run of the stage was an error: its
# result is in the run, but an error is no verdict, so the summary leaves it out.
# Not "gone": it is there, and failed or passed for a reason the error says.
NOT_JUDGED = "not judged (the stage was an error)"

# Differences smaller than this are float noise in a mean, not a change.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Delta:
    """One difference between the baseline and this run."""

    scenario: str
    stage: str  # "3 plan-lab"
    what: str  # "verdict", "pass rate", "analytic mean", or "criterion ID (kind)"
    before: str
    after: str
    direction: Direction  # -1 a regression, +1 an improvement, 0 a change
    noise: Noise
    intervals: str = ""  # the two 95% intervals, when the noise was judged
    history: str = ""  # a criterion's pass rate on main (`report --history`: `flakes`)


@dataclass(frozen=True)
class StageRow:
    """A compared (scenario, stage): the baseline's and this run's facts side by side."""

    scenario: str
    stage: str
    before: str  # "passed 3/3"
    after: str
    mean_before: float | None
    mean_after: float | None
    cost_before: float | None  # mean per run, stage and reviewer
    cost_after: float | None
    # Under ablation, the score with / without the plugin and Δ ("1.00 / 0.50 (Δ +0.50)");
    # "" for a side that ran one arm.
    arms_before: str = ""
    arms_after: str = ""


@dataclass(frozen=True)
class Comparison:
    baseline: RunResult
    notes: tuple[str, ...]  # staleness, unknown identity, an unfinished baseline
    deltas: tuple[Delta, ...]
    rows: tuple[StageRow, ...]
    only_here: tuple[str, ...] = ()  # "acme 4 plan-chapter": not in the baseline
    only_baseline: tuple[str, ...] = ()  # in the baseline, and not served from fixtures here
    # This run is the baseline's own run re-graded (`run --base-run`, `grade`): no agent
    # ran, so every delta is the graders' (issue 36), not the agent's.
    regraded: bool = False

    # Criteria that fail in more runs than on the baseline (new ones that fail count).
    now_failing: int = 0

    @property
    def regressions(self) -> list[Delta]:
        return _ordered(d for d in self.deltas if d.direction < 0)

    @property
    def improvements(self) -> list[Delta]:
        return _ordered(d for d in self.deltas if d.direction > 0)

    @property
    def changes(self) -> list[Delta]:
        return [d for d in self.deltas if d.direction == 0]

    @property
    def unchanged(self) -> int:
        changed = {(d.scenario, d.stage) for d in self.deltas}
        return sum(1 for row in self.rows if (row.scenario, row.stage) not in changed)


@dataclass(frozen=True)
class NoBaseline:
    """`--baseline` was asked for and there is none to compare with: said, never hidden."""

    reason: str


_NOISE_ORDER = {"beyond": 0, "unknown": 1, "within": 2}


def _ordered(deltas: Iterable[Delta]) -> list[Delta]:
    """Beyond the noise first, then unknown, then within; stable otherwise."""
    return sorted(deltas, key=lambda d: _NOISE_ORDER[d.noise])


# ------------------------------------------------------------------ comparable at all?


def same_suite(current: RunResult, baseline: RunResult, *, baseline_file: Path) -> list[str]:
    """Refuse a baseline of another suite (`UserError`); a note when it cannot be told.

    Both files record `suite` (version 3 on): they must be equal. An older
    baseline does not: it must at least share a stage (number and name).
    """
    if current.suite is not None and baseline.suite is not None:
        if current.suite != baseline.suite:
            raise UserError(
                f"the baseline is a run of another suite: {baseline.suite.path} (plugin "
                f"{baseline.suite.plugin}), this run is of {current.suite.path} (plugin "
                f"{current.suite.plugin})",
                file=baseline_file,
                field="suite",
                hint="results.json says its suite in `suite`; pass a baseline of this suite",
            )
        return []
    ours = {(s.stage, s.name) for s in summaries(current)}
    if ours and not ours & {(s.stage, s.name) for s in summaries(baseline)}:
        raise UserError(
            "the baseline shares no stage (number and name) with this run: a run of another suite",
            file=baseline_file,
            field="scenarios",
            hint="results.json lists its stages under `scenarios[].stages`; pass a baseline "
            "of this suite",
        )
    which = "the baseline" if baseline.suite is None else "this run"
    return [
        f"{which} does not record its suite (a results file before version 3): compared by "
        "stage names"
    ]


def revision_notes(
    current: RunResult, baseline: RunResult, merge_base: str | None, why_unknown: str
) -> list[str]:
    """Whether the baseline ran at the merge base of this change, in words.

    `merge_base` is where a baseline of this change should have run (None:
    `why_unknown` says why it is not known).
    """
    notes: list[str] = []
    revision = baseline.revision
    if revision is None or revision.commit is None:
        notes.append(
            "the baseline records no commit (an older results file, or a run outside git): "
            "whether it is stale cannot be checked"
        )
    elif merge_base is None:
        notes.append(f"the baseline ran at {_short(revision.commit)}; {why_unknown}")
    elif revision.commit != merge_base:
        notes.append(
            f"{STALE} it ran at {_short(revision.commit)}, not at the merge base "
            f"{_short(merge_base)} of this change, so the deltas also hold what changed on "
            "the base branch in between"
        )
    if revision is not None and revision.dirty:
        notes.append(
            "the baseline ran with uncommitted changes to the suite, plugin or fixtures: "
            "its commit does not say what it evaluated"
        )
    if baseline.status != "completed":
        notes.append(f"the baseline run did not finish (status {baseline.status})")
    if is_stub(baseline) != is_stub(current):
        side = "the baseline" if is_stub(baseline) else "this run"
        notes.append(f"{side} ran on the stub model: its scores are a wiring check, not a model's")
    elif baseline.model != current.model:
        notes.append(
            f"the models differ: {baseline.model or 'default'} then, "
            f"{current.model or 'default'} now"
        )
    return notes


def is_stub(result: RunResult) -> bool:
    """The run's model was the stub: its scores and costs are a wiring check."""
    return result.model_endpoint.startswith("stub:")


def _short(commit: str) -> str:
    return commit[:12]


# ------------------------------------------------------------------ the deltas


def summaries(result: RunResult) -> list[StageSummary]:
    """The run's (scenario, stage) summaries; recomputed for a file that has none."""
    return list(result.summaries) or summarize_run(result, result.pass_at_least)


def stage_costs(result: RunResult) -> dict[tuple[str, int], float]:
    """Mean cost per run of each (scenario, stage) that ran with the plugin: the stage
    plus its reviewer (a run without it, under ablation, is not the stage's cost)."""
    return {
        key: sum(cost for cost, _ in runs) / len(runs) for key, runs in costed_runs(result).items()
    }


def costed_runs(result: RunResult) -> dict[tuple[str, int], list[tuple[float, StageResult]]]:
    """Each (scenario, stage)'s runs with the plugin that cost something (`stage_cost`),
    with that cost."""
    runs: dict[tuple[str, int], list[tuple[float, StageResult]]] = {}
    for scenario in result.scenarios:
        if scenario.arm == "without":
            continue
        for stage in scenario.stages:
            cost = stage_cost(stage)
            if cost is not None:
                runs.setdefault((scenario.id, stage.number), []).append((cost, stage))
    return runs


def stage_cost(stage: StageResult) -> float | None:
    """What one stage run cost (stage and reviewer), None when it did not run
    (skipped, or it never reached the model: no estimate should count it)."""
    if stage.status in ("pending", "skipped") or stage.cost_usd is None or not stage.model_ran:
        return None
    return stage.cost_usd + (stage.grading_cost_usd or 0.0)


def ran(result: RunResult) -> set[tuple[str, int]]:
    """The (scenario, stage) pairs that ran in at least one repeat (not all skipped)."""
    return {
        (scenario.id, stage.number)
        for scenario in result.scenarios
        for stage in scenario.stages
        if stage.status not in ("skipped", "pending") and scenario.arm == "with"
    }


def arms_text(summary: StageSummary) -> str:
    """`1.00 / 0.50 (Δ +0.50)`: the score with and without the plugin; "" for one arm."""
    arms = summary.arms
    if arms is None:
        return ""
    with_, without = score_text(arms.score), score_text(arms.score_without)
    return f"{with_} / {without} (Δ {delta_text(arms.delta)})"


def _arms_delta(scenario: str, stage: str, old: StageSummary, new: StageSummary) -> list[Delta]:
    """What the plugin adds (Δ, with - without) changed: larger is an improvement."""
    if old.arms is None or new.arms is None or old.arms.delta is None or new.arms.delta is None:
        return []
    direction = _sign(old.arms.delta, new.arms.delta)
    if not direction:
        return []
    return [
        Delta(
            scenario, stage, "with - without (Δ)", arms_text(old), arms_text(new), direction,
            "unknown",
        )
    ]  # fmt: skip


def _outcomes(summary: StageSummary) -> Spread:
    """The repeats' verdicts as 0/1 (1: passed): its mean is the pass rate, with an interval."""
    return spread([1.0 if v == "passed" else 0.0 for v in summary.summary.verdicts])


def _noise(before: Spread, after: Spread) -> tuple[Noise, str]:
    if before.ci95_low is None or after.ci95_low is None:
        return "unknown", ""
    assert before.ci95_high is not None and after.ci95_high is not None
    intervals = (
        f"95% intervals [{before.ci95_low:.2f}, {before.ci95_high:.2f}] and "
        f"[{after.ci95_low:.2f}, {after.ci95_high:.2f}]"
    )
    apart = before.ci95_high < after.ci95_low or after.ci95_high < before.ci95_low
    return ("beyond" if apart else "within"), intervals


def _sign(before: float, after: float) -> Direction:
    if after > before + _EPSILON:
        return 1
    if after < before - _EPSILON:
        return -1
    return 0


def _verdict_text(summary: StageSummary) -> str:
    s = summary.summary
    return f"{s.verdict} {s.passed}/{s.runs}"


def _stage_deltas(scenario: str, stage: str, old: StageSummary, new: StageSummary) -> list[Delta]:
    def delta(what: str, before: str, after: str, direction: Direction, between: tuple[Noise, str]
              ) -> Delta:  # fmt: skip
        return Delta(scenario, stage, what, before, after, direction, *between)

    deltas: list[Delta] = []
    a, b = old.summary, new.summary
    outcomes = _noise(_outcomes(old), _outcomes(new))
    was, now = _verdict_text(old), _verdict_text(new)
    if a.verdict != b.verdict:
        rank = {"passed": 1, "failed": 0, "error": 0}
        deltas.append(delta("verdict", was, now, _sign(rank[a.verdict], rank[b.verdict]), outcomes))
    elif direction := _sign(a.pass_rate, b.pass_rate):
        deltas.append(delta("pass rate", was, now, direction, outcomes))
    mean_a, mean_b = a.analytic_mean.mean, b.analytic_mean.mean
    if mean_a is not None and mean_b is not None and (direction := _sign(mean_a, mean_b)):
        between = _noise(a.analytic_mean, b.analytic_mean)
        deltas.append(delta("analytic mean", f"{mean_a:.2f}", f"{mean_b:.2f}", direction, between))
    unjudged_a, unjudged_b = bool(a.errors and not a.criteria), bool(b.errors and not b.criteria)
    for what, before, after, direction, between in _criterion_deltas(a.criteria, b.criteria):
        was = NOT_JUDGED if before == "-" and unjudged_a else before
        now = NOT_JUDGED if after == "-" and unjudged_b else after
        deltas.append(delta(what, was, now, direction, between))
    return deltas


def _criterion_text(c: CriterionSummary) -> str:
    passed = f"passed {c.passed}/{c.runs}"
    if c.kind == "analytic" and c.score.mean is not None:
        return f"{c.score.mean:.2f} ({passed})"
    return passed


_Change = tuple[str, str, str, Direction, tuple[Noise, str]]
_UNKNOWN: tuple[Noise, str] = ("unknown", "")


def _criterion_deltas(
    before: Sequence[CriterionSummary], after: Sequence[CriterionSummary]
) -> list[_Change]:
    """(what, before, after, direction, noise) for each criterion that changed, came or went."""
    old = {(c.id, c.kind): c for c in before}
    new = {(c.id, c.kind): c for c in after}
    changes: list[_Change] = []
    for key, c in new.items():
        what = f"criterion {c.id} ({c.kind})"
        was = old.get(key)
        if was is None:
            changes.append((what, "-", _criterion_text(c), 0, _UNKNOWN))
            continue
        direction = _sign(was.pass_rate, c.pass_rate)
        if not direction and was.score.mean is not None and c.score.mean is not None:
            direction = _sign(was.score.mean, c.score.mean)
        if direction:
            between = _noise(was.score, c.score)
            changes.append((what, _criterion_text(was), _criterion_text(c), direction, between))
    for key, c in old.items():
        if key not in new:
            changes.append((f"criterion {c.id} ({c.kind})", _criterion_text(c), "-", 0, _UNKNOWN))
    return changes


def _now_failing(old: StageSummary, new: StageSummary) -> int:
    """The stage's criteria that fail in more of its runs than on the baseline."""
    before = {(c.id, c.kind): c.runs - c.passed for c in old.summary.criteria}
    return sum(
        1
        for c in new.summary.criteria
        if c.runs - c.passed > 0 and c.runs - c.passed > before.get((c.id, c.kind), 0)
    )


def compare(current: RunResult, baseline: RunResult, notes: Sequence[str] = ()) -> Comparison:
    """Every difference between `baseline` and `current`, stage by stage."""
    old = {(s.scenario, s.stage): s for s in summaries(baseline)}
    new = {(s.scenario, s.stage): s for s in summaries(current)}
    old_costs, new_costs = stage_costs(baseline), stage_costs(current)
    old_ran, new_ran = ran(baseline), ran(current)
    deltas: list[Delta] = []
    rows: list[StageRow] = []
    only_here: list[str] = []
    now_failing = 0
    for key, now in new.items():
        label = f"{now.stage} {now.name}"
        was = old.get(key)
        if was is None or was.name != now.name:
            only_here.append(f"{now.scenario} {label}")
            continue
        if key in old_ran and key in new_ran:
            now_failing += _now_failing(was, now)
            deltas.extend(_stage_deltas(now.scenario, label, was, now))
            deltas.extend(_arms_delta(now.scenario, label, was, now))
        elif (key in old_ran) != (key in new_ran):
            # Skipped after an earlier stage did not pass: that stage is the change to
            # read; this one was not judged, so neither are its criteria.
            before = _verdict_text(was) if key in old_ran else NOT_RUN
            after = _verdict_text(now) if key in new_ran else NOT_RUN
            deltas.append(Delta(now.scenario, label, "verdict", before, after, 0, "unknown"))
        rows.append(
            StageRow(
                scenario=now.scenario,
                stage=label,
                before=_verdict_text(was) if key in old_ran else NOT_RUN,
                after=_verdict_text(now) if key in new_ran else NOT_RUN,
                mean_before=was.summary.analytic_mean.mean,
                mean_after=now.summary.analytic_mean.mean,
                cost_before=old_costs.get(key),
                cost_after=new_costs.get(key),
                arms_before=arms_text(was),
                arms_after=arms_text(now),
            )
        )
    # Stages before this run's first one were served from fixtures: not missing.
    only_baseline = [
        f"{was.scenario} {was.stage} {was.name}"
        for key, was in old.items()
        if key not in new and was.stage >= current.from_stage
    ]
    return Comparison(
        baseline=baseline,
        notes=tuple(notes),
        deltas=tuple(deltas),
        rows=tuple(rows),
        only_here=tuple(only_here),
        only_baseline=tuple(only_baseline),
        now_failing=now_failing,
        regraded=current.regraded_at is not None and current.run_id == baseline.run_id,
    )
