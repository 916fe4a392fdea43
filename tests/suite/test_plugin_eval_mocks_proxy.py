"""An agent-played mock on the real-API path: the stand-in in the sandbox asks the model
through ci-evals' forwarding proxy with the run's token, never the key, and the
request is metered with the run's (`forwarded`), under its budget.

A local stub server stands in for api.anthropic.com; ci-evals holds the key in
its proxy, as in `tests/run/test_real_api_path.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.results.model import read_results
from tests.run.test_run_command import base_env, ci_evals
from tests.run_helpers import write_files

pytestmark = pytest.mark.slow

REAL_KEY = "sk-ant-real-key-never-in-a-sandbox-mocks"
FILES = {
    ".claude-plugin/plugin.json": '{"name": "tix"}',
    ".mcp.json": '{"mcpServers": {"wiki": {"command": "false"}}}',
    "evals/mocks/wiki/_server.md": "---\ntype: agent\ntools: [search]\n---\nThe product wiki.\n",
    "evals/find/prompt.md": "---\nruns: 1\n---\nFind the wiki page about login.\n",
    "evals/find/graders/page.md": (
        '---\ntype: regex\ntarget: mock_calls\n---\nLogin troubleshooting.*"verdict":"ok"\n'
    ),
}
STUB = """\
rules:
  - name: wiki-mock
    match: {system_contains: 'standing in for the MCP server "wiki"'}
    turns:
      - text: "Page: Login troubleshooting"
  - name: find
    match: {prompt_contains: "wiki page about login"}
    turns:
      - tools:
          - tool: {name: ToolSearch, input: {query: "select:mcp__plugin_tix_wiki__search"}}
      - tools:
          - tool: {name: mcp__plugin_tix_wiki__search, input: {q: login}}
      - text: "See the page."
"""


def test_an_agent_mock_asks_through_the_proxy_with_the_runs_token(tmp_path: Path) -> None:
    write_files(tmp_path / "tix", FILES)
    (tmp_path / "ci-evals.yaml").write_text("version: 1\nplugin: tix\nplugin_evals: {}\n")
    out = tmp_path / "out"
    with StubServer(loads_script(STUB)) as api:
        upstream = api.cli_env()["ANTHROPIC_BASE_URL"]
        env = base_env(ANTHROPIC_API_KEY=REAL_KEY, ANTHROPIC_BASE_URL=upstream)
        proc = ci_evals("run", "--model", "claude-test", "--out", str(out), cwd=tmp_path, env=env)
        requests = api.requests
    assert proc.returncode == 0, proc.stdout + proc.stderr
    mocked = [r for r in requests if r.rule == "wiki-mock"]
    assert len(mocked) == 1 and mocked[0].model == "claude-haiku-5-5"  # the judge model
    result = read_results(out)
    assert result.forwarded is not None and result.forwarded.requests == len(requests)
    (stage,) = result.scenarios[0].stages
    assert stage.status == "passed", stage
    (mocks,) = out.glob("find/*/plugin-eval-mocks.json")
    assert json.loads(mocks.read_text())["calls"]["agent"] == 1
    assert REAL_KEY not in "".join(p.read_text(errors="replace") for p in out.rglob("*.json*"))
