"""MCP mocks: the same cases run by the bundled `claude plugin eval` and by ci-evals
give the same per-case scores, and an agent mock's adopted `.replay/` recording is
replayed by both (issue 32, part 1: mocks).

One plugin of our own declaring two MCP servers in `.mcp.json` (`tracker`,
mocked; `other`, not mocked: its command would leave a file if it ever ran)
and cases using: a fixed responder with `expect:` and `{{input.id}}`, one with
`error: true`, a standalone mock (a folder no server of the plugin has), an
agent-played server (`_server.md`) answered by the stub model through the run's
endpoint, an `expect:` violation that stops the run, and every target over the
calls (`mock_calls` for `regex` and an `llm` focus; `tool_used`/`tool_order`
by the CLI's tool names). Both tools run against one stub model server; the
agent mock's answer is recorded by both under the same file name (the CLI's
recording key), then adopted into `mocks/.replay/` and replayed by both with no
model call, while the stub would now answer something else.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.run_helpers import plugin_eval, run_ci_evals, write_files

pytestmark = pytest.mark.slow

_CALL_OK = (
    r'^\{"tool":"mcp__plugin_tix_tracker__get_ticket","input":\{"id":"T-12"\},'
    r'"output":"\{\\"id\\": \\"T-12\\", \\"title\\": \\"Login fails\\"\}","verdict":"ok"\}$'
)

PLUGIN_FILES = {
    ".claude-plugin/plugin.json": '{"name": "tix", "version": "0.1.0"}\n',
    ".mcp.json": json.dumps(
        {
            "mcpServers": {
                "tracker": {"command": "false"},
                "wiki": {"command": "false"},
                "other": {"command": "sh", "args": ["-c", "touch started-other; sleep 5"]},
            }
        }
    ),
    "evals/mocks/tracker/get_ticket.md": (
        '---\nexpect: {id: "/^T-\\\\d+$/"}\n---\n{"id": "{{input.id}}", "title": "Login fails"}\n'
    ),
    "evals/mocks/tracker/close.md": "---\nerror: true\n---\nclosing is not allowed\n",
    "evals/mocks/tracker/_tools.json": json.dumps(
        {
            "tools": [
                {
                    "name": "get_ticket",
                    "description": "Fetch a ticket by id",
                    "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
                }
            ]
        }
    ),
    "evals/mocks/wiki/_server.md": (
        "---\ntype: agent\ntools: [search]\nabort_when: |\n  the agent searches for passwords\n"
        "---\nThe product wiki: pages about login, billing and exports.\n"
    ),
    "evals/mocks/notes/read.md": "My notes: buy milk.\n",
    # Fixed responders, an error, every target over the calls, the unmocked server.
    "evals/ticket/prompt.md": "---\nruns: 1\n---\nLook up ticket T-12 and close it.\n",
    "evals/ticket/graders/one-ok.md": (
        '---\ntype: regex\ntarget: mock_calls\nmatch: "count:1"\n---\n"verdict":"ok"\n'
    ),
    "evals/ticket/graders/exact.md": (
        f"---\ntype: regex\ntarget: mock_calls\nflags: m\n---\n{_CALL_OK}\n"
    ),
    "evals/ticket/graders/refused.md": (
        '---\ntype: regex\ntarget: mock_calls\n---\n"output":"closing is not allowed",'
        '"isError":true,"verdict":"tool_error"\n'
    ),
    "evals/ticket/graders/looked-up.md": (
        "---\ntype: tool_used\ntool: mcp__plugin_tix_tracker__get_ticket\ninput_match: T-12\n---\n"
    ),
    "evals/ticket/graders/then-closed.md": (
        "---\ntype: tool_order\nbefore: mcp__plugin_tix_tracker__get_ticket\n"
        "after: mcp__plugin_tix_tracker__close\n---\n"
    ),
    "evals/ticket/graders/judged.md": (
        "---\ntype: llm\nfocus: mock_calls\n---\nThe ticket lookup answered Login fails.\n"
    ),
    "evals/ticket/graders/said.md": "---\ntype: regex\n---\nLogin fails\n",
    "evals/ticket/graders/other-not-started.md": (
        "---\ntype: file_exists\npath: started-other\nexists: false\n---\n"
    ),
    # A standalone mock: served as `mcp__notes__read`.
    "evals/notes/prompt.md": "---\nruns: 1\n---\nRead my notes.\n",
    "evals/notes/graders/read.md": (
        '---\ntype: regex\ntarget: mock_calls\n---\n"tool":"mcp__notes__read".*buy milk\n'
    ),
    # The agent-played server, answered by the stub (then by the adopted recording).
    "evals/wiki/prompt.md": "---\nruns: 1\n---\nFind the wiki page about login.\n",
    "evals/wiki/graders/page.md": (
        '---\ntype: regex\ntarget: mock_calls\n---\nLogin troubleshooting.*"verdict":"ok"\n'
    ),
    "evals/wiki/graders/told.md": "---\ntype: regex\n---\nSee the page\n",
    # An `expect:` violation: the run stops before the agent's last words, not graded.
    "evals/bad-id/prompt.md": "---\nruns: 1\n---\nLook up ticket 12.\n",
    "evals/bad-id/graders/stopped.md": "---\ntype: regex\nmatch: not_contains\n---\nAll done\n",
    "evals/bad-id/graders/called.md": (
        "---\ntype: tool_used\ntool: mcp__plugin_tix_tracker__get_ticket\n---\n"
    ),
}

SELECT = "select:mcp__plugin_tix_tracker__get_ticket,mcp__plugin_tix_tracker__close"
WIKI_SELECT = "select:mcp__plugin_tix_wiki__search"
STUB = f"""\
rules:
  - name: wiki-mock
    match: {{system_contains: 'standing in for the MCP server "wiki"'}}
    turns:
      - text: "{{{{WIKI}}}}"
  - name: judge
    match: {{system_contains: "evaluation judge", prompt_contains: "answered Login fails"}}
    turns:
      - text: "PASS"
  - name: ticket
    match: {{prompt_contains: "ticket T-12 and close"}}
    turns:
      - tools:
          - tool: {{name: ToolSearch, input: {{query: "{SELECT}", max_results: 5}}}}
      - tools:
          - tool: {{name: mcp__plugin_tix_tracker__get_ticket, input: {{id: T-12}}}}
      - tools:
          - tool: {{name: mcp__plugin_tix_tracker__close, input: {{id: T-12}}}}
      - text: "Ticket T-12: Login fails. I could not close it."
  - name: notes
    match: {{prompt_contains: "Read my notes"}}
    turns:
      - tools:
          - tool: {{name: ToolSearch, input: {{query: "select:mcp__notes__read", max_results: 5}}}}
      - tools:
          - tool: {{name: mcp__notes__read, input: {{}}}}
      - text: "Your notes say to buy milk."
  - name: wiki
    match: {{prompt_contains: "wiki page about login"}}
    turns:
      - tools:
          - tool: {{name: ToolSearch, input: {{query: "{WIKI_SELECT}", max_results: 5}}}}
      - tools:
          - tool: {{name: mcp__plugin_tix_wiki__search, input: {{q: login}}}}
      - text: "See the page."
  - name: bad-id
    match: {{prompt_contains: "ticket 12."}}
    turns:
      - tools:
          - tool: {{name: ToolSearch, input: {{query: "{SELECT}", max_results: 5}}}}
      - tools:
          - tool: {{name: mcp__plugin_tix_tracker__get_ticket, input: {{id: "12"}}}}
      - text: "All done."
