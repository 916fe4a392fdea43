"""tasks/mcp-sqlite-server end to end: `ci-evals run` on the stub model's scripted agent
(the loop agent's tools, a real sandbox, the hidden tests and the mcp grader)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.results.model import read_results
from tests.paths import REPO
from tests.sandbox_helpers import needs

TASK = REPO / "tasks" / "mcp-sqlite-server"
SUITE = TASK / "ci-evals.yaml"
STUB = TASK / "stub.yaml"


def run_task(tmp_path: Path, isolation: str, stub: Path = STUB) -> tuple[int, Path]:
    out = tmp_path / "run"
    argv = ["run", "--suite", str(SUITE), "--model", f"stub:{stub}", "--out", str(out)]
    return main([*argv, "--isolation", isolation]), out


def criteria(out: Path) -> dict[str, bool]:
    [stage] = read_results(out).scenarios[0].stages
    assert stage.grading is not None
    return {c.id: c.passed for g in stage.grading.graders for c in g.criteria}


@pytest.mark.parametrize(
    "isolation",
    [
        "bwrap",
        pytest.param("docker", marks=pytest.mark.docker),
    ],
)
def test_the_scripted_agent_builds_a_server_that_passes(tmp_path: Path, isolation: str) -> None:
    needs(isolation)
    code, out = run_task(tmp_path, isolation)
    result = read_results(out)
    [stage] = result.scenarios[0].stages
    assert (result.sandbox, stage.status, code) == (isolation, "passed", 0), stage.error
    assert stage.turns == 5
    assert stage.grading is not None and stage.grading.binary_score == 100.0
    found = criteria(out)
    assert {"hidden/entry-point", "hidden/round-trip", "server/initialize"} <= set(found)
    assert all(found.values())
    produced = {change.path for change in stage.produced}
    assert "server.py" in produced and "hidden-results.json" not in produced


@pytest.mark.slow
def test_the_scaffold_alone_fails_on_the_sub_tests_it_misses(tmp_path: Path) -> None:
    """An agent that submits at once: the scaffold compiles but answers nothing."""
    stub = tmp_path / "submit.yaml"
    stub.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": {"prompt_contains": "SQLite MCP server"},
                        "turns": [{"tools": [{"tool": {"name": "final_submit", "input": {}}}]}],
                    }
                ]
            }
        )
    )
    code, out = run_task(tmp_path, "bwrap", stub)
    assert code == 1
    found = criteria(out)
    assert found["hidden/entry-point"] and found["hidden/compiles"]
    assert not found["hidden/round-trip"] and not found["server/initialize"]


def test_the_hidden_tests_are_not_in_the_agents_sandbox(tmp_path: Path) -> None:
    stub = tmp_path / "peek.yaml"
    peek = {"name": "run_command", "input": {"command": f"ls {TASK / 'tests'}; ls .."}}
    stub.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": {"prompt_contains": "SQLite MCP server"},
                        "turns": [
                            {"tools": [{"tool": peek}]},
                            {"tools": [{"tool": {"name": "final_submit", "input": {}}}]},
                        ],
                    }
                ]
            }
        )
    )
    run_task(tmp_path, "bwrap", stub)
    [trajectory] = (tmp_path / "run").glob("*/1-build/trajectory.jsonl")
    records = [json.loads(line) for line in trajectory.read_text().splitlines()]
    [peeked] = [r for r in records if r["type"] == "ToolResult" and r["tool"] == "run_command"]
    assert "No such file or directory" in peeked["output"]
    assert "check.py" not in peeked["output"]


def test_the_real_api_path_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model NAME`: the loop's model calls go to the forwarding proxy holding the key
    (a stub server stands in for api.anthropic.com); the tools never see either."""
    from ci_evals.endpoints.stub_model import StubServer, load_script  # noqa: PLC0415

    real_key = "sk-ant-real-key-for-the-proxy-only"
    with StubServer(load_script(STUB)) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", real_key)
        out = tmp_path / "run"
        code = main(
            ["run", "--suite", str(SUITE), "--model", "claude-sonnet-4-5", "--out", str(out),
             "--isolation", "bwrap", "--record"]
        )  # fmt: skip
        seen = [r for r in api.requests if r.outcome == "turn"]
    result = read_results(out)
    assert (code, result.model_endpoint, result.model) == (0, "anthropic", "claude-sonnet-4-5")
    assert len(seen) == 5 and {r.model for r in seen} == {"claude-sonnet-4-5"}
    assert all(not r.stream for r in seen)
    recording = (out / "model-exchanges.jsonl").read_text()
    assert recording.strip() and real_key not in recording
    [trajectory] = out.glob("*/1-build/trajectory.jsonl")
    assert real_key not in trajectory.read_text()
