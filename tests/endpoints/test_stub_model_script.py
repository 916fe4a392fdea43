"""Loading stub scripts: what a valid script becomes, and one-line errors for bad ones."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import (
    Fault,
    RequestMatch,
    Script,
    StubUsage,
    load_script,
    loads_script,
)
from ci_evals.errors import UserError


def load_script_text(tmp_path: Path, text: str) -> Script:
    path = tmp_path / "stub.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_script(path)


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as caught:
        load_script_text(tmp_path, text)
    return str(caught.value)


def test_a_full_script_becomes_frozen_records(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "plan.md").write_text("# Plan\n", encoding="utf-8")
    script = load_script_text(
        tmp_path,
        """
        version: 1
        usage: {input_tokens: 10}
        rules:
          - name: plan
            match: {command: /labsmith:plan-lab}
            turns:
              - text: "Planning {args}"
                tools:
                  - write: {path: plan.md, content_file: files/plan.md}
                  - bash: ls -la
                  - read: plan.md
                  - agent: {name: labsmith:researcher, prompt: "Research {args}"}
                  - skill: {name: labsmith:style, args: short}
                  - edit: {path: plan.md, old: Plan, new: Lab plan}
                  - tool: {name: Glob, input: {pattern: "**/*.md"}}
                usage: {output_tokens: 5}
              - text: done
                stop_reason: max_tokens
                delay: 0.5
          - turns:
              - fault: {http_status: 529, times: 2}
        """,
    )
    plan, catch_all = script.rules
    assert plan.name == "plan"
    assert plan.match == RequestMatch(command="labsmith:plan-lab")  # the leading slash is optional
    first, second = plan.turns
    assert first.usage == StubUsage(input_tokens=10, output_tokens=5)  # merged with the default
    assert [call.name for call in first.tools] == [
        "Write",
        "Bash",
        "Read",
        "Agent",
        "Skill",
        "Edit",
        "Glob",
    ]
    write, bash, _read, agent, skill, edit, glob = first.tools
    assert write.input == {"file_path": "plan.md", "content": "# Plan\n"}
    assert write.path_keys == ("file_path",)
    assert bash.input == {"command": "ls -la"}
    assert agent.input["subagent_type"] == "labsmith:researcher"
    assert agent.input["run_in_background"] is False  # one result per stage by default
    assert skill.input == {"skill": "labsmith:style", "args": "short"}
    assert edit.input == {"file_path": "plan.md", "old_string": "Plan", "new_string": "Lab plan"}
    assert glob.input == {"pattern": "**/*.md"}
    assert (second.stop_reason, second.delay) == ("max_tokens", 0.5)
    assert catch_all.name == "rules[1]"
    assert catch_all.match == RequestMatch()
    assert catch_all.turns[0].fault == Fault("http_status", http_status=529, times=2)


def test_hang_forever_and_seconds() -> None:
    script = loads_script(
        "rules:\n  - turns:\n      - fault: {hang: forever}\n      - fault: {hang: 2.5}\n"
    )
    forever, seconds = script.rules[0].turns
    assert forever.fault == Fault("hang", hang_seconds=None)
    assert seconds.fault == Fault("hang", hang_seconds=2.5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rules:\n  - turns:\n      - text: hi\n        colour: red\n",
            "stub.yaml:4:9: rules[0].turns[0].colour: unknown key 'colour'",
        ),
        ("rulez: []\n", "stub.yaml:1:1: rulez: unknown key 'rulez'"),
        ("rules: []\n", "stub.yaml:1:8: rules: must not be empty"),
        (
            "rules:\n  - match: {command: x}\n",
            "stub.yaml:2:5: rules[0]: missing required key 'turns'",
        ),
        (
            "rules:\n  - turns:\n      - usage: {input_tokens: 3}\n",
            "stub.yaml:3:9: rules[0].turns[0]: a turn needs at least one of",
        ),
        (
            "rules:\n  - turns:\n      - tools:\n          - write: {path: a.txt}\n",
            "stub.yaml:4:20: rules[0].turns[0].tools[0].write: write needs exactly one of",
        ),
        (
            "rules:\n  - turns:\n      - tools:\n          - {bash: ls, read: a}\n",
            "stub.yaml:4:13: rules[0].turns[0].tools[0]: a tool call has exactly one key",
        ),
        (
            "rules:\n  - turns:\n      - tools:\n          - launch: {name: x}\n",
            "rules[0].turns[0].tools[0].launch: unknown key 'launch'",
        ),
        (
            "rules:\n  - turns:\n      - fault: {http_status: 200}\n",
            "stub.yaml:3:30: rules[0].turns[0].fault.http_status: must be at least 400",
        ),
        (
            "rules:\n  - turns:\n      - fault: {hang: soon}\n",
            "rules[0].turns[0].fault.hang: expected a number of seconds or 'forever'",
        ),
        (
            "rules:\n  - turns:\n      - fault: {hang: 1, malformed_sse: true}\n",
            "rules[0].turns[0].fault: a fault needs exactly one of",
        ),
        (
            "rules:\n  - turns:\n      - text: x\n        stop_reason: done\n",
            "stub.yaml:4:22: rules[0].turns[0].stop_reason: unknown stop_reason 'done'",
        ),
        (
            "rules:\n  - turns:\n      - text: x\n        usage: {input_tokens: -1}\n",
            "rules[0].turns[0].usage.input_tokens: must be at least 0",
        ),
        (
            "rules:\n  - {name: a, turns: [{text: x}]}\n  - {name: a, turns: [{text: y}]}\n",
            "stub.yaml:3:5: rules[1]: duplicate rule name 'a'",
        ),
        (
            "rules:\n  - turns:\n      - tools:\n"
            "          - write: {path: a, content_file: nope.md}\n",
            "rules[0].turns[0].tools[0].write.content_file: cannot read",
        ),
        (
            "rules:\n  - turns:\n      - tools:\n"
            "          - tool: {name: t, input_files: {content: nope.py}}\n",
            "rules[0].turns[0].tools[0].tool.input_files.content: cannot read",
        ),
        ("version: 2\nrules: [{turns: [{text: x}]}]\n", "version: must be at most 1"),
        (
            "rules:\n  - {name: all, turns: [{text: x}]}\n  - {name: late, turns: [{text: y}]}\n",
            "stub.yaml:3:5: rules[1]: rule 'late' can never match ('all' (",
        ),
        (
            "rules:\n  - match: {agent: 'p:helper'}\n    turns: [{text: x}]\n",
            "stub.yaml:2:5: rules[0]: no turn launches agent 'p:helper' with an 'agent:' call",
        ),
    ],
)
def test_errors_name_file_line_column_and_field(tmp_path: Path, text: str, expected: str) -> None:
    message = _error(tmp_path, text)
    assert expected in message
    assert message.startswith(str(tmp_path / "stub.yaml"))
    assert "\n" not in message


def test_a_raw_tool_takes_input_from_files(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("print('hi')\n", encoding="utf-8")
    script = load_script_text(
        tmp_path,
        """
        rules:
          - turns:
              - tools:
                  - tool: {name: write_file, input: {path: s.py}, input_files: {content: server.py}}
        """,
    )
    [call] = script.rules[0].turns[0].tools
    assert (call.name, call.input) == ("write_file", {"path": "s.py", "content": "print('hi')\n"})


def test_a_missing_script_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="file not found"):
        load_script(tmp_path / "absent.yaml")


# -- what a script names lies in its repository ------------------------------------

TOKEN = "ghs_SECRETTOKEN0123456789"
SECRET = "host secret 42"


@pytest.fixture
def stub_repo(tmp_path: Path) -> Path:
    """A git repository with a token in .git/config, a stub script folder in it, a
    file it shares, and a secret on the host beside it; returns the script folder."""
    top = tmp_path / "repo"
    (top / "stub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    subprocess.run(
        ["git", "-C", str(top), "config", "http.extraheader", f"AUTHORIZATION: basic {TOKEN}"],
        check=True,
    )
    (top / "shared.md").write_text("# Shared\n", encoding="utf-8")
    (tmp_path / "host-secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    return top / "stub"


def _write_naming(name: str) -> str:
    return textwrap.dedent(
        f"""\
        rules:
          - turns:
              - tools:
                  - write: {{path: a.md, content_file: '{name}'}}
                  - tool: {{name: t, input_files: {{content: ok.md}}}}
        """
    )


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../../host-secret.txt", "lies outside"),
        ("{host}", "is an absolute path"),
        ("../.git/config", "git's own files"),
        ("secret.md", "is a link to"),  # -> ../../host-secret.txt
        ("gitlink/config", "git's own files"),  # gitlink -> ../.git
    ],
)
def test_a_file_a_script_names_outside_its_repository_is_refused(
    stub_repo: Path, name: str, why: str
) -> None:
    host = stub_repo.parent.parent / "host-secret.txt"
    (stub_repo / "ok.md").write_text("fine\n", encoding="utf-8")
    (stub_repo / "secret.md").symlink_to("../../host-secret.txt")
    (stub_repo / "gitlink").symlink_to("../.git")
    script = stub_repo / "stub.yaml"
    script.write_text(_write_naming(name.format(host=host)), encoding="utf-8")
    with pytest.raises(UserError) as caught:
        load_script(script)
    message = str(caught.value)
    assert message.startswith(f"{script}:4:")
    assert "rules[0].turns[0].tools[0].write.content_file:" in message
    assert why in message and "\n" not in message
    assert SECRET not in message and TOKEN not in message


def test_input_files_are_confined_too(stub_repo: Path) -> None:
    script = stub_repo / "stub.yaml"
    script.write_text(
        "rules:\n  - turns:\n      - tools:\n"
        "          - tool: {name: t, input_files: {content: ../../host-secret.txt}}\n",
        encoding="utf-8",
    )
    with pytest.raises(UserError, match=r":4:.*input_files\.content: .* lies outside"):
        load_script(script)


def test_a_script_linked_out_of_its_repository_is_refused(stub_repo: Path) -> None:
    outside = stub_repo.parent.parent / "evil.yaml"
    outside.write_text(_write_naming("/etc/hostname"), encoding="utf-8")
    (stub_repo / "stub.yaml").symlink_to(outside)
    with pytest.raises(UserError, match=r"--model: stub script .*stub\.yaml is a link to .*"):
        load_script(stub_repo / "stub.yaml")


def test_a_file_shared_in_the_repository_is_read(stub_repo: Path) -> None:
    (stub_repo / "ok.md").write_text("fine\n", encoding="utf-8")
    (stub_repo / "alias.md").symlink_to("../shared.md")
    script = stub_repo / "stub.yaml"
    script.write_text(_write_naming("alias.md"), encoding="utf-8")
    write, tool = load_script(script).rules[0].turns[0].tools
    assert write.input["content"] == "# Shared\n" and tool.input["content"] == "fine\n"
