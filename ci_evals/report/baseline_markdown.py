"""The Markdown sections after the run's summary: *Against the baseline* and *Cost*.

Appended to the step summary and the sticky comment by `ci-evals report`.
Regressions come first, then improvements, then changes without a direction,
each list led by the changes beyond the noise; then a table of every compared
stage. A missing, unreadable or stale baseline is said in the section, never
left out. Text from the results files (ids, names, run ids) is escaped like
the rest of the summary (`markdown.text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ci_evals.report.baseline import (
    NOT_JUDGED,
    NOT_RUN,
    STALE,
    Comparison,
    Delta,
    NoBaseline,
    StageRow,
)
from ci_evals.report.costs import CostSummary
from ci_evals.report.markdown import CELL_LIMIT, REASON_LIMIT, text
from ci_evals.report.shards import shard_line

DELTAS_SHOWN = 30  # per list; the rest are counted
ROWS_SHOWN = 100

_NOISE = {
    "beyond": "beyond the noise",
    "within": "within the noise",
    "unknown": "noise unknown: one run on a side",
}


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _delta_line(delta: Delta) -> str:
    where = text(f"{delta.scenario} {delta.stage}", CELL_LIMIT)
    change = text(f"{delta.what}: {delta.before} → {delta.after}", REASON_LIMIT)
    if NOT_JUDGED not in (delta.before, delta.after) and "-" in (delta.before, delta.after):
        noise = "new" if delta.before == "-" else "gone"
    elif NOT_RUN in (delta.before, delta.after) or NOT_JUDGED in (delta.before, delta.after):
        return f"- **{where}** {change}"
    else:
        noise = _NOISE[delta.noise]
        if delta.intervals:
            noise += f", {delta.intervals}"
    line = f"- **{where}** {change} ({noise})"
    return line + f" — {text(delta.history, REASON_LIMIT)}" if delta.history else line


def _deltas(title: str, deltas: Sequence[Delta]) -> list[str]:
    if not deltas:
        return []
    lines = [f"#### {title} ({len(deltas)})", ""]
    lines.extend(_delta_line(d) for d in deltas[:DELTAS_SHOWN])
    if len(deltas) > DELTAS_SHOWN:
        lines.append(f"- ... and {len(deltas) - DELTAS_SHOWN} more")
    return [*lines, ""]


def _row(row: StageRow, arms: bool) -> str:
    cells = [
        text(row.scenario, CELL_LIMIT),
        text(row.stage, CELL_LIMIT),
        text(row.before, CELL_LIMIT),
        text(row.after, CELL_LIMIT),
        f"{_mean(row.mean_before)} → {_mean(row.mean_after)}",
        f"{_money(row.cost_before)} → {_money(row.cost_after)}",
    ]
    if arms:  # ablation on a side: the score with / without the plugin, and Δ
        before, after = row.arms_before or "-", row.arms_after or "-"
        cells.append(f"{text(before, CELL_LIMIT)} → {text(after, CELL_LIMIT)}")
    return "| " + " | ".join(cells) + " |"


def _headline(comparison: Comparison) -> str:
    baseline = comparison.baseline
    where = ""
    if baseline.revision is not None and baseline.revision.commit is not None:
        where = f" at {baseline.revision.commit[:12]}"
    started = baseline.started_at.strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Baseline: run {text(baseline.run_id, CELL_LIMIT)}{where}, from stage "
        f"{baseline.from_stage}, started {started}."
    )


def _counts(comparison: Comparison) -> str:
    regressions, improvements = len(comparison.regressions), len(comparison.improvements)
    beyond = sum(1 for d in comparison.regressions if d.noise == "beyond")
    # "0 beyond the noise" alone read a passed -> error change as nothing: an error
    # is no noise question, and one run a side leaves the noise unknown.
    to_error = [d for d in comparison.regressions if d.what == "verdict" and d.after[:5] == "error"]
    errors = len(to_error)
    unknown = sum(1 for d in comparison.regressions if d.noise == "unknown" and d not in to_error)
    also = f", {errors} now an error" if errors else ""
    also += f", {unknown} of unknown noise (one run on a side)" if unknown else ""
    return (
        f"**{regressions} regression(s)** ({beyond} beyond the noise{also}), {improvements} "
        f"improvement(s), {len(comparison.changes)} other change(s); {len(comparison.rows)} "
        f"stage(s) compared, {comparison.unchanged} unchanged."
    )


def _cause(comparison: Comparison) -> str:
    """Whose delta this is: the graders' (a re-grade of the baseline's own run) or the agent's."""
    if comparison.regraded:
        return (
            f"**The graders changed:** {comparison.now_failing} criteria now fail on the "
            "baseline's own outputs (this is its run re-graded with this change's graders; "
            "no agent ran)."
        )
    return "**The agent ran:** the deltas are the agent's (and any change to its graders)."


