"""The site's pages: the run (`index.html`) and one page per stage run.

The index gives the verdict as `report`'s exit code gives it (`run_passed`:
an inconsistent, unfinished or failed run never reads as passed), the run's
facts, a table per scenario run linking each stage's page, the stages over
their repeats (pass counts, the mean and its 95% interval, per criterion)
and, with a baseline, the deltas against it. A stage page has its status and
reason, its criteria with the reviewer's rationale, grader errors, the
requests the stub (or the replay) had no answer for, the files it produced, its trajectory
and the reviewer's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.report import (
    arms_rows,
    delta_text,
    endpoint_miss_lines,
    grader_errors,
    outcome,
    reason,
    run_passed,
    scenario_label,
    scenario_outcomes,
    stage_label,
    status_word,
    without_note,
)
from ci_evals.report.baseline import Comparison, NoBaseline
from ci_evals.report.html.files import DiffBudget, StateRef, files_section, state_of
from ci_evals.report.html.markup import (
    clipped_pre,
    esc,
    fold,
    moment,
    money,
    seconds,
    status,
    table,
)
from ci_evals.report.html.timeline import TimelineCaps, opening, timeline
from ci_evals.results import MISSED_BY, miss_source

if TYPE_CHECKING:
    from ci_evals.results.criteria import Criterion
    from ci_evals.results.model import RunResult, ScenarioResult, StageResult
    from ci_evals.results.stats import Spread


@dataclass(frozen=True)
class Site:
    """What the site is made from."""

    result: RunResult
    run_dir: Path  # the run folder the results file was read from
    problems: Sequence[str]  # `verify.problems` of the results file
    comparison: Comparison | NoBaseline | None = None  # with `--baseline`
    baseline_dir: Path | None = None  # the baseline's run folder, when it is one
    limits: TimelineCaps = field(default_factory=TimelineCaps)
    diffs: DiffBudget = field(default_factory=DiffBudget)  # every page's diffs draw on it


def stage_page_name(scenario_index: int, stage: StageResult) -> str:
    """Our own file name for a stage's page: numbers only, nothing from the results."""
    return f"stage-{scenario_index + 1}-{stage.number}.html"


def index_body(site: Site) -> Iterator[str]:
    result, problems, comparison = site.result, site.problems, site.comparison
    passed = run_passed(result, problems)
    verdict = "passed" if passed else ("error" if problems else "failed")
    yield f"<h1>ci-evals run {esc(result.run_id)}: {status(verdict)}</h1>"
    yield _tally(result)
    if problems:
        items = "".join(f"<li>{esc(p)}</li>" for p in problems)
        yield (
            '<div class="note"><p><b>The results file disagrees with itself</b>: nothing in it '
            f"can be believed, and the run does not pass.</p><ul>{items}</ul></div>"
        )
    facts = [
        # The run's own status says it finished, not that it passed: never green
        # beside a verdict that is not.
        (
            "run",
            status(result.status, "muted" if result.status == "completed" and not passed else None),
        ),
        ("model asked for", esc(result.model or "the CLI's default")),
        ("model used", esc(_models_used(site))),
        ("endpoint", esc(result.model_endpoint)),
        *_replayed_from(result),
        ("sandbox", esc(result.sandbox)),
        ("from stage", esc(result.from_stage)),
        ("total cost", esc(money(result.total_cost_usd) + result.cost_note)),
        ("started", esc(moment(result.started_at))),
        ("finished", esc(moment(result.finished_at))),
    ]
    if result.repeats_text:
        facts.append(("repeats", esc(result.repeats_text)))
    yield table(["fact", "value"], [[esc(k), v] for k, v in facts])
    for index, scenario in enumerate(result.scenarios):
        yield f"<h2>Scenario {esc(scenario_label(result, scenario))}</h2>"
        yield _scenario_table(result, index, scenario)
    if result.repeated:
        yield from _repeats(result)
    yield from _arms(result)
    if comparison is not None:
        yield from _comparison(comparison)


