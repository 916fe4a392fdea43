"""What a person sees while `ci-evals run` works, and the summary at the end.

Two displays of the same events (`RunListener`):

- `LiveProgress` on a terminal: one line per scenario, redrawn in place,
  showing the running stage, its turns, the cost so far and the elapsed time;
- `PlainProgress` everywhere else (CI logs): one timestamped line per event,
  never redrawn, so the log reads top to bottom.

`summary_table()` is the short table printed at the end in both cases.
"""

from __future__ import annotations

import shutil
import sys
import time
from datetime import datetime, timezone
from typing import TextIO

from ci_evals.agents import Progress
from ci_evals.results import miss_source, outcome
from ci_evals.results.model import RunResult, StageResult
from ci_evals.results.outcome import run_verdict
from ci_evals.run.runner import RunListener, RunPlan
from ci_evals.text import inert

_MARKS = {
    "completed": "ok",
    "passed": "pass",
    "failed": "FAIL",
    "error": "ERROR",
    "limit": "LIMIT",
    "skipped": "skip",
    "pending": "-",
    "running": "...",
}


def _stage_text(stage: StageResult) -> str:
    mark = _MARKS.get(stage.status, stage.status)
    if stage.status == "limit" and stage.limit_hit:
        mark = f"LIMIT:{stage.limit_hit}"
    elif stage.status == "error" and stage.endpoint_misses:
        mark = f"ERROR:{miss_source(stage.endpoint_misses)}"
    return mark


def _cost(value: float | None) -> str:
    return f"${value or 0.0:.4f}"


def cost_kind(model_endpoint: str) -> str:
    """What a cost of this endpoint is when no money was spent: a stub's scripted
    tokens at list price ("simulated"), a replay's recorded ones ("replayed"); ""
    for a real model. Said beside every cost, so no line reads as a bill."""
    kind = outcome.cost_kind(model_endpoint)
    return "" if kind == "real" else kind


def _costed(value: float | None, kind: str) -> str:
    return _cost(value) + (f" ({kind})" if kind else "")


def _criteria(stage: StageResult) -> tuple[str, str]:
    """(criteria passed/total, analytic mean) of a graded stage; ("-", "-") otherwise.
    Advisory criteria are left out: they never decide the verdict."""
    verdict = stage.grading
    if verdict is None:
        return "-", "-"
    counted = [c for c in verdict.criteria if not c.advisory]
    passed = sum(1 for c in counted if c.passed)
    mean = "-" if verdict.analytic_mean is None else f"{verdict.analytic_mean:.2f}"
    return f"{passed}/{len(counted)}", mean


def _verdict_text(stage: StageResult) -> str:
    """` criteria 7/8 mean 3.50` for a graded stage, else nothing."""
    if stage.grading is None:
        return ""
    criteria, mean = _criteria(stage)
    return f" criteria {criteria} mean {mean}"


