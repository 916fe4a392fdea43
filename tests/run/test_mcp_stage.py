"""`ci-evals run` of a stage graded by an `mcp` grader: the stub model's agent writes an MCP
server with the CLI's Write tool; the grader starts it in the stage's sandbox and checks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.results.model import read_results
from ci_evals.sandbox.bwrap import available
from tests.paths import DATA

SERVER = DATA / "mcp" / "stdlib_server.py"


def make_suite(root: Path, mode: str) -> tuple[Path, Path]:
    plugin = root / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "mcpdemo"}))
    (plugin / "commands").mkdir()
    (plugin / "commands" / "build.md").write_text(
        "---\ndescription: build the server\n---\nBuild an MCP server in server.py.\n"
    )
    (root / "fixtures").mkdir()
    (root / "ci-evals.yaml").write_text(
        f"""version: 1
plugin: plugin
fixtures: fixtures
stage_map: null
limits: {{max_turns: 10, timeout_s: 120}}
stages:
  - name: build
    prompt: "/mcpdemo:build"
    mcp:
      - id: server
        command: [python3, server.py, {mode}]
        protocol: 2025-11-25
        timeout_s: 5
scenarios:
  - id: one
    inputs: {{}}
"""
    )
    content = json.dumps(SERVER.read_text())
    stub = root / "stub.yaml"
    stub.write_text(
        "rules:\n"
        "  - name: build\n"
        "    match: {command: mcpdemo:build}\n"
        "    turns:\n"
        "      - tools:\n"
        f"          - write: {{path: server.py, content: {content}}}\n"
        '      - text: "server written"\n'
    )
    return root / "ci-evals.yaml", stub


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "status"), [("none", "passed"), ("logs-on-stdout", "failed")])
def test_a_stage_graded_by_an_mcp_grader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, status: str
) -> None:
    if (reason := available()) is not None:
        pytest.fail(reason)
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    suite, stub = make_suite(tmp_path / "suite", mode)
    out = tmp_path / "run"
    code = main(["run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", str(out)])
    result = read_results(out)
    assert (result.sandbox, result.isolated) == ("bwrap", True)  # the grader ran there too
    [stage] = result.scenarios[0].stages
    assert stage.status == status
    assert code == (0 if status == "passed" else 1)
    assert stage.grading is not None
    [grader] = stage.grading.graders
    assert grader.grader == "mcp:server"
    failed = {c.id for c in grader.criteria if not c.passed}
    assert failed == (set() if mode == "none" else {"server/stdout-clean"})
    assert all(c.detail.startswith("MCP 2025-11-25: ") for c in grader.criteria)
    assert grader.raw_output is not None and grader.raw_output.path is not None
    assert (out / grader.raw_output.path).is_file()
