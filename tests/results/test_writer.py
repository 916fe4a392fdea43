"""results.json rewritten at a bounded pace: deferred within the interval, never lost
at the end, the interval growing with the file."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from ci_evals.results.model import RunResult, ScenarioResult, StageResult, read_results
from ci_evals.results.writer import MIN_INTERVAL_S, RATE, ResultsWriter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_of(scenarios: int) -> RunResult:
    return RunResult(
        run_id="r",
        tool_version="0",
        from_stage=1,
        suite_file="ci-evals.yaml",
        started_at=datetime.now(timezone.utc),
        scenarios=[
            ScenarioResult(
                id=f"s{i}",
                stages=[
                    StageResult(number=k, name=f"stage{k}", error="x" * 2000) for k in range(1, 6)
                ],
            )
            for i in range(scenarios)
        ],
    )


def test_writes_within_the_interval_are_deferred_and_flushed_once_it_passed(tmp_path: Path) -> None:
    clock = Clock()
    writer = ResultsWriter(tmp_path, clock)
    result = run_of(1)
    writer.write(result)  # nothing written for a while: at once
    assert writer.writes == 1 and (tmp_path / "results.json").is_file()
    result.scenarios[0].stages[0].status = "running"
    clock.now = 0.5
    writer.write(result)
    writer.flush_due(result)
    assert writer.writes == 1 and writer.pending  # deferred
    assert read_results(tmp_path).scenarios[0].stages[0].status == "pending"
    clock.now = MIN_INTERVAL_S
    writer.flush_due(result)
    assert writer.writes == 2 and not writer.pending
    assert read_results(tmp_path).scenarios[0].stages[0].status == "running"
    result.scenarios[0].stages[0].status = "completed"
    clock.now += 0.1
    writer.write(result, now=True)  # the end, an interrupt: at once
    assert read_results(tmp_path).scenarios[0].stages[0].status == "completed"


@pytest.mark.slow
def test_a_long_run_rewrites_at_most_about_rate_bytes_a_second(tmp_path: Path) -> None:
    # 100 scenarios x 5 stages, 2 events each, 0.3 s apart (4 jobs): every event
    # written would be 1,000 rewrites of a file growing to a few MB.
    clock = Clock()
    writer = ResultsWriter(tmp_path, clock)
    result = run_of(100)
    events = 0
    for scenario in result.scenarios:
        for stage in scenario.stages:
            for status in ("running", "completed"):
                stage.status = status  # type: ignore[assignment]
                clock.now += 0.3
                writer.write(result)
                writer.flush_due(result)
                events += 1
    writer.write(result, now=True)
    assert read_results(tmp_path).scenarios[-1].stages[-1].status == "completed"
    size = (tmp_path / "results.json").stat().st_size
    assert writer.writes < events / 5
    assert writer.bytes <= RATE * clock.now + 2 * size + MIN_INTERVAL_S * RATE