class PlainProgress(RunListener):
    """Timestamped lines for logs; `verbose` adds each tool a stage calls as it runs
    and each criterion of its verdict."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.verbose = verbose
        self._kind = ""  # cost_kind of the run's endpoint
        self._last_tool: dict[str, str | None] = {}

    def _line(self, text: str) -> None:
        stamp = datetime.now(timezone.utc).strftime("%H:%M:%S")
        # Scenario ids and stage errors are the suite's and the agent's text: inert in a log.
        print(f"[{stamp}] {inert(text)}", file=self.stream, flush=True)

    def run_started(self, plan: RunPlan, result: RunResult) -> None:
        self._kind = cost_kind(result.model_endpoint)
        names = ", ".join(s.name for s in plan.stages)
        what = (
            f"stages {plan.from_stage.number}..{plan.suite.stages[-1].number} ({names})"
            if plan.suite.stages
            else "one stage each (plugin_evals cases)"
        )
        self._line(
            f"run {plan.run_id}: {len(plan.scenarios)} scenario(s), {what}, "
            f"jobs {plan.jobs}, folder {plan.run_dir}"
        )

    def stage_started(self, scenario: str, stage: StageResult) -> None:
        self._line(f"{scenario} stage {stage.number} {stage.name}: started")

    def stage_progress(self, scenario: str, stage: StageResult, progress: Progress) -> None:
        # Only what keeps a stage waiting (a slow hook): a log line per message
        # would bury the stages' own lines -- unless asked for (`-v`).
        if progress.note:
            self._line(f"{scenario} stage {stage.number} {stage.name}: {progress.note}")
        elif self.verbose and progress.last_tool != self._last_tool.get(scenario):
            self._last_tool[scenario] = progress.last_tool
            if progress.last_tool:
                self._line(
                    f"{scenario} stage {stage.number} {stage.name}: turn {progress.turns} "
                    f"{progress.last_tool}"
                )

    def stage_finished(self, scenario: str, stage: StageResult) -> None:
        detail = f" ({stage.error})" if stage.error else ""
        self._line(
            f"{scenario} stage {stage.number} {stage.name}: {_stage_text(stage)}"
            f"{_verdict_text(stage)}"
            f" turns={stage.turns or 0} cost={_costed(stage.cost_usd, self._kind)}"
            f" time={stage.duration_s or 0:.1f}s files={len(stage.produced)}{detail}"
        )
        if self.verbose and stage.grading is not None:
            for criterion in stage.grading.criteria:
                mark = "pass" if criterion.passed else "FAIL"
                extra = " (advisory)" if criterion.advisory else ""
                self._line(f"  {scenario} stage {stage.number}: {mark} {criterion.id}{extra}")

    def run_finished(self, plan: RunPlan, result: RunResult) -> None:
        self._line(
            f"run {result.status}: total cost {_cost(result.total_cost_usd)}{result.cost_note}"
            f"{result.forwarded_note}"
        )


class LiveProgress(RunListener):
    """One line per scenario, redrawn in place on a terminal."""

    def __init__(self, stream: TextIO | None = None, min_interval_s: float = 0.1) -> None:
        self.stream = stream or sys.stderr
        self.min_interval_s = min_interval_s
        self._order: list[str] = []
        self._lines: dict[str, str] = {}
        self._started: dict[str, float] = {}
        self._running: dict[str, tuple[StageResult, Progress]] = {}
        self._drawn = 0
        self._last_draw = 0.0
        self._kind = ""  # cost_kind of the run's endpoint

    def run_started(self, plan: RunPlan, result: RunResult) -> None:
        self._kind = cost_kind(result.model_endpoint)
        print(f"run {plan.run_id} -> {plan.run_dir}", file=self.stream, flush=True)
        for scenario in result.scenarios:
            self._order.append(scenario.id)
            self._lines[scenario.id] = f"{scenario.id}: waiting"
        self._draw(force=True)

    def stage_started(self, scenario: str, stage: StageResult) -> None:
        self._started[scenario] = time.monotonic()
        self._running[scenario] = (stage, Progress(turns=0, cost_usd=0.0))
        self._lines[scenario] = self._running_line(scenario)
        self._draw(force=True)

    def stage_progress(self, scenario: str, stage: StageResult, progress: Progress) -> None:
        self._running[scenario] = (stage, progress)
        self._lines[scenario] = self._running_line(scenario)
        self._draw()

    def tick(self) -> None:
        for scenario in self._running:
            self._lines[scenario] = self._running_line(scenario)
        self._draw(force=True)

    def _running_line(self, scenario: str) -> str:
        stage, progress = self._running[scenario]
        elapsed = time.monotonic() - self._started.get(scenario, time.monotonic())
        tool = f" [{progress.last_tool}]" if progress.last_tool else ""
        if progress.note:
            tool = f" [{progress.note}]"
        return (
            f"{scenario}: stage {stage.number} {stage.name} turns={progress.turns}"
            f" cost={_costed(progress.cost_usd, self._kind)} {elapsed:.0f}s{tool}"
        )

    def stage_finished(self, scenario: str, stage: StageResult) -> None:
        self._running.pop(scenario, None)
        self._lines[scenario] = (
            f"{scenario}: stage {stage.number} {stage.name} {_stage_text(stage)}"
            f"{_verdict_text(stage)}"
            f" turns={stage.turns or 0} cost={_costed(stage.cost_usd, self._kind)}"
            f" {stage.duration_s or 0:.0f}s"
        )
        self._draw(force=True)

    def run_finished(self, plan: RunPlan, result: RunResult) -> None:
        self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < self.min_interval_s:
            return
        self._last_draw = now
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        # A wrapped line would throw off the cursor-up count: cut to the width.
        width = max(20, shutil.get_terminal_size().columns - 1)
        body = "".join(f"\x1b[2K{self._lines[sid][:width]}\n" for sid in self._order)
        self.stream.write(up + body)
        self.stream.flush()
        self._drawn = len(self._order)


def make_progress(stream: TextIO | None = None, *, verbosity: int = 0) -> RunListener:
    """Live lines on a terminal, plain timestamped lines otherwise (CI); nothing when
    quiet (`verbosity` < 0), plain lines with every tool and criterion when verbose
    (> 0: a log to read back, even on a terminal)."""
    stream = stream or sys.stderr
    if verbosity < 0:
        return RunListener()
    if verbosity > 0:
        return PlainProgress(stream, verbose=True)
    return LiveProgress(stream) if stream.isatty() else PlainProgress(stream)


def verdict_line(result: RunResult, run_dir: object) -> str:
    """The one line `run -q` prints: the verdict, the stage runs, the cost, the folder."""
    stages = sum(len(scenario.stages) for scenario in result.scenarios)
    kind = cost_kind(result.model_endpoint)
    return (
        f"run {run_verdict(result)}: {stages} stage run(s), total cost "
        f"{_costed(result.total_cost_usd, kind)}; run folder: {run_dir}"
    )


def _arms(result: RunResult) -> list[str]:
    """`ablation: with-without`: per stage the score with, without and Δ, as the CLI
    prints a case (`with 1.00  without 0.50  Δ +0.50`), and the mean Δ."""
    lines = []
    for item in result.summaries:
        arms = item.arms
        if arms is None:
            continue
        where = inert(f"{item.scenario} {item.stage} {item.name}")
        with_ = "-" if arms.score is None else f"{arms.score:.2f}"
        if arms.delta is None:
            lines.append(f"{where}  with {with_}  Δ — ({inert(arms.note or 'no delta')})")
            continue
        without = "-" if arms.score_without is None else f"{arms.score_without:.2f}"
        lines.append(f"{where}  with {with_}  without {without}  Δ {arms.delta:+.2f}")
    if lines and result.mean_delta is not None:
        lines.append(f"mean Δ {result.mean_delta:+.2f} (the verdict is the run with the plugin's)")
    return lines


def summary_table(result: RunResult) -> str:
    """The short table printed at the end: one row per scenario and stage."""
    kind = cost_kind(result.model_endpoint)
    cost = f"cost ({kind})" if kind else "cost"
    header = ("scenario", "stage", "status", "criteria", "mean", "turns", cost, "time", "files")
    rows = [header]
    for scenario in result.scenarios:
        label = result.label_of(scenario)
        for stage in scenario.stages:
            rows.append(
                (
                    label,
                    f"{stage.number} {stage.name}",
                    _stage_text(stage),
                    *_criteria(stage),
                    str(stage.turns if stage.turns is not None else "-"),
                    _cost(stage.cost_usd) if stage.cost_usd is not None else "-",
                    f"{stage.duration_s:.1f}s" if stage.duration_s is not None else "-",
                    str(len(stage.produced)),
                )
            )
    shown = [[inert(cell) for cell in row] for row in rows]  # one line each, never a command
    widths = [max(len(row[i]) for row in shown) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in shown
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    if any(row[4] == "-" and row[3] != "-" for row in rows[1:]):
        lines.append(
            "mean: the mean of a stage's analytic (1-5) criteria; - where it has none "
            "(checks alone are passed/failed, counted under criteria)"
        )
    lines += _endpoint_misses(result)
    lines += _arms(result)
    graders = sum(s.grading_cost_usd or 0.0 for sc in result.scenarios for s in sc.stages)
    of_which = f" (reviewers {_cost(graders)})" if graders else ""
    total = (
        f"total cost {_cost(result.total_cost_usd)}{result.cost_note}{of_which}"
        f"{result.forwarded_note}"
    )
    note = result.origin_note  # a stub's or a replay's: not a fresh model's verdict
    lines.append(f"{total}; run {result.status}" + (f" ({inert(note)})" if note else ""))
    return "\n".join(lines)


def _endpoint_misses(result: RunResult) -> list[str]:
    """Below the table: each stage whose requests the stub script (or the
    recording) could not answer."""
    lines: list[str] = []
    for scenario in result.scenarios:
        label = result.label_of(scenario)
        for stage in scenario.stages:
            if stage.endpoint_misses:
                first = stage.endpoint_misses[0].text
                more = len(stage.endpoint_misses) - 1
                lines.append(
                    inert(f"  {label} stage {stage.number} {stage.name}: {first}")
                    + (f" (and {more} more)" if more else "")
                )
    if lines and result.model_endpoint.startswith("replay:"):
        lines.insert(0, "the recording had no exchange for these requests (the stages are errors):")
    elif lines:
        lines.insert(0, "the stub script had no answer for these requests (the stages are errors):")
    return lines
