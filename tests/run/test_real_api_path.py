"""`ci-evals run` on the real-API path: the key stays in the forwarding proxy.

A local stub server stands in for api.anthropic.com (`ANTHROPIC_BASE_URL`), so
the whole path runs offline: ci-evals opens the `anthropic` endpoint, which
starts `endpoints.proxy` holding the key; the CLI (in its bubblewrap sandbox)
gets the proxy's URL and a per-run token.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ci_evals.endpoints.ledger import worst_case
from ci_evals.endpoints.pricing import Pricing
from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.results.model import read_results
from tests.run.test_run_command import base_env, ci_evals
from tests.run_helpers import make_suite

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
    # The first request's worst case (claude-3-haiku: its body, max_tokens) fits
    # in $0.5; its response reports 2,000,000 input tokens ($0.50), more than
    # its body could hold: the budget is spent, and no second request goes out
    # (the CLI's own max_budget_usd, lowered to the run's, or the proxy's 402).
    usage = "\n        usage: {input_tokens: 2000000, output_tokens: 100}"
    suite, _ = make_suite(tmp_path, budget_usd=0.5)
    out = tmp_path / "out"
    with StubServer(loads_script(_script(usage))) as api:
        env = base_env(
            ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=api.cli_env()["ANTHROPIC_BASE_URL"]
        )
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", "claude-3-haiku", "--from-stage", "5",
            "--out", str(out), cwd=tmp_path, env=env,
        )  # fmt: skip
        answered = len(api.requests)
    assert proc.returncode == 1, proc.stderr
    result = read_results(out)
    stage = result.scenarios[0].stages[0]
    assert (stage.status, stage.limit_hit) == ("limit", "budget"), stage.error
    assert "budget" in (stage.error or "")
    assert answered == 1  # the second request never reached the API
    assert result.forwarded is not None
    assert result.forwarded.requests == 1


FIRE = """\
import json, os, threading, urllib.error, urllib.request
url = os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages"
key = os.environ["ANTHROPIC_API_KEY"]
body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 20000, "stream": True,
    "messages": [{"role": "user", "content": "FIRE"}]}).encode()
