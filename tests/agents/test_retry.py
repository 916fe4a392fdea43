"""Retrying infrastructure errors on the real CLI: an overloaded endpoint yes, a timeout no."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ci_evals.agents import StageOutcome, StageRequest
from ci_evals.agents.registry import get_agent
from ci_evals.agents.retry import RetryingAgent
from ci_evals.backoff import RetryPolicy
from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.results.model import RunResult
from ci_evals.run.runner import Runner, RunPlan
from ci_evals.suite.load import load_suite
from tests.run_helpers import default_rules, make_suite

OVERLOADED_ONCE = """  - name: s5-overloaded
    match: {command: demo:s5}
    turns:
      - fault: {http_status: 529, times: 1, scope: server}
        tools: [{write: {path: out5.md, content: "stage 5\\n"}}]
      - text: "stage 5 done"
"""
HANGS = """  - name: s5-hangs
    match: {command: demo:s5}
    turns:
      - fault: {hang: forever}
"""


def run_stage_5(
    tmp_path: Path, rules: str, agent: RetryingAgent, limits: str = "{max_turns: 10}"
) -> tuple[RunResult, StubServer]:
    suite_file, stub = make_suite(tmp_path / "suite", rules=rules + default_rules(), limits=limits)
    suite = load_suite(suite_file)
    # The CLI must not retry by itself: each attempt is then one request.
    environ = {**os.environ, "CLAUDE_CODE_MAX_RETRIES": "0"}
    with StubServer(load_script(stub)) as server:
        plan = RunPlan(
            suite=suite,
            from_stage=suite.stage(5),
            scenarios=suite.scenarios,
            run_dir=tmp_path / "run",
            run_id="retry",
            model=None,
            environ=environ,
            endpoint=server.cli_env(),
        )
        result = asyncio.run(Runner(plan, agent).run())
    return result, server


@pytest.mark.slow
def test_an_overloaded_endpoint_is_retried_and_the_stage_completes(tmp_path: Path) -> None:
    retried: list[tuple[int | None, int, float]] = []

    def on_retry(request: StageRequest, outcome: StageOutcome, attempt: int, delay: float) -> None:
        retried.append((outcome.api_error_status, attempt, delay))

    agent = RetryingAgent(get_agent("claude"), RetryPolicy(first_s=0.2), on_retry)
    result, server = run_stage_5(tmp_path, OVERLOADED_ONCE, agent)

    stage = result.scenarios[0].stages[0]
    assert stage.status == "completed"
    assert [p.path for p in stage.produced] == ["out5.md"]
    assert retried == [(529, 1, 0.2)]
    stage_dir = tmp_path / "run" / "acme" / "5-s5"
    assert agent.attempts[stage_dir / "trajectory.jsonl"] == 2
    # The failed attempt's record is kept beside the one that counted.
    assert "API Error" in (stage_dir / "trajectory.attempt1.jsonl").read_text()
    assert "API Error" not in (stage_dir / "trajectory.jsonl").read_text()
    faults = [r for r in server.requests if r.outcome == "fault"]
    assert [(r.rule, r.status) for r in faults] == [("s5-overloaded", 529)]


@pytest.mark.slow
def test_the_retries_are_bounded(tmp_path: Path) -> None:
    always = OVERLOADED_ONCE.replace("times: 1, scope: server", "times: 99, scope: server")
    agent = RetryingAgent(get_agent("claude"), RetryPolicy(attempts=2, first_s=0.1))
    result, server = run_stage_5(tmp_path, always, agent)

    stage = result.scenarios[0].stages[0]
    assert stage.status == "error" and "529" in str(stage.error)
    assert len([r for r in server.requests if r.outcome == "fault"]) == 2


@pytest.mark.slow
def test_a_timeout_is_never_retried(tmp_path: Path) -> None:
    agent = RetryingAgent(get_agent("claude"), RetryPolicy(first_s=0.1))
    result, server = run_stage_5(tmp_path, HANGS, agent, limits="{max_turns: 10, timeout_s: 4}")

    stage = result.scenarios[0].stages[0]
    assert (stage.status, stage.limit_hit) == ("limit", "time")
    assert agent.attempts[tmp_path / "run" / "acme" / "5-s5" / "trajectory.jsonl"] == 1
    assert len([r for r in server.requests if r.rule == "s5-hangs"]) == 1


def test_backoff_grows_exponentially_up_to_a_cap() -> None:
    policy = RetryPolicy(attempts=6, first_s=2.0, factor=3.0, cap_s=30.0)
    assert [policy.wait(n) for n in range(1, 6)] == [2.0, 6.0, 18.0, 30.0, 30.0]


FAILS_AFTER_WRITING = """  - name: s5-fails-after-writing
    match: {command: demo:s5}
    variants:
      - - tools:
            - write: {path: partial.md, content: "from the failed attempt\\n"}
            - write: {path: out4.md, content: "the fixture, overwritten\\n"}
        - fault: {http_status: 529}
      - - tools: [{write: {path: out5.md, content: "stage 5\\n"}}]
        - text: "stage 5 done"
"""


@pytest.mark.slow
def test_a_retried_stage_starts_from_the_files_the_stage_started_from(tmp_path: Path) -> None:
    agent = RetryingAgent(get_agent("claude"), RetryPolicy(first_s=0.1))
    result, server = run_stage_5(tmp_path, FAILS_AFTER_WRITING, agent)

    stage = result.scenarios[0].stages[0]
    assert stage.status == "completed"
    assert agent.attempts[tmp_path / "run" / "acme" / "5-s5" / "trajectory.jsonl"] == 2
    # Only what the attempt that counted did: no partial file, the fixture intact.
    assert [(p.path, p.change) for p in stage.produced] == [("out5.md", "added")]
    assert len([r for r in server.requests if r.outcome == "fault"]) == 1
    assert not list(tmp_path.rglob("checkpoint-*"))  # the saved copy is gone


REMOVES_THE_CHECKPOINT = """  - name: s5-removes-the-checkpoint
    match: {command: demo:s5}
    variants:
      - - tools: [{bash: "rm -rf ../checkpoint-5"}]
        - fault: {http_status: 529}
      - - text: "stage 5 done"
"""


@pytest.mark.slow
def test_a_stage_whose_files_cannot_be_restored_is_not_retried(tmp_path: Path) -> None:
    agent = RetryingAgent(get_agent("claude"), RetryPolicy(first_s=0.1))
    result, server = run_stage_5(tmp_path, REMOVES_THE_CHECKPOINT, agent)

    stage = result.scenarios[0].stages[0]
    assert stage.status == "error"
    assert "529" in str(stage.error)
    assert "not retried: the workspace could not be restored" in str(stage.error)
    assert agent.attempts[tmp_path / "run" / "acme" / "5-s5" / "trajectory.jsonl"] == 1
    assert [r.rule for r in server.requests].count("s5-removes-the-checkpoint") == 2
