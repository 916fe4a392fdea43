"""The operator's tool grant of a suite of cases (`suite.tool_grant`): what each case
unit is offered and allowed, the CLI's lines about it, and its mistakes at load.

What the bundled CLI offers under a grant is checked against the CLI itself in
tests/suite/test_plugin_evals_grant.py; these are the rules, fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.suite.load import load_suite
from ci_evals.suite.plugin_evals import load_case
from ci_evals.suite.tool_grant import (
    OFFERED,
    READ_ONLY,
    Grant,
    advisories,
    case_grant,
    case_tools,
    check_entries,
    split_entries,
)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _suite(tmp_path: Path, key: str, files: dict[str, str] | None = None) -> Path:
    case = {
        "evals/c/prompt.md": "---\nallowed_tools: [Write, Bash, Read]\n---\nWrite x.\n",
        "evals/c/graders/wrote.md": "---\ntype: file_exists\npath: x.txt\n---\n",
    }
    _write(tmp_path / "plugin", {".claude-plugin/plugin.json": '{"name": "p"}', **(files or case)})
    suite = tmp_path / "ci-evals.yaml"
    suite.write_text(f"version: 1\nplugin: plugin\nplugin_evals:\n{key}")
    return suite


def test_without_a_grant_only_the_read_only_set_is_offered() -> None:
    tools = case_tools(Grant(), (), None)
    assert tools.offered == OFFERED and tools.allowed == ()
    assert set(OFFERED) <= set(READ_ONLY) and "TaskStop" in OFFERED and "TaskCreate" not in OFFERED
    assert tools.claude_code_prompt


def test_a_grant_offers_its_tools_and_a_write_the_whole_edit_family() -> None:
    tools = case_tools(Grant(("Write", "Bash(npm test:*)", "mcp__plugin_p_db__query")), (), None)
    assert tools.offered is not None
    assert {"Write", "Edit", "NotebookEdit", "Bash"} <= set(tools.offered)
    assert not any(t.startswith("mcp__") for t in tools.offered)  # offered by its server
    assert tools.allowed == ("Write", "Bash(npm test:*)", "mcp__plugin_p_db__query", "Edit")


def test_disallowed_tools_remove_even_what_is_granted() -> None:
    tools = case_tools(Grant(("Write",)), ("Write", "Skill"), None)
    assert tools.offered is not None
    assert "Write" not in tools.offered and "Skill" not in tools.offered
    assert "Write" not in tools.allowed and tools.disallowed == ("Write", "Skill")


def test_mocked_tools_are_granted() -> None:
    grant = Grant(("Write",)).with_mocked(["mcp__plugin_p_db__query"])
    assert grant.rules == ("Write", "mcp__plugin_p_db__query")
    assert "mcp__plugin_p_db__query" in case_tools(grant, (), None).allowed


def test_the_cli_lines_for_an_ungranted_tool(tmp_path: Path) -> None:
    _write(
        tmp_path / "c",
        {
            "prompt.md": "---\nallowed_tools: [Write, Bash(npm:*), Read, Skill]\n---\nGo.\n",
            "graders/wrote.md": "---\ntype: file_exists\npath: x.txt\n---\n",
            "graders/shell.md": "---\ntype: tool_used\ntool: Bash\n---\n",
            "graders/none.md": "---\ntype: file_exists\npath: y\nexists: false\n---\n",
            "graders/ran.md": "---\ntype: tool_order\nbefore: Read\nafter: WebFetch\n---\n",
        },
    )
    case = load_case(tmp_path / "c", [])
    _, notes = case_grant(case, Grant())
    assert notes[0] == (
        "c: not granted (missing --allow-tools grant, or a malformed entry): Write, Bash(npm:*)"
    )
    joined = "\n".join(notes)
    assert 'case "c": grader "wrote" cannot pass with the granted tools: it checks a file' in joined
    assert 'grader "shell" cannot pass with the granted tools: it needs a Bash call' in joined
    assert "grant it with --allow-tools Bash" in joined
    assert 'grader "ran" cannot pass with the granted tools: it needs a WebFetch call' in joined
    assert '"none"' not in joined and "a Read call" not in joined
    # Granted: no line about it, in this case or any other.
    _, notes = case_grant(case, Grant(("Write", "Bash", "WebFetch")))
    assert notes == []


def test_a_disallowed_tool_a_grader_needs_is_named(tmp_path: Path) -> None:
    _write(
        tmp_path / "c",
        {"prompt.md": "Go.\n", "graders/g.md": "---\ntype: tool_used\ntool: Write\n---\n"},
    )
    case = load_case(tmp_path / "c", [])
    said = advisories(case.graders, Grant(("Write",)), ("Write",))
    assert said == [
        'grader "g" cannot pass: it needs a Write call in the trace, but Write is in the '
        "case's disallowed_tools or --disallow-tools, so no call can occur \u2014 change that "
        "list (and grant the tool if it is not granted), or drop the grader"
    ]


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("Write,Bash", ["Write", "Bash"]),
        ("Write Edit", ["Write", "Edit"]),
        ('Bash(git commit -m "a, b"),Write', ['Bash(git commit -m "a, b")', "Write"]),
    ],
)
def test_a_list_splits_as_allow_tools_does(text: str, entries: list[str]) -> None:
    assert split_entries(text) == entries


def test_a_tool_never_available_or_a_malformed_entry_is_refused() -> None:
    with pytest.raises(UserError) as caught:
        check_entries(["Write", "Monitor", "Bash(x", "*"], "--allow-tools")
    line = str(caught.value)
    assert "\n" not in line and line.startswith("--allow-tools: refused 3 entries")
    assert "Monitor is never available in an evaluation" in line and "Bash(x" in line


def test_allow_tools_in_the_suite_is_checked_at_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    suite = _suite(tmp_path, "  allow_tools: [Write, EnterWorktree]\n")
    with pytest.raises(UserError) as caught:
        load_suite(suite)
    line = str(caught.value)
    assert line.startswith("ci-evals.yaml:4:16: plugin_evals.allow_tools: EnterWorktree: "), line
    assert "never available in an evaluation" in line


def test_the_suite_grant_and_its_override_reach_every_case(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "  allow_tools: [Write]\n")
    loaded = load_suite(suite)
    (scenario,) = loaded.scenarios
    assert scenario.stage is not None and scenario.stage.tools.offered is not None
    assert "Write" in scenario.stage.tools.offered
    assert loaded.plugin_evals is not None
    (note,) = loaded.plugin_evals.grant_notes  # allowed_tools names Bash: not granted
    assert note.endswith("not granted (missing --allow-tools grant, or a malformed entry): Bash")
    loaded = load_suite(suite, allow_tools=["Bash"])
    (scenario,) = loaded.scenarios
    assert scenario.stage is not None and scenario.stage.tools.offered is not None
    assert "Bash" in scenario.stage.tools.offered and "Write" not in scenario.stage.tools.offered
    assert loaded.plugin_evals is not None
    said = "\n".join(loaded.plugin_evals.grant_notes)
    assert 'grader "wrote" cannot pass' not in said  # Bash can create the file
    assert "not granted (missing --allow-tools grant, or a malformed entry): Write" in said


def test_allow_tools_on_a_suite_of_stages_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "plugin", {".claude-plugin/plugin.json": '{"name": "p"}'})
    suite = tmp_path / "ci-evals.yaml"
    suite.write_text("version: 1\nplugin: plugin\nstages:\n  - {name: one, prompt: hi}\n")
    with pytest.raises(UserError, match="--allow-tools grants tools to the cases"):
        load_suite(suite, allow_tools=["Write"])