codes = []
def one():
    headers = {"x-api-key": key, "content-type": "application/json"}
    request = urllib.request.Request(url, body, headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            codes.append(response.status)
    except urllib.error.HTTPError as exc:
        codes.append(exc.code)
threads = [threading.Thread(target=one) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
print(sorted(codes))
"""
FIRE_BODY = json.dumps(
    {
        "model": "claude-sonnet-4-5",
        "max_tokens": 20000,
        "stream": True,
        "messages": [{"role": "user", "content": "FIRE"}],
    }
).encode()


def test_the_agents_own_concurrent_calls_stay_in_budget_and_in_the_cost(tmp_path: Path) -> None:
    # The attack from inside a stage: the agent's script fires 12 parallel
    # requests with the run's token, each nearly its worst case ($0.303 of $0.313).
    # The proxy forwards only what fits in the budget; results.json's cost is what
    # the proxy forwarded, the agent's own calls included.
    script = (
        "rules:\n"
        "  - match: {prompt_contains: FIRE}\n    repeat_last: true\n    turns:\n"
        "      - text: fired\n        usage: {input_tokens: 1000, output_tokens: 20000}\n"
        "  - match: {command: demo:s5}\n    turns:\n"
        "      - tools:\n"
        f"          - write: {{path: fire.py, content: {json.dumps(FIRE)}}}\n"
        '          - bash: "python3 fire.py > fired.txt 2>&1"\n'
        "      - text: done\n"
    )
    budget = 2.0
    suite, _ = make_suite(tmp_path, budget_usd=budget)
    out = tmp_path / "out"
    with StubServer(loads_script(script)) as api:
        proc = _run_on_the_api(api, suite, out, "--record")
        fired = [r for r in api.requests if r.outcome == "turn" and r.rule == "rules[0]"]
        reached = [r for r in api.requests if r.path.startswith("/v1/messages")]
    assert proc.returncode in (0, 1), proc.stderr
    codes = (out / "acme" / "5-s5" / "produced" / "fired.txt").read_text()
    assert "402" in codes and "200" in codes, codes
    result = read_results(out)
    forwarded = result.forwarded
    assert forwarded is not None
    exchanges = [
        json.loads(line) for line in (out / "model-exchanges.jsonl").read_text().splitlines()
    ]
    sent = [e for e in exchanges if e["outcome"] == "forwarded"]
    assert forwarded.requests == len(sent) == len(reached)
    assert forwarded.refused == sum(e["outcome"] == "refused_budget" for e in exchanges)
    # results.json's cost is what the proxy forwarded, the agent's own calls in it.
    assert result.total_cost_usd == pytest.approx(forwarded.cost_usd)
    assert forwarded.cost_usd == pytest.approx(sum(e["cost_usd"] for e in exchanges))
    # Priced from what the stand-in answered: the CLI's turns report no usage.
    own = len(fired) * (1000 * 3.0 + 20000 * 15.0) / 1e6
    assert own > 0
    assert forwarded.cost_usd == pytest.approx(own)
    assert result.stages_cost_usd < own  # the CLI never saw those calls
    worst = worst_case(FIRE_BODY, Pricing()).cost_usd
    assert forwarded.cost_usd <= budget + worst
    assert read_results(out).forwarded_note.startswith(f"; {forwarded.requests} model request")


def _run_on_the_api(
    api: StubServer, suite: Path, out: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """`ci-evals run` of stage 5 on the real-API path, `api` standing in for the API."""
    env = base_env(
        ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=api.cli_env()["ANTHROPIC_BASE_URL"]
    )
    return ci_evals(
        "run", "--suite", str(suite), "--model", "claude-sonnet-4-5", "--from-stage", "5",
        *extra, "--out", str(out), cwd=suite.parent, env=env,
    )  # fmt: skip


# N parallel requests, each answered after `delay`: with one slot at the proxy
# they cannot take less than N x delay (a lower bound: load only adds to it).
TIMED_FIRE = FIRE.replace(
    "for t in threads: t.start()",
    "import time\nbegan = time.monotonic()\nfor t in threads: t.start()",
).replace("print(sorted(codes))", "print(sorted(codes), round(time.monotonic() - began, 2))")
SLOW = 0.4


@pytest.mark.parametrize(("concurrency", "at_least_s"), [(1, 12 * SLOW), (None, 0.0)])
def test_the_suites_max_concurrency_holds_at_the_proxy(
    tmp_path: Path, concurrency: int | None, at_least_s: float
) -> None:
    script = (
        "rules:\n"
        "  - match: {prompt_contains: FIRE}\n    repeat_last: true\n    turns:\n"
        f"      - text: fired\n        delay: {SLOW}\n"
        "  - match: {command: demo:s5}\n    turns:\n"
        "      - tools:\n"
        f"          - write: {{path: fire.py, content: {json.dumps(TIMED_FIRE)}}}\n"
        '          - bash: "python3 fire.py > fired.txt 2>&1"\n'
        "      - text: done\n"
    )
    suite, _ = make_suite(tmp_path)
    if concurrency is not None:
        suite.write_text(suite.read_text() + f"max_concurrency: {concurrency}\n")
    out = tmp_path / "out"
    with StubServer(loads_script(script)) as api:
        proc = _run_on_the_api(api, suite, out)
    assert proc.returncode in (0, 1), proc.stderr
    fired = (out / "acme" / "5-s5" / "produced" / "fired.txt").read_text().split("] ")
    assert fired[0] == "[" + ", ".join(["200"] * 12), fired
    assert float(fired[1]) >= at_least_s, fired
    if concurrency is None:  # the default, 4 at once: well under one at a time
        assert float(fired[1]) < 12 * SLOW, fired
