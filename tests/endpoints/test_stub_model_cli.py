"""The real Claude Code CLI (via claude_agent_sdk.query) against the stub model.

Each test runs the bundled CLI in its own HOME/TMPDIR/XDG_RUNTIME_DIR under
tmp_path (see tests/stub_helpers.py). What the CLI does with faults was
measured with CLI 2.1.332 and is documented in docs/stub-model.md.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, loads_script
from tests.stub_helpers import run_query

pytestmark = pytest.mark.slow

# Keep fault tests short: no retry back-off (the CLI's default is 10 retries, ~2 minutes).
NO_RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "0"}


def stub(text: str, base_dir: Path | None = None) -> StubServer:
    return StubServer(loads_script(textwrap.dedent(text), "stub.yaml", base_dir=base_dir))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def make_plugin(root: Path) -> Path:
    """A tiny plugin `demo` with one command and one subagent."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "demo", "version": "0.1.0", "description": "test plugin"})
    )
    (root / "commands").mkdir()
    (root / "commands" / "plan.md").write_text(
        "---\ndescription: Plan the lab\n---\nPlan the lab for $ARGUMENTS.\n"
    )
    (root / "agents").mkdir()
    (root / "agents" / "helper.md").write_text(
        "---\nname: helper\ndescription: Writes notes\ntools: Read, Write\n---\n"
        "You are the note-taking helper of the demo plugin.\n"
    )
    return root


def test_a_text_turn(tmp_path: Path, workspace: Path) -> None:
    with stub("rules:\n  - turns: [{text: 'Hello from the stub in {cwd}'}]\n") as server:
        run = run_query(server, "say hello", workspace, tmp_path)
        records = server.requests
    assert run.error is None, run.stderr
    result = run.result
    assert (result.is_error, result.num_turns) == (False, 1)
    assert result.result == f"Hello from the stub in {workspace}"
    assert result.total_cost_usd == 0  # zero usage by default
    assert [(r.rule, r.turn, r.outcome) for r in records] == [("rules[0]", 1, "turn")]


def test_write_then_bash_in_the_working_directory(tmp_path: Path, workspace: Path) -> None:
    script = """
    rules:
      - turns:
          - tools:
              - write: {path: out/notes.md, content: "# Notes\\n{\\"ok\\": true}\\n"}
          - tools:
              - bash: "wc -l < out/notes.md > out/count.txt"
          - text: written
    """
    with stub(script) as server:
        run = run_query(server, "write notes", workspace, tmp_path)
    assert run.error is None, run.stderr
    assert run.result.result == "written"
    assert (workspace / "out" / "notes.md").read_text() == '# Notes\n{"ok": true}\n'
    assert (workspace / "out" / "count.txt").read_text().strip() == "2"


def test_plugin_command_and_subagent_are_routed_to_their_rules(
    tmp_path: Path, workspace: Path
) -> None:
    plugin = make_plugin(tmp_path / "plugin")
    script = """
    rules:
      - name: plan
        match: {command: demo:plan}
        turns:
          - tools:
              - write: {path: plan.md, content: "Plan for {args}\\n"}
              - agent: {name: demo:helper, prompt: "Take notes on {arg1}"}
          - text: "planned {args}"
      - name: helper
        match: {agent: demo:helper}
        turns:
          - tools: [{write: {path: notes.md, content: "{prompt}\\n"}}]
          - text: notes taken
      - name: helper-by-body
        match: {system_contains: note-taking helper of the demo plugin}
        turns: [{text: "unused: the agent rule comes first"}]
    """
    with stub(script) as server:
        run = run_query(server, "/demo:plan Acme Corp", workspace, tmp_path, plugins=[plugin])
        records = server.requests
    assert run.error is None, run.stderr
    assert len(run.results) == 1  # a foreground subagent: one result
    assert run.result.result == "planned Acme Corp"
    assert (workspace / "plan.md").read_text() == "Plan for Acme Corp\n"
    assert (workspace / "notes.md").read_text() == "Take notes on Acme\n"
    assert sorted((r.rule, r.turn) for r in records) == [
        ("helper", 1),
        ("helper", 2),
        ("plan", 1),
        ("plan", 2),
    ]
    helper = [r for r in records if r.rule == "helper"]
    assert all(r.subagent and r.agent == "demo:helper" for r in helper)
    assert {r.command for r in records if r.rule == "plan"} == {"demo:plan"}