"""
# `bad-id`: the CLI grades no run a mock aborted (0), whatever its graders say.
EXPECTED = {"ticket": 1.0, "notes": 1.0, "wiki": 1.0, "bad-id": 0.0}


def _stub(root: Path, wiki: str) -> Path:
    path = root / f"stub-{len(list(root.glob('stub-*')))}.yaml"
    path.write_text(STUB.replace("{{WIKI}}", wiki))
    return path


def _cli(plugin: Path, stub: Path, out: Path) -> dict[str, object]:
    with StubServer(load_script(stub)) as server:
        flags = ("--json", str(out / "out.json"), "--output-dir", str(out / "results"))
        done = plugin_eval(
            plugin, out / "home", server.url, *flags, "--judge-model", "claude-haiku-5-5"
        )
    assert (out / "out.json").is_file(), done.stdout + done.stderr
    document: dict[str, object] = json.loads((out / "out.json").read_text())
    return document


def _cli_scores(document: dict[str, object]) -> dict[str, float]:
    cases = document["cases"]
    assert isinstance(cases, list)
    return {c["name"]: c["aggregates"]["score"] for c in cases}


def _ci_evals(plugin: Path, stub: Path, run_dir: Path) -> dict[str, float]:
    suite = plugin.parent / "ci-evals.yaml"
    suite.write_text(f"version: 1\nplugin: {plugin.name}\nplugin_evals: {{}}\n")
    done = run_ci_evals(plugin.parent, "run", "--model", f"stub:{stub}", "--out", str(run_dir))
    results = run_dir / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    document = json.loads(results.read_text())
    for scenario in document["scenarios"]:
        for stage in scenario["stages"]:
            assert stage["status"] in ("passed", "failed"), (scenario["id"], stage)
    return {
        s["scenario"]: s["summary"]["binary_score"]["mean"] / 100 for s in document["summaries"]
    }


def test_mocks_score_alike_and_an_adopted_recording_replays_in_both(tmp_path: Path) -> None:
    plugin = write_files(tmp_path / "tix", PLUGIN_FILES)
    live = _stub(tmp_path, "Page: Login troubleshooting (wiki/login)")

    cli = _cli(plugin, live, tmp_path / "cli-1")
    assert _cli_scores(cli) == EXPECTED, json.dumps(cli["cases"], indent=1)[:4000]
    ours = _ci_evals(plugin, live, tmp_path / "run-1")
    assert ours == pytest.approx(EXPECTED)

    # The agent mock's answer, recorded by both under the CLI's recording key.
    (theirs,) = (tmp_path / "cli-1" / "results").glob("mock-recordings/wiki/search-*.json")
    (mine,) = (tmp_path / "run-1").glob("wiki/*/mock-recordings/wiki/search-*.json")
    assert mine.name == theirs.name
    assert json.loads(mine.read_text())["output"] == json.loads(theirs.read_text())["output"]
    adopt = (mine.parent.parent / "ADOPT.txt").read_text()
    assert f"wiki/{mine.name} sha256=" in adopt and "mocks/.replay/wiki/" in adopt
    # Nothing written into the plugin's own folder by ci-evals.
    assert not (plugin / "evals" / "mocks" / ".replay").exists()

    # Adopted: both replay it with no model call, though the stub now says otherwise.
    replay = plugin / "evals" / "mocks" / ".replay" / "wiki"
    replay.mkdir(parents=True)
    shutil.copy(theirs, replay / theirs.name)
    changed = _stub(tmp_path, "Page: nothing found")
    cli = _cli(plugin, changed, tmp_path / "cli-2")
    assert _cli_scores(cli) == EXPECTED
    (wiki,) = [c for c in cli["cases"] if c["name"] == "wiki"]  # type: ignore[union-attr]
    assert wiki["arms"]["with"][0]["mocks"]["calls"]["replay"] == {"hits": 1, "misses": 0}
    assert _ci_evals(plugin, changed, tmp_path / "run-2") == pytest.approx(EXPECTED)
    (mocks,) = (tmp_path / "run-2").glob("wiki/*/plugin-eval-mocks.json")
    assert json.loads(mocks.read_text())["calls"]["replay_hits"] == 1
    assert not list((tmp_path / "run-2").glob("wiki/*/mock-recordings"))