def _tally(result: RunResult) -> str:
    """ "8 of 10 stages passed": the run's stages with the plugin (a run without it is
    compared, never counted), and what the others did."""
    kinds: list[str] = [
        kind
        for scenario in result.scenarios
        if scenario.arm != "without"
        for _, kind in scenario_outcomes(result, scenario)
    ]
    passed = kinds.count("passed")
    rest = [
        f"{kinds.count(kind)} {word}"
        for kind, word in (("failure", "failed"), ("error", "in error"), ("skipped", "skipped"))
        if kinds.count(kind)
    ]
    tail = f" ({', '.join(rest)})" if rest else ""
    css = "passed" if kinds and passed == len(kinds) else "failed"
    return f'<p class="tally {css}">{passed} of {len(kinds)} stages passed{esc(tail)}</p>'


def _models_used(site: Site) -> str:
    """The models the CLI said it ran (each trajectory's init message), in order."""
    found: dict[str, None] = {}
    for scenario in site.result.scenarios:
        for stage in scenario.stages:
            model = opening(site.run_dir, stage.trajectory, site.limits).model
            if model:
                found[model] = None
    return ", ".join(found) or "not recorded"


def _replayed_from(result: RunResult) -> list[tuple[str, str]]:
    """A replay's recording among the facts: what answered it, which model, when."""
    recorded = result.replayed_from
    if recorded is None:
        return []
    day = recorded.recorded_on.isoformat() if recorded.recorded_on else "unknown"
    return [
        ("recorded from", esc(recorded.origin)),
        ("recorded model", esc(recorded.model or "the CLI's default")),
        ("recorded on", esc(day)),
    ]


def _scenario_table(result: RunResult, index: int, scenario: ScenarioResult) -> str:
    rows = []
    for stage, kind in scenario_outcomes(result, scenario):  # without the plugin: muted
        grading = stage.grading
        counted = [c for c in grading.criteria if not c.advisory] if grading else []
        criteria = f"{sum(c.passed for c in counted)}/{len(counted)}" if grading else "-"
        mean = grading.analytic_mean if grading else None
        link = f'<a href="{stage_page_name(index, stage)}">{esc(stage_label(stage))}</a>'
        rows.append(
            [
                link,
                status(status_word(stage), kind),
                esc(criteria),
                esc("-" if mean is None else f"{mean:.2f}"),
                esc("-" if stage.turns is None else stage.turns),
                esc(money(stage.cost_usd)),
                esc(seconds(stage.duration_s)),
                esc(len(stage.produced)),
                esc(reason(result, stage)),
            ]
        )
    head = ["stage", "status", "criteria", "mean", "turns", "cost", "time", "files", "reason"]
    return table(head, rows, wide=8)


def _arms(result: RunResult) -> Iterator[str]:
    """`ablation: with-without`: each stage's score with and without the plugin, and Δ."""
    rows = arms_rows(result)
    if not rows:
        return
    yield "<h2>With and without the plugin</h2>"
    yield (
        f"<p>Mean Δ {esc(delta_text(result.mean_delta))} (score with - score without). "
        "The verdict is the run with the plugin's; the run without it is compared, "
        "never a verdict.</p>"
    )
    head = ["scenario", "stage", "with", "without", "Δ", "note"]
    yield table(head, [[esc(cell) for cell in row] for row in rows], wide=5)


def _spread(value: Spread) -> str:
    if value.mean is None:
        return "-"
    if value.ci95_low is None or value.ci95_high is None:
        return f"{value.mean:.2f} (n={value.n})"
    return f"{value.mean:.2f} [{value.ci95_low:.2f}, {value.ci95_high:.2f}] (n={value.n})"


