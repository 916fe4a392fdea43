"""A compact GitHub-flavoured Markdown summary of a run.

What the step summary (`$GITHUB_STEP_SUMMARY`) and the sticky PR comment show:
a headline with the verdict, the stage counts and the total cost; a table per
scenario; then each stage that did not pass with its reason and every failed
criterion.

Everything an agent or a grader wrote is data, not Markdown (`text`): it is
escaped so that a `|` cannot split a table cell, a newline cannot end it, `<`
cannot open HTML (or a hidden `<!-- marker -->` of the sticky comment); what
GitHub would link by itself (`@name`, `#1`, `GH-1`, `owner/repo#1`, a commit SHA,
a URL) is shown as code, so the bot's comment mentions, notifies and
cross-references nobody; bidi and zero-width characters are removed. Long texts
are cut; a PR comment holds at most 65,536 characters.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ci_evals.report import (
    INCONSISTENT,
    arms_rows,
    cap,
    counted_criteria,
    criterion_line,
    delta_text,
    endpoint_miss_count,
    endpoint_miss_lines,
    failed_criteria,
    flagged_criteria,
    grader_errors,
    printable,
    reason,
    run_outcomes,
    run_passed,
    run_problems,
    run_reason,
    scenario_label,
    stage_label,
    status_word,
)
from ci_evals.text import one_line

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult, ScenarioResult, StageResult

CELL_LIMIT = 200
REASON_LIMIT = 500
CRITERION_LIMIT = 300
CRITERIA_SHOWN = 20  # per stage; the JUnit file has them all
PROBLEMS_SHOWN = 50  # of an inconsistent results file; the JUnit file has them all
HEADER = ("stage", "status", "criteria", "mean", "turns", "cost", "time")

# Punctuation with a meaning inside a line (emphasis, code, links, strike,
# table cells, `$` math); a backslash makes it literal. Our texts never start a line, so
# `#`, `-`, `+` and `1.` (which matter only there) are left alone.
_MARKUP = re.compile(r"([\\`*_\[\]|~$])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;"}
# What GitHub links by itself in a comment's text (its "autolinked references"):
# URLs (a link to a github.com issue also cross-references it), `owner/repo#1`,
# `owner/repo@SHA`, `GH-1`, `#1`, `@user` / `@org/team`, and commit SHAs of 7 to 40
# hex digits. A backslash or an entity does not stop it (GitHub links the rendered
# text, entities decoded); a code span does, so each is written as one. None of
# these patterns can hold a backtick or a `|`, so the span stays one table cell.
_URL_CHARS = r"[^\s`|<>]"
_REFERENCE = re.compile(
    rf"(?:(?:https?|ftp)://|www\.){_URL_CHARS}*[^\s`|<>.,;:!?'\")\]*_~]"
    r"|[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+(?:#\d+|@[0-9A-Fa-f]{7,40}\b)"
    r"|\b[Gg][Hh]-\d+"
    r"|(?<![A-Za-z0-9_])#\d+"  # as GitHub: `acme#2` (a repeat's label) is no reference
    r"|(?<![A-Za-z0-9_])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?"
    r"|\b[0-9A-Fa-f]{7,40}\b"
)


def _invisible(char: str) -> bool:
    """A format character: bidi overrides and isolates (U+202E...), zero-width spaces
    and joiners, the BOM, tags. Invisible in a comment, they make text read as other text."""
    return unicodedata.category(char) == "Cf"


def _plain(value: str) -> str:
    escaped = _MARKUP.sub(r"\\\1", value)
    return "".join(_ENTITIES.get(char, char) for char in escaped)


def text(value: str, limit: int) -> str:
    """`value` (anything an agent, a reviewer or a results file wrote) as literal one-line
    Markdown text, at most about `limit` characters: no markup, no HTML, invisible format
    characters removed, and nothing GitHub would turn into a link, a mention or a
    cross-reference (each such reference is shown as code)."""
    visible = "".join(char for char in printable(value) if not _invisible(char))
    line = cap(one_line(visible), limit)
    parts: list[str] = []
    end = 0
    for match in _REFERENCE.finditer(line):
        parts += [_plain(line[end : match.start()]), f"`{match.group()}`"]
        end = match.end()
    parts.append(_plain(line[end:]))
    return "".join(parts)


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _criteria(stage: StageResult) -> tuple[str, str]:
    """(passed/total of the deciding criteria, analytic mean), "-" when not graded."""
    if stage.grading is None:
        return "-", "-"
    counted = counted_criteria(stage)
    passed = sum(1 for c in counted if c.passed)
    mean = stage.grading.analytic_mean
    return f"{passed}/{len(counted)}", "-" if mean is None else f"{mean:.2f}"


def _row(stage: StageResult) -> str:
    cells = (
        text(stage_label(stage), CELL_LIMIT),
        text(status_word(stage), CELL_LIMIT),
        *_criteria(stage),
        "-" if stage.turns is None else str(stage.turns),
        _cost(stage.cost_usd),
        "-" if stage.duration_s is None else f"{stage.duration_s:.1f}s",
    )
    return "| " + " | ".join(cells) + " |"


def _table(result: RunResult, scenario: ScenarioResult) -> list[str]:
    lines = [f"### {text(scenario_label(result, scenario), CELL_LIMIT)}", ""]
    if not scenario.stages:
        return [*lines, "No stage recorded.", ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    lines.extend(_row(stage) for stage in scenario.stages)
    return [*lines, ""]


def _headline(result: RunResult, problems: Sequence[str]) -> list[str]:
    stages = [stage for scenario in result.scenarios for stage in scenario.stages]
    verdict: str
    if problems:
        verdict = "error"  # the file contradicts itself: no verdict in it can be trusted
    elif result.status != "completed":
        verdict = result.status  # interrupted, error, or running (the writer died)
    else:
        verdict = "passed" if run_passed(result, problems) else "failed"
    counts = Counter(stage.status for stage in stages)
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    scenarios = len({scenario.id for scenario in result.scenarios})
    repeats = f" x {result.repeats_text} repeats" if result.repeats_text else ""
    # What the verdict is evidence of when no model answered afresh: a stub run, or a
    # replay of its recording, is a wiring check; a replay of a model's recording names
    # that model and day; a replay of unknown origin is no model's verdict.
    note = result.origin_note
    origin = f" ({text(note, REASON_LIMIT)})" if note else ""
    lines = [
        f"## ci-evals: {verdict}",
        "",
        f"{scenarios} scenario(s){repeats}, {len(stages)} stage run(s): {parts or 'none'}; "
        f"total cost {_cost(result.total_cost_usd)}{result.cost_note}"
        f"{result.forwarded_note}; "
        f"run {text(result.run_id, CELL_LIMIT)}{origin}",
        "",
    ]
    if result.ablation == "with-without":
        lines += [
            f"**With and without the plugin:** each unit also ran without it; mean Δ "
            f"{delta_text(result.mean_delta)} (see below).",
            "",
        ]
    if result.network:
        lines += [
            f"**Network on:** the sandbox (`{text(result.sandbox, CELL_LIMIT)}`) could reach "
            "the network (the suite's `network: true`).",
            "",
        ]
    requests, in_stages = endpoint_miss_count(result)
    if requests and result.model_endpoint.startswith("replay:"):
        lines += [
            f"**Replay diverged:** {requests} request(s) in {in_stages} stage(s) had no "
            "recorded exchange (the agent asked what the recorded run never asked): those "
            "stages are errors; see *Not passed*.",
            "",
        ]
    elif requests:
        lines += [
            f"**Stub script mismatch:** {requests} request(s) in {in_stages} stage(s) had no "
            "scripted answer (no rule matched, or a rule's turns ran out): the stub script and "
            "the suite disagree, so those stages are errors; see *Not passed*.",
            "",
        ]
    if result.resumed:
        lines += [f"**Resumed:** {text(result.resumed_note, REASON_LIMIT)}.", ""]
    if not result.isolated:
        lines += [
            f"**Not isolated:** the agent ran on the host (sandbox "
            f"`{text(result.sandbox, CELL_LIMIT)}`), able to read this machine's secrets and "
            "write anywhere the runner could; see docs/isolation.md.",
            "",
        ]
    return lines


def _failure(result: RunResult, scenario: ScenarioResult, stage: StageResult) -> list[str]:
    where = f"{scenario_label(result, scenario)} stage {stage_label(stage)}"
    said = text(reason(result, stage), REASON_LIMIT)
    lines = [f"- **{text(where, CELL_LIMIT)}** ({text(status_word(stage), CELL_LIMIT)}): {said}"]
    failed = failed_criteria(stage)
    for criterion in failed[:CRITERIA_SHOWN]:
        lines.append(f"  - {text(criterion_line(criterion), CRITERION_LIMIT)}")
    if len(failed) > CRITERIA_SHOWN:
        lines.append(f"  - ... and {len(failed) - CRITERIA_SHOWN} more failed criteria")
    lines.extend(f"  - grader error: {text(e, CRITERION_LIMIT)}" for e in grader_errors(stage))
    # Each request the stub could not answer, unless the reason above quotes it already.
    misses = [text(line, CRITERION_LIMIT) for line in endpoint_miss_lines(stage)]
    misses = [line for line in misses if line not in said]
    lines.extend(f"  - {line}" for line in misses[:CRITERIA_SHOWN])
    if len(misses) > CRITERIA_SHOWN:
        lines.append(f"  - ... and {len(misses) - CRITERIA_SHOWN} more unanswered requests")
    return lines


def _flags(result: RunResult) -> list[str]:
    """Advisory flags, passed stages included: an output that addresses the reviewer."""
    lines: list[str] = []
    for scenario in result.scenarios:
        for stage in scenario.stages:
            where = f"{scenario_label(result, scenario)} stage {stage_label(stage)}"
            lines.extend(
                f"- **{text(where, CELL_LIMIT)}**: {text(c.detail, REASON_LIMIT)}"
                for c in flagged_criteria(stage)
            )
    if not lines:
        return []
    return ["### Flagged (advisory: look at these files)", "", *lines, ""]


def _repeats(result: RunResult) -> list[str]:
    """With repeats, the k-of-n verdict per scenario and stage decides the run."""
    if not result.repeated or not result.summaries:
        return []
    lines = ["### Over repeats", "", "| scenario | stage | verdict | reason |", "|---|---|---|---|"]
    for item in result.summaries:
        cells = (
            item.scenario,
            f"{item.stage} {item.name}",
            item.summary.verdict,
            item.summary.reason,
        )
        lines.append("| " + " | ".join(text(cell, CELL_LIMIT) for cell in cells) + " |")
    return [*lines, ""]


def _arms(result: RunResult) -> list[str]:
    """`ablation: with-without`: each stage's score with and without the plugin, and Δ."""
    rows = arms_rows(result)
    if not rows:
        return []
    lines = [
        "### With and without the plugin",
        "",
        f"Mean Δ {delta_text(result.mean_delta)} (score with - score without, the mean "
        "of the deltas shown); the verdict is the run with the plugin's.",
        "",
        "| scenario | stage | with | without | Δ | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(text(cell, CELL_LIMIT) for cell in row) + " |")
    return [*lines, ""]


def _inconsistent(problems: Sequence[str]) -> list[str]:
    if not problems:
        return []
    lines = [
        f"### {INCONSISTENT[0].upper()}{INCONSISTENT[1:]}",
        "",
        f"The results file does not agree with itself ({len(problems)} problem(s)), so the "
        "run is an error and no status below can be trusted.",
        "",
    ]
    lines.extend(f"- {text(problem, REASON_LIMIT)}" for problem in problems[:PROBLEMS_SHOWN])
    if len(problems) > PROBLEMS_SHOWN:
        lines.append(f"- ... and {len(problems) - PROBLEMS_SHOWN} more")
    return [*lines, ""]


def markdown_summary(result: RunResult, problems: Sequence[str] | None = None) -> str:
    """The run as Markdown for a step summary or a PR comment.

    `problems` are the file's inconsistencies (`verify.problems`, computed when
    not given): any makes the headline `error`, listed first.
    """
    found = run_problems(result, problems)
    lines = _headline(result, found)
    lines.extend(_inconsistent(found))
    for scenario in result.scenarios:
        lines.extend(_table(result, scenario))
    lines.extend(_repeats(result))
    lines.extend(_arms(result))
    failing = [
        _failure(result, scenario, stage)
        for scenario, stage, kind in run_outcomes(result)
        if kind in ("failure", "error")
    ]
    why = run_reason(result, found)  # the run's own, first: no stage may say it
    if why:
        failing.insert(
            0, [f"- **the run** ({text(result.status, CELL_LIMIT)}): {text(why, REASON_LIMIT)}"]
        )
    if failing:
        lines.extend(["### Not passed", ""])
        for block in failing:
            lines.extend(block)
        lines.append("")
    lines.extend(_flags(result))
    return "\n".join(lines).rstrip("\n") + "\n"
