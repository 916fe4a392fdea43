"""`ci-evals run` when the model API fails: the verdict names the fault.

The stub model stands in for api.anthropic.com behind the real forwarding
proxy (the `anthropic` endpoint, as in `test_real_api_path`), injecting a
fault on every request of stage 5; the real CLI runs each stage. The CLI's own
retries are left at their default: the proxy must turn them off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.results.model import read_results
from tests.run.test_run_command import base_env, ci_evals
from tests.run_helpers import make_suite

pytestmark = pytest.mark.slow

REAL_KEY = "sk-ant-real-key-for-the-stand-in-0123"


def _script(fault: str, delay: float) -> str:
    return (
        "rules:\n"
        "  - match: {command: demo:s5}\n    turns:\n"
        f"      - fault: {{{fault}, times: 999, scope: server}}\n"
        f"        delay: {delay}\n"
    )


def _run(
    tmp_path: Path,
    fault: str,
    *extra: str,
    delay: float = 0.0,
    script: str | None = None,
    **suite: object,
) -> tuple[int, str, Path, list[str]]:
    suite_file, _ = make_suite(tmp_path, **suite)  # type: ignore[arg-type]
    out = tmp_path / "out"
    with StubServer(loads_script(script or _script(fault, delay))) as api:
        env = base_env(
            ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=api.cli_env()["ANTHROPIC_BASE_URL"]
        )
        del env["CLAUDE_CODE_MAX_RETRIES"]  # the CLI's default: 10 retries, unless told
        proc = ci_evals(
            "run", "--suite", str(suite_file), "--model", "claude-3-haiku", "--from-stage", "5",
            "--out", str(out), *extra, cwd=tmp_path, env=env, timeout=240,
        )  # fmt: skip
        rules = [r.rule or "" for r in api.requests]
    return proc.returncode, proc.stderr, out, rules


def test_cut_streams_end_the_stage_as_the_endpoints_error_not_the_budget(tmp_path: Path) -> None:
    # Each streamed request is cut after message_start (and the CLI's
    # non-streaming fallback gets no answer at all). Each charged its whole
    # reservation (~$0.05 of the $0.25), the CLI's own retries spent the budget:
    # `limit: budget`, the agent's overspending.
    code, stderr, out, rules = _run(tmp_path, "disconnect: true", budget_usd=0.25)
    stage = read_results(out).scenarios[0].stages[0]
    assert (stage.status, stage.limit_hit) == ("error", None), (stage.error, stderr)
    assert "the model endpoint failed: the model API" in str(stage.error)
    # Retried as a stage (the proxy could not: the client had part of it), 3 tries,
    # the CLI's retries off: a streamed request and its fallback per try.
    assert stage.attempts == 3 and len(rules) <= 3 * 2
    result = read_results(out)
    assert result.forwarded is not None and result.forwarded.cost_usd < 0.25
    assert code == 1


def test_an_outage_while_the_time_runs_out_is_the_endpoints_error(tmp_path: Path) -> None:
    # 529 on every try, each after 6 s: the proxy's 5 tries take over 30 s, so it
    # is still retrying when the stage's 20 s run out, while the CLI has 14 s to
    # start and send its first request (10 s of stage time was tight under load).
    limits = "{max_turns: 10, timeout_s: 20}"
    _, stderr, out, rules = _run(tmp_path, "http_status: 529", delay=6.0, limits=limits)
    stage = read_results(out).scenarios[0].stages[0]
    assert (stage.status, stage.limit_hit) == ("error", None), (stage.error, stderr)
    assert "the model endpoint failed: the model API answered HTTP 529" in str(stage.error)
    assert 1 <= len(rules) < 5  # answered at least once, and cut short of the proxy's 5 tries
    assert stage.attempts == 1  # the proxy owns the retries: the stage is not run again


def test_an_endpoint_that_stays_down_stops_the_run_after_three_stages(tmp_path: Path) -> None:
    scenarios = ("a1", "a2", "a3", "a4", "a5")
    code, stderr, out, rules = _run(
        tmp_path, "http_status: 503", "--jobs", "1", scenarios=scenarios
    )
    result = read_results(out)
    stages = [s.stages[0] for s in result.scenarios]
    assert [s.status for s in stages] == ["error"] * 3 + ["skipped"] * 2, stderr
    assert all("HTTP 503" in str(s.error) for s in stages[:3])
    assert all("the model endpoint is down" in str(s.error) for s in stages[3:])
    # One layer retries: the proxy's 5 tries per stage, nothing multiplies them.
    assert len(rules) == 3 * 5
    said = [line for line in stderr.splitlines() if "the model endpoint is down" in line]
    assert len(said) == 1, stderr
    assert code == 1
    assert json.loads((out / "results.json").read_text())["status"] == "completed"


def test_a_connection_lost_after_the_request_left_is_charged_its_input_and_named(
    tmp_path: Path,
) -> None:
    # The API takes each request of stage 5 and closes the connection without a
    # byte of answer. Before: each charged its whole reservation (max_tokens of
    # output that never came), and the stage said "upstream unreachable".
    code, stderr, out, rules = _run(tmp_path, "hang: 0.2", "--record", budget_usd=1.0)
    stage = read_results(out).scenarios[0].stages[0]
    assert (stage.status, stage.limit_hit) == ("error", None), (stage.error, stderr)
    assert (
        "the model endpoint failed: the model API gave no answer: the connection was lost "
        "after the request left"
    ) in str(stage.error)
    assert stage.attempts == 3  # the proxy cannot retry it (it may be billed): the stage is
    lines = [json.loads(line) for line in (out / "model-exchanges.jsonl").read_text().splitlines()]
    lost = [line for line in lines if line["status"] == 502]
    assert len(lost) == len(rules) >= 3
    assert {line["charged"] for line in lost} == {"input"}, lost  # streams: no output came
    assert all(0 < line["cost_usd"] < line["reserved_usd"] for line in lost)
    assert code == 1


def test_a_model_that_stalls_before_answering_is_waited_for(tmp_path: Path) -> None:
    # 20 s of silence before each answer of stage 5 (the issue saw 60 s survived):
    # no layer takes it for a lost connection; the stage completes, tried once.
    stall = (
        "rules:\n  - match: {command: demo:s5}\n    turns:\n"
        "      - tools: [{write: {path: out5.md, content: done}}]\n        delay: 20\n"
        "      - text: stage 5 done\n        delay: 20\n"
    )
    code, stderr, out, rules = _run(tmp_path, "", script=stall)
    stage = read_results(out).scenarios[0].stages[0]
    assert (stage.status, stage.attempts) == ("completed", 1), (stage.error, stderr)
    assert len(rules) == 2  # nothing retried
    assert code == 0