def _repeats(result: RunResult) -> Iterator[str]:
    yield "<h2>Over the repeats</h2>"
    for item in result.summaries:
        s = item.summary
        title = f"{esc(item.scenario)} · {esc(item.stage)} {esc(item.name)}"
        yield f"<h3>{title}: {status(s.verdict)}</h3>"
        runs = " ".join(status(v) for v in s.verdicts)
        yield (
            f"<p>{esc(s.passed)} of {esc(s.runs)} passed (at least {esc(s.pass_at_least)} "
            f"needed); runs: {runs}. Analytic mean {esc(_spread(s.analytic_mean))}; "
            f"binary score {esc(_spread(s.binary_score))}. {esc(s.reason)}</p>"
        )
        rows = [
            [
                f"<code>{esc(c.id)}</code>",
                esc(c.kind),
                esc(f"{c.passed}/{c.runs}"),
                esc("flaky" if c.flaky else ""),
                esc(_spread(c.score)),
            ]
            for c in s.criteria
        ]
        if rows:
            yield table(["criterion", "kind", "passed", "", "score, mean [95% CI]"], rows)


def _comparison(comparison: Comparison | NoBaseline) -> Iterator[str]:
    yield "<h2>Against the baseline</h2>"
    if isinstance(comparison, NoBaseline):
        yield f'<p class="muted">No baseline: {esc(comparison.reason)}</p>'
        return
    for note in comparison.notes:
        yield f'<p class="note">{esc(note)}</p>'
    for title, deltas in (
        ("Regressions", comparison.regressions),
        ("Improvements", comparison.improvements),
        ("Other changes", comparison.changes),
    ):
        if not deltas:
            continue
        yield f"<h3>{esc(title)}</h3>"
        rows = [
            [
                esc(d.scenario),
                esc(d.stage),
                esc(d.what),
                esc(d.before),
                esc(d.after),
                esc(f"{d.noise} {d.intervals}".strip()),
            ]
            for d in deltas
        ]
        yield table(["scenario", "stage", "what", "baseline", "this run", "noise"], rows, wide=5)
    rows = [
        [
            esc(r.scenario),
            esc(r.stage),
            esc(r.before),
            esc(r.after),
            esc(money(r.cost_before)),
            esc(money(r.cost_after)),
            esc(r.arms_before or "-"),
            esc(r.arms_after or "-"),
        ]
        for r in comparison.rows
    ]
    yield "<h3>Per stage</h3>"
    head = ["scenario", "stage", "baseline", "this run", "cost before", "cost now"]
    head += ["with / without (Δ) before", "with / without (Δ) now"]
    yield table(head, rows)
    yield f'<p class="muted">{esc(comparison.unchanged)} stage(s) unchanged.</p>'