def not_compared(reason: str) -> str:
    """*Against the baseline* when this run itself cannot be compared."""
    return f"### Against the baseline\n\nNot compared: {text(reason, REASON_LIMIT)}.\n"


def comparison_section(outcome: Comparison | NoBaseline, source: str | None = None) -> str:
    """*Against the baseline*: the deltas, or why there is nothing to compare with."""
    lines = ["### Against the baseline", ""]
    if source:
        lines += [_source(source), ""]
    if isinstance(outcome, NoBaseline):
        lines += [
            f"**No baseline:** {text(outcome.reason, REASON_LIMIT)}. Nothing to compare with; "
            "the verdict above is this run's alone.",
            "",
        ]
        return "\n".join(lines).rstrip("\n") + "\n"
    lines += [_headline(outcome), "", _cause(outcome), ""]
    if outcome.notes:
        lines.extend(f"- {_note(note)}" for note in outcome.notes)
        lines.append("")
    lines += [_counts(outcome), ""]
    lines.extend(_deltas("Regressions", outcome.regressions))
    lines.extend(_deltas("Improvements", outcome.improvements))
    lines.extend(_deltas("Other changes", outcome.changes))
    missing = [f"{s} (not in the baseline)" for s in outcome.only_here]
    missing += [f"{s} (not in this run)" for s in outcome.only_baseline]
    if missing:
        shown = ", ".join(text(item, CELL_LIMIT) for item in missing[:DELTAS_SHOWN])
        more = f", and {len(missing) - DELTAS_SHOWN} more" if len(missing) > DELTAS_SHOWN else ""
        lines += [f"Not compared: {shown}{more}.", ""]
    if outcome.rows:
        arms = any(row.arms_before or row.arms_after for row in outcome.rows)
        lines += [
            # Not the run's own table: that counts criteria and the agent's cost alone.
            "Runs passed of the runs (repeats) on each side — the run's table counts "
            "criteria; cost per run is the agent's and its reviewer's — the run's table "
            "shows the agent's alone.",
            "",
            "| scenario | stage | baseline: runs passed | now: runs passed | analytic mean "
            "| cost per run (agent + reviewer) |"
            + (" with / without the plugin (Δ) |" if arms else ""),
            "|---|---|---|---|---|---|" + ("---|" if arms else ""),
        ]
        lines.extend(_row(row, arms) for row in outcome.rows[:ROWS_SHOWN])
        if len(outcome.rows) > ROWS_SHOWN:
            lines.append(f"\n... and {len(outcome.rows) - ROWS_SHOWN} more stages")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# `baseline fetch`'s line ends with the run's page, from GitHub's own reply.
_RUN_PAGE = re.compile(r"(?s)(.*) \((https://[^\s<>`|()\\]+)\)(\.?)")


def _source(source: str) -> str:
    """Where the baseline came from; the run's page stays a link (ci-evals' own), while
    everything else is text like any other (a `#N` there is a run number, not an issue)."""
    found = _RUN_PAGE.fullmatch(source)
    if found is None:
        return text(source, REASON_LIMIT)
    said, page, stop = found.groups()
    return f"{text(said, REASON_LIMIT)} ([the run](<{page}>)){stop}"


def _note(note: str) -> str:
    """A note as text; the label of a stale baseline in bold (it is the one to act on)."""
    if note.startswith(STALE):
        return f"**{STALE}** {text(note.removeprefix(STALE), REASON_LIMIT)}"
    return text(note, REASON_LIMIT)


def _stages(names: Sequence[str]) -> str:
    return ", ".join(text(name, CELL_LIMIT) for name in names) or "none"


def cost_section(costs: CostSummary) -> str:
    """*Cost*: live and fixture stages, the run's cost, the estimated saving."""
    simulated = " (simulated: stub-model prices, nothing was paid)" if costs.simulated else ""
    never = f" ({costs.never_ran} more never reached the model)" if costs.never_ran else ""
    lines = [
        "### Cost",
        "",
        f"- Ran live: {_stages(costs.live)} — {costs.stage_runs} stage run(s){never}, "
        f"{_money(costs.run_cost)}{simulated}",
    ]
    if costs.fixtures:
        lines.append(f"- Served from fixtures (not run): {_stages(costs.fixtures)}")
        if costs.saving is None:
            lines.append(f"- Estimated saving against a full run: no estimate: {costs.no_estimate}")
        else:
            mark = " (simulated)" if costs.saving_simulated else ""
            lines.append(
                f"- Estimated saving against a full run: {_money(costs.saving)}{mark}, from "
                f"{text(costs.basis, REASON_LIMIT)}"
            )
    else:
        lines.append("- Served from fixtures: none (a full run); nothing saved")
    if costs.shards is not None:
        lines.append(shard_line(costs.shards))
    return "\n".join(lines) + "\n"
