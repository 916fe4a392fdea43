"""The benchmark over many tasks (`ci-evals run --tasks`): a table per agent configuration.

One *attempt* is one scenario run (one repeat) of a task. Per (configuration,
task) the table counts how its attempts ended — **completed** (every stage's
agent finished within its limits: `final_submit`, for the loop agent),
**halted** at the step ceiling (limit `turns`), another **limit** (time,
budget, output), **error** (the agent, the endpoint or a grader failed, or
the run was interrupted) — how many **passed** their graders, and the binary
score (the seed's fraction of sub-tests passed, 0-100): its mean, sample
standard deviation and 95% interval for the mean (Student's t, clipped to
0-100: `stats.spread`) over the attempts (`benchmark.json` keeps the variance
too). An attempt that was not graded (halted, a limit,
an error) scores 0: the mean is over every attempt, never only the lucky ones.
Pure: reads results, writes nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ci_evals.results.model import RunResult, ScenarioResult
from ci_evals.results.stats import Spread, spread

_FINISHED = ("completed", "passed", "failed")
_HEADER = (
    "task",
    "attempts",
    "completed",
    "halted",
    "limit",
    "error",
    "passed",
    "mean score",
    "stdev",
    "95% interval",
)
_SCORE_RANGE = (0.0, 100.0)


@dataclass(frozen=True)
class TaskRow:
    task: str
    run_dir: str
    attempts: int = 0
    completed: int = 0
    halted: int = 0
    limit: int = 0
    error: int = 0
    passed: int = 0
    scores: tuple[float, ...] = ()

    @property
    def mean_score(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def variance(self) -> float | None:
        """Sample variance of the scores; None with fewer than two attempts."""
        return statistics.variance(self.scores) if len(self.scores) > 1 else None

    @property
    def spread(self) -> Spread:
        """The scores' mean, sample standard deviation and 95% interval (t)."""
        return spread(self.scores)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95% interval for the mean score, within the scores' range (0-100)."""
        low, high = self.spread.ci95_low, self.spread.ci95_high
        if low is None or high is None:
            return None
        return max(low, _SCORE_RANGE[0]), min(high, _SCORE_RANGE[1])


@dataclass(frozen=True)
class ConfigurationTable:
    label: str
    rows: tuple[TaskRow, ...] = field(default=())

    @property
    def total(self) -> TaskRow:
        """Every task's attempts together."""
        rows = self.rows
        return TaskRow(
            task="all tasks",
            run_dir="",
            attempts=sum(r.attempts for r in rows),
            completed=sum(r.completed for r in rows),
            halted=sum(r.halted for r in rows),
            limit=sum(r.limit for r in rows),
            error=sum(r.error for r in rows),
            passed=sum(r.passed for r in rows),
            scores=tuple(score for r in rows for score in r.scores),
        )


def task_row(task: str, run_dir: str, result: RunResult) -> TaskRow:
    """How the attempts of one task's run ended."""
    counts = {"completed": 0, "halted": 0, "limit": 0, "error": 0, "passed": 0}
    scores: list[float] = []
    for attempt in result.scenarios:
        counts[_ending(attempt, interrupted=result.status != "completed")] += 1
        counts["passed"] += bool(attempt.stages) and all(
            s.status == "passed" for s in attempt.stages
        )
        scores.append(_score(attempt))
    return TaskRow(
        task=task, run_dir=run_dir, attempts=len(result.scenarios), scores=tuple(scores), **counts
    )


def _ending(attempt: ScenarioResult, *, interrupted: bool) -> str:
    stages = attempt.stages
    if any(s.limit_hit == "turns" for s in stages):
        return "halted"
    if any(s.status == "limit" for s in stages):
        return "limit"
    if stages and all(s.status in _FINISHED for s in stages) and not interrupted:
        return "completed"
    return "error"


def _score(attempt: ScenarioResult) -> float:
    """The mean of its stages' binary scores; an ungraded stage counts 0."""
    values = [
        s.grading.binary_score
        if s.grading is not None and s.grading.binary_score is not None
        else 0.0
        for s in attempt.stages
    ]
    return statistics.fmean(values) if values else 0.0


def render(tables: Sequence[ConfigurationTable]) -> str:
    """A plain-text table per configuration (the terminal and the Markdown file alike)."""
    blocks: list[str] = []
    for table in tables:
        header = _HEADER
        lines = [f"configuration: {table.label}", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "|".join("---" for _ in header) + "|")
        for row in (*table.rows, table.total):
            cells = (
                row.task, row.attempts, row.completed, row.halted, row.limit, row.error,
                row.passed, _number(row.mean_score), _number(row.spread.stdev),
                _interval(row.interval),
            )  # fmt: skip
            lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def as_json(tables: Sequence[ConfigurationTable]) -> dict[str, Any]:
    """`benchmark.json`: every configuration's rows with their scores."""
    return {
        "version": 1,
        "configurations": [
            {
                "configuration": table.label,
                "tasks": [_row_json(row) for row in table.rows],
                "total": _row_json(table.total),
            }
            for table in tables
        ],
    }


def _row_json(row: TaskRow) -> dict[str, Any]:
    return {
        "task": row.task,
        "run_dir": row.run_dir,
        "attempts": row.attempts,
        "completed": row.completed,
        "halted": row.halted,
        "limit": row.limit,
        "error": row.error,
        "passed": row.passed,
        "scores": list(row.scores),
        "mean_score": row.mean_score,
        "variance": row.variance,
        "stdev": row.spread.stdev,
        "ci95": None if row.interval is None else list(row.interval),
    }


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _interval(value: tuple[float, float] | None) -> str:
    return "-" if value is None else f"{value[0]:.1f}-{value[1]:.1f}"