def stage_body(
    site: Site,
    scenario: ScenarioResult,
    stage: StageResult,
    *,
    before: StageResult | None,
    baseline: StageResult | None,
) -> Iterator[str]:
    """`before`: the stage whose saved state this one started from; `baseline`: the
    baseline run's same stage, when the baseline is a run folder."""
    result, run_dir, limits = site.result, site.run_dir, site.limits
    label = f"{scenario_label(result, scenario)} · {stage_label(stage)}"
    kind = "skipped" if scenario.arm == "without" else outcome(result, stage)  # never a verdict
    yield f"<h1>{esc(label)}: {status(status_word(stage), kind)}</h1>"
    if scenario.arm == "without":
        yield f'<p class="muted">{esc(without_note(stage))}</p>'
    why = reason(result, stage)
    if why:
        yield f'<p class="note">{esc(why)}</p>'
    told = opening(run_dir, stage.trajectory, limits)
    facts = [
        ("model used", told.model or "not recorded"),
        ("turns", stage.turns),
        ("tokens in / out", f"{stage.input_tokens or 0:,} / {stage.output_tokens or 0:,}"),
        ("cost", money(stage.cost_usd)),
        ("reviewer cost", money(stage.grading_cost_usd)),
        ("time", seconds(stage.duration_s)),
        ("limit hit", stage.limit_hit or "-"),
        ("attempts", stage.attempts or 1),
    ]
    yield table(["fact", "value"], [[esc(k), esc(v)] for k, v in facts])
    yield "<h2>Prompt</h2>"
    if told.prompt is None:
        yield '<p class="muted">Not recorded in the trajectory (a run before ci-evals kept it).</p>'
    else:
        yield clipped_pre(told.prompt, limits.text_chars)
    if stage.endpoint_misses:
        items = "".join(f"<li>{esc(line)}</li>" for line in endpoint_miss_lines(stage))
        title = f"Requests {MISSED_BY[miss_source(stage.endpoint_misses)]} had no answer for"
        yield f"<h2>{title}</h2><ul>{items}</ul>"
    if stage.plugin_changes:
        yield from _plugin_changes(stage)
    yield "<h2>Grading</h2>"
    yield from _grading(stage, told=why)
    yield "<h2>Files</h2>"
    here = state_of(run_dir, stage)
    earlier = state_of(run_dir, before) if before is not None else None
    theirs: StateRef | None = None
    if baseline is not None and site.baseline_dir is not None:
        theirs = state_of(site.baseline_dir, baseline)
    yield files_section(stage, here, earlier, theirs, site.diffs)
    yield "<h2>Trajectory</h2>"
    yield from timeline(run_dir, stage.trajectory, limits)
    for grader in stage.grading.graders if stage.grading else ():
        if grader.trajectory:
            yield f"<h2>The {esc(grader.grader)}'s trajectory</h2>"
            yield "<details><summary>show</summary>"
            yield from timeline(run_dir, grader.trajectory, limits)
            yield "</details>"


def _plugin_changes(stage: StageResult) -> Iterator[str]:
    """The files the stage wrote into the plugin copy: no saved state holds them."""
    yield "<h2>Written into the plugin copy</h2>"
    yield (
        '<p class="note">Not in the workspace, so no grader saw them; later stages and '
        "reviewers of this scenario load the changed plugin. A workspace folder named like "
        "a plugin folder (agents, skills, docs, ...) is a link into the plugin copy: write "
        "elsewhere, or make the fixture hold that folder.</p>"
    )
    rows = [
        [esc(c.path), esc(c.change), esc(c.size), esc(c.sha256[:12])] for c in stage.plugin_changes
    ]
    yield table(["path in the plugin copy", "change", "bytes", "sha256"], rows)


def _grading(stage: StageResult, *, told: str) -> Iterator[str]:
    """`told`: the reason the page already gave under its title (not said twice)."""
    verdict = stage.grading
    if verdict is None:
        yield '<p class="muted">Not graded.</p>'
        return
    mean = "-" if verdict.analytic_mean is None else f"{verdict.analytic_mean:.2f}"
    said = "" if verdict.reason in told else f"{esc(verdict.reason)} · "
    yield (
        f"<p>{status(verdict.verdict)} {said}analytic mean {esc(mean)} "
        f"(threshold {esc(verdict.analytic_threshold)})</p>"
    )
    for line in grader_errors(stage):
        yield f'<p class="note">{esc(line)}</p>'
    for grader in verdict.graders:
        for warning in grader.warnings:
            yield f'<p class="note">{esc(grader.grader)}: {esc(warning)}</p>'
    rows = [_criterion_row(c) for c in verdict.criteria]
    if rows:
        yield table(["criterion", "kind", "score", "verdict", "source", "why"], rows, wide=5)


def _criterion_row(c: Criterion) -> list[str]:
    word = "advisory" if c.advisory and not c.passed else ("passed" if c.passed else "failed")
    why = c.rationale or c.detail
    return [
        f"<code>{esc(c.id)}</code>",
        esc(c.kind),
        esc("-" if c.score is None else f"{c.score:g}"),
        status(word, "muted" if word == "advisory" else word),
        esc(c.source),
        fold(esc(why[:120]), f"<pre>{esc(why)}</pre>") if len(why) > 120 else esc(why),
    ]
