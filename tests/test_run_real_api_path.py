"""`ci-evals run` on the real-API path: the key stays in the forwarding proxy.

A local stub server stands in for api.anthropic.com (`ANTHROPIC_BASE_URL`), so
the whole path runs offline: ci-evals opens the `anthropic` endpoint, which
starts `endpoints.proxy` holding the key; the CLI (in its bubblewrap sandbox)
gets the proxy's URL and a per-run token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.results.model import read_results
from tests.run_helpers import make_suite
from tests.test_run_command import base_env, ci_evals

pytestmark = pytest.mark.slow

REAL_KEY = "sk-ant-real-key-never-in-a-sandbox-0123"


def _script(usage: str = "") -> str:
    return (
        "rules:\n"
        "  - match: {command: demo:s5}\n    turns:\n"
        f'      - tools: [{{bash: "env > env.txt"}}]{usage}\n'
        f"      - text: done{usage}\n"
    )


def test_the_agent_gets_a_run_token_and_the_key_stays_in_the_proxy(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path)
    out = tmp_path / "out"
    with StubServer(loads_script(_script())) as api:
        upstream = api.cli_env()["ANTHROPIC_BASE_URL"]
        env = base_env(ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=upstream)
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", "claude-test", "--from-stage", "5",
            "--record", "--out", str(out), cwd=tmp_path, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert api.requests, "the stand-in API saw no request"
    dumped = (out / "acme" / "5-s5" / "produced" / "env.txt").read_text()
    agent_env = dict(line.split("=", 1) for line in dumped.splitlines() if "=" in line)
    assert REAL_KEY not in dumped
    assert agent_env["ANTHROPIC_API_KEY"] != REAL_KEY
    # The agent talks to the proxy (the relay inside its namespace), not the API.
    assert agent_env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    assert agent_env["ANTHROPIC_BASE_URL"] != upstream
    result = read_results(out)
    assert (result.model_endpoint, result.sandbox, result.isolated) == ("anthropic", "bwrap", True)
    recording = (out / "model-exchanges.jsonl").read_text()
    assert recording.strip(), "--record wrote nothing"
    assert REAL_KEY not in recording and agent_env["ANTHROPIC_API_KEY"] not in recording
    for line in recording.splitlines():
        assert json.loads(line)["path"].startswith("/v1/messages")


def test_the_run_budget_is_enforced_at_the_proxy(tmp_path: Path) -> None:
    # Each turn costs ~$0.75 at the highest known price (the proxy prices an
    # unknown model at the ceiling): the second request is over a $0.5 budget.
    usage = "\n        usage: {input_tokens: 20000, output_tokens: 6000}"
    suite, _ = make_suite(tmp_path, budget_usd=0.5)
    out = tmp_path / "out"
    with StubServer(loads_script(_script(usage))) as api:
        env = base_env(
            ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=api.cli_env()["ANTHROPIC_BASE_URL"]
        )
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", "claude-unknown-9", "--from-stage", "5",
            "--out", str(out), cwd=tmp_path, env=env,
        )  # fmt: skip
        answered = len(api.requests)
    assert proc.returncode == 1, proc.stderr
    stage = read_results(out).scenarios[0].stages[0]
    assert (stage.status, stage.limit_hit) == ("limit", "budget"), stage.error
    assert "budget" in (stage.error or "")
    assert answered == 1  # the proxy refused the second request: it never reached the API