def test_usage_makes_a_cost(tmp_path: Path, workspace: Path) -> None:
    script = """
    rules:
      - turns:
          - text: expensive
            usage: {input_tokens: 100000, output_tokens: 20000}
    """
    with stub(script) as server:
        run = run_query(server, "hi", workspace, tmp_path)
    assert run.error is None, run.stderr
    assert run.result.total_cost_usd > 0
    assert run.result.usage["input_tokens"] == 100000
    assert run.result.usage["output_tokens"] == 20000


def test_repeat_last_drives_a_stage_into_max_turns(tmp_path: Path, workspace: Path) -> None:
    script = """
    rules:
      - repeat_last: true
        turns:
          - tools: [{bash: "echo again >> log.txt"}]
    """
    with stub(script) as server:
        run = run_query(server, "loop", workspace, tmp_path, max_turns=3)
    assert run.result.subtype == "error_max_turns"
    assert (workspace / "log.txt").read_text().count("again") == 3


def test_http_500_is_retried_then_reported(tmp_path: Path, workspace: Path) -> None:
    script = """
    rules:
      - turns:
          - fault: {http_status: 500, message: scripted outage}
    """
    with stub(script) as server:
        run = run_query(server, "hi", workspace, tmp_path, env={"CLAUDE_CODE_MAX_RETRIES": "1"})
        records = server.requests
    # One retry, then the CLI gives up: an error result, and the SDK raises after it.
    assert [(r.outcome, r.status) for r in records] == [("fault", 500), ("fault", 500)]
    assert run.result.is_error
    assert "API Error: 500 scripted outage" in run.result.result
    assert run.error is not None


def test_a_transient_529_is_retried_through(tmp_path: Path, workspace: Path) -> None:
    script = """
    rules:
      - turns:
          - fault: {http_status: 529, times: 1}
            text: recovered
    """
    with stub(script) as server:
        run = run_query(server, "hi", workspace, tmp_path, env={"CLAUDE_CODE_MAX_RETRIES": "1"})
    assert run.error is None, run.stderr
    assert run.result.result == "recovered"


def test_malformed_sse_is_an_error(tmp_path: Path, workspace: Path) -> None:
    with stub("rules:\n  - turns: [{fault: {malformed_sse: true}}]\n") as server:
        run = run_query(server, "hi", workspace, tmp_path, env=NO_RETRIES)
        records = server.requests
    # The CLI falls back to one non-streaming request, which is malformed too.
    assert [r.stream for r in records] == [True, False]
    assert run.result.is_error
    assert "malformed response" in run.result.result
    assert any("Could not parse message into JSON" in line for line in run.stderr)


def test_a_hang_ends_at_the_clients_timeout(tmp_path: Path, workspace: Path) -> None:
    with stub("rules:\n  - turns: [{fault: {hang: forever}}]\n") as server:
        run = run_query(
            server, "hi", workspace, tmp_path, env={**NO_RETRIES, "API_TIMEOUT_MS": "1500"}
        )
        records = server.requests
    assert [r.outcome for r in records] == ["fault"]
    assert run.result.is_error
    assert "Request timed out" in run.result.result


def test_no_rule_matched_ends_the_conversation_clearly(tmp_path: Path, workspace: Path) -> None:
    with stub("rules:\n  - match: {command: demo:other}\n    turns: [{text: x}]\n") as server:
        run = run_query(server, "an unexpected prompt", workspace, tmp_path)
        unmatched = server.unmatched()
    assert run.error is None, run.stderr
    assert run.result.result.startswith("stub: no rule matched this request")
    assert "an unexpected prompt" in run.result.result
    assert [r.outcome for r in unmatched] == ["unmatched"]
