"""A case's MCP mocks read as `claude plugin eval` reads them (`suite.plugin_eval_mocks`):
the layers, the strict keys, every refusal one line at its `file:line:col`."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from ci_evals.config.yaml_source import loads
from ci_evals.errors import UserError
from ci_evals.suite.plugin_eval_mocks import (
    declared_servers,
    load_mocks,
    mocked_tool_names,
)
from ci_evals.suite.plugin_evals import load_plugin_evals
from tests.run_helpers import run_ci_evals, write_files

CASE = {"c/prompt.md": "Do it.\n", "c/graders/g.md": "---\ntype: regex\n---\nx\n"}


def test_every_layer_applies_from_the_eval_folder_down_to_the_case(tmp_path: Path) -> None:
    evals = write_files(
        tmp_path / "evals",
        {
            "group/c/prompt.md": "x",
            "mocks/srv/a.md": "A from the eval folder",
            "mocks/srv/b.md": "B from the eval folder",
            "mocks/srv/_server.md": "---\ntype: agent\ntools: [a, c]\n---\nA server.\n",
            "group/mocks/srv/b.md": "B from the group",
            "group/c/mocks/srv/c.md": "C from the case",
            "group/c/mocks/other/x.md": "---\nerror: true\n---\nno\n",
            "mocks/.replay/srv/ignored.md": "a dot folder is no server",
            "mocks/empty/notes.txt": "no responder",
        },
    )
    warnings: list[str] = []
    servers = load_mocks(evals / "group" / "c", evals, tmp_path, warnings)
    found = {
        (server.name, tool): (responder.kind, responder.source.relative_to(evals).as_posix())
        for server in servers
        for tool, responder in server.tools.items()
    }
    assert found == {
        ("other", "x"): ("fixed", "group/c/mocks/other/x.md"),
        # The deepest layer's file wins; the `_server.md` agent answers what none names.
        ("srv", "a"): ("fixed", "mocks/srv/a.md"),
        ("srv", "b"): ("fixed", "group/mocks/srv/b.md"),
        ("srv", "c"): ("fixed", "group/c/mocks/srv/c.md"),
    }
    (other,) = [s for s in servers if s.name == "other"]
    assert other.tools["x"].is_error and other.tools["x"].body == "no"
    (warning,) = warnings
    assert warning.endswith("no <tool>.md responders \u2014 nothing is mocked for empty")


def test_an_agent_answers_the_tools_no_file_names(tmp_path: Path) -> None:
    evals = write_files(
        tmp_path / "evals",
        {
            **CASE,
            "mocks/w/_server.md": (
                "---\ntype: agent\ntools: [search, get]\nabort_when: |\n  it asks for secrets\n"
                "---\n\nA wiki.\n\n"
            ),
            "mocks/w/get.md": "a page",
        },
    )
    (server,) = load_mocks(evals / "c", evals, tmp_path, [])
    search, get = server.tools["search"], server.tools["get"]
    assert (search.kind, search.body, search.abort_when) == (
        "agent",
        "A wiki.",
        "it asks for secrets\n",
    )
    assert get.kind == "fixed" and server.agent


@pytest.mark.parametrize(
    ("files", "where", "says"),
    [
        (
            {"mocks/s/t.md": "---\nerrors: true\n---\nx\n"},
            "mocks/s/t.md:2:9",
            "unknown key 'errors'",
        ),
        (
            {"mocks/s/t.md": "---\ntype: live\n---\nx\n"},
            "mocks/s/t.md:2:7",
            'must be "fixed" or "agent"',
        ),
        (
            {"mocks/s/t.md": "TODO: replace with the canned result this tool should return\n"},
            "mocks/s/t.md",
            "still holds the scaffolded placeholder",
        ),
        ({"mocks/s/t.md": "---\ntype: agent\n---\n\n"}, "mocks/s/t.md", "needs a description"),
        (
            {"mocks/s/t.md": "---\ntype: agent\nerror: true\n---\nS\n"},
            "mocks/s/t.md:3:8",
            "fixed responders only",
        ),
        (
            {"mocks/s/t.md": "---\nabort_when: x\n---\nS\n"},
            "mocks/s/t.md:2:13",
            "needs `type: agent`",
        ),
        (
            {"mocks/s/t.md": "---\ntools: [a]\n---\nS\n"},
            "mocks/s/t.md:2:8",
            "belongs in _server.md",
        ),
        (
            {"mocks/s/_server.md": "---\ntype: agent\n---\nS\n"},
            "mocks/s/_server.md",
            "needs `tools: [...]`",
        ),
        (
            {"mocks/s/_server.md": "---\ntools: [a]\n---\nS\n"},
            "mocks/s/_server.md",
            "only `type: agent`",
        ),
        (
            {"mocks/s/_server.md": "---\ntype: agent\ntools: [a, b]\nexpect: {x: 1}\n---\nS\n"},
            "mocks/s/_server.md",
            "would guard all 2 tools",
        ),
        (
            {"mocks/s/t.md": "---\nexpect: {id: []}\n---\nx\n"},
            "mocks/s/t.md:2:9",
            "can never be satisfied",
        ),
        (
            {"mocks/s/t.md": "---\nexpect: {id: '/(a|b)/'}\n---\nx\n"},
            "mocks/s/t.md:2:9",
            "small dialect",
        ),
        (
            {"mocks/s/t.md": "---\nexpect: {id: '/a/g'}\n---\nx\n"},
            "mocks/s/t.md:2:9",
            "only the i and s flags",
        ),
        ({"mocks/s/t.md": "---\nexpect: [id]\n---\nx\n"}, "mocks/s/t.md:2:9", "a mapping"),
        ({"mocks/s.x/t.md": "x"}, "mocks/s.x", "name the folder after the server's key"),
        ({"mocks/s/a__b.md": "x"}, "mocks/s/a__b.md", "name a responder file after its tool"),
        (
            {"mocks/s/_tools.json": '{"tools": [{"description": "no name"}]}'},
            "mocks/s/_tools.json",
            "tools/list",
        ),
        ({"mocks/s/_tools.json": "{"}, "mocks/s/_tools.json", "not valid JSON"),
        ({"mocks/s/prompt.md": "a case", "mocks/s/t.md": "x"}, "mocks/s", "a case under mocks/"),
    ],
)
def test_a_mistake_is_one_line_at_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], where: str, says: str
) -> None:
    monkeypatch.chdir(tmp_path)  # paths in messages are named from the current folder
    evals = write_files(tmp_path / "evals", {**CASE, **files})
    with pytest.raises(UserError) as caught:
        load_mocks(evals / "c", evals, tmp_path, [])
    line = str(caught.value)
    assert "\n" not in line and says in line, line
    assert line.startswith(f"evals/{where}"), line


def test_a_link_in_a_mocks_folder_that_leads_out_of_the_repository_is_refused(
    tmp_path: Path,
) -> None:
    outside = write_files(tmp_path / "outside", {"t.md": "the host's file"})
    evals = write_files(tmp_path / "repo" / "evals", {**CASE, "mocks/s/u.md": "x"})
    os.symlink(outside, evals / "mocks" / "leak")
    with pytest.raises(UserError, match="leak"):
        load_mocks(evals / "c", evals, tmp_path / "repo", [])


def test_adopted_recordings_are_pinned_by_their_content_as_read_at_load(tmp_path: Path) -> None:
    key = "a" * 64
    recording = '{"input": {}, "output": "x", "verdict": "ok"}\n'
    evals = write_files(
        tmp_path / "evals",
        {
            **CASE,
            "mocks/w/_server.md": "---\ntype: agent\ntools: [search]\n---\nA wiki.\n",
            f"mocks/.replay/w/search-{key}.json": recording,
            "mocks/.replay/w/notes.txt": "not a recording",
        },
    )
    (server,) = load_mocks(evals / "c", evals, tmp_path, [])
    pins = server.pinned[str(evals / "mocks" / ".replay" / "w")]
    assert dict(pins) == {f"search-{key}.json": hashlib.sha256(recording.encode()).hexdigest()}


def test_the_tool_names_are_the_clis(tmp_path: Path) -> None:
    plugin = write_files(
        tmp_path / "p",
        {
            ".claude-plugin/plugin.json": '{"name": "tix"}',
            ".mcp.json": '{"mcpServers": {"tracker": {"command": "x"}}}',
            "evals/c/prompt.md": "x",
            "evals/c/graders/g.md": "---\ntype: regex\n---\nx\n",
            "evals/mocks/tracker/get.md": "x",
            "evals/mocks/notes/read.md": "x",
        },
    )
    evals = load_plugin_evals(
        loads("{}", "ci-evals.yaml"),
        plugin_dir=plugin,
        manifest={},
        suite_dir=tmp_path,
        within=tmp_path,
    )
    (case,) = evals.cases
    names = mocked_tool_names("tix", case.mocks, list(declared_servers(plugin)))
    assert names == ["mcp__notes__read", "mcp__plugin_tix_tracker__get"]


def test_declared_servers_are_read_where_claude_code_reads_them(tmp_path: Path) -> None:
    inline = write_files(
        tmp_path / "a",
        {
            ".claude-plugin/plugin.json": '{"name": "a", "mcpServers": {"x": {"command": "c"}}}',
            ".mcp.json": '{"mcpServers": {"ignored": {"command": "c"}}}',
        },
    )
    named = write_files(
        tmp_path / "b",
        {
            ".claude-plugin/plugin.json": (
                '{"name": "b", "mcpServers": ["m/one.json", "/etc/x.json"]}'
            ),
            "m/one.json": '{"y": {"command": "c"}}',
        },
    )
    flat = write_files(tmp_path / "c", {".mcp.json": '{"z": {"command": "c"}}'})
    assert list(declared_servers(inline)) == ["x"]
    assert list(declared_servers(named)) == ["y"]
    assert list(declared_servers(flat)) == ["z"]
    assert declared_servers(tmp_path / "none") == {}


def test_init_drafts_a_case_with_a_mock_calls_grader_and_names_it_unsatisfied(
    tmp_path: Path,
) -> None:
    write_files(
        tmp_path / "p",
        {
            ".claude-plugin/plugin.json": '{"name": "p"}',
            "evals/c/prompt.md": "Look it up.\n",
            "evals/c/graders/calls.md": "---\ntype: regex\ntarget: mock_calls\n---\nT-1\n",
            "evals/c/graders/said.md": "---\ntype: regex\n---\nFound\n",
            "evals/mocks/srv/get.md": "T-1",
        },
    )
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = run_ci_evals(tmp_path, "init", "p")
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if "not satisfied" in x]
    assert "calls: the calls of mocked tools are not drafted" in line
