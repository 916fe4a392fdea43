"""The one front-matter reader (`ci_evals.config.front_matter`), by Claude Code's rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ci_evals.config.front_matter import read_front_matter
from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.errors import UserError
from ci_evals.grading.reviewer.rubrics import read_rubric
from tests.body_capture import BodyCapture
from tests.stub_helpers import run_query


def test_a_plain_block_and_its_body() -> None:
    found = read_front_matter("---\ndescription: Review a PR\n---\nThe prompt.\n")
    assert found.present and found.problem is None
    assert found.fields == {"description": "Review a PR"}
    assert found.body == "The prompt.\n"
    assert found.body_line == 4


def test_a_byte_order_mark_and_crlf_lines_are_read() -> None:
    found = read_front_matter("\ufeff---\r\nname: a\r\ntools: Read\r\n---\r\nbody\r\n")
    assert found.fields == {"name": "a", "tools": "Read"}
    assert found.body == "body\r\n"


def test_no_closing_fence_is_no_front_matter_and_all_body() -> None:
    text = "---\nname: a\nno closing fence here\n"
    found = read_front_matter(text)
    assert not found.present and found.fields == {} and found.body == text


def test_no_opening_fence_is_no_front_matter() -> None:
    for text in ("# Title\n---\nname: a\n---\n", " ---\nname: a\n---\n", "----\na: 1\n---\n"):
        assert not read_front_matter(text).present, text


def test_an_empty_block_is_an_empty_mapping() -> None:
    for text in ("---\n---\nbody", "---\n\n---\n", "---   \n  \n---"):
        found = read_front_matter(text)
        assert found.present and found.fields == {} and found.problem is None, text


def test_the_block_ends_at_the_first_fence_as_claude_code_reads_it() -> None:
    found = read_front_matter("---\nname: a\n---\nbody\n---\nmore\n")
    assert found.fields == {"name": "a"} and found.body == "body\n---\nmore\n"


def test_unquoted_values_claude_code_accepts_are_read() -> None:
    # `[pr] [branch]` and `a: b` inside a value are not valid YAML; Claude Code reads them.
    text = "---\nargument-hint: [pr] [branch]\ndescription: Fix: the bug\n---\n"
    found = read_front_matter(text)
    assert found.problem is None
    assert found.fields == {"argument-hint": "[pr] [branch]", "description": "Fix: the bug"}


def test_non_mapping_yaml_is_a_problem_not_a_refusal() -> None:
    listed = read_front_matter("---\n- a\n- b\n---\nbody")
    assert listed.present and listed.fields == {} and listed.body == "body"
    assert listed.problem == "front matter is a list, not a mapping"
    assert listed.where("x.md") == "x.md:2"
    scalar = read_front_matter("---\njust words\n---\n")
    assert scalar.problem == "front matter is a single value, not a mapping"


def test_broken_yaml_names_the_line_of_the_file() -> None:
    found = read_front_matter("---\nname: a\ntools:\n  - Read\n - Write\n---\n")
    assert found.present and found.fields == {}
    assert found.problem is not None and found.problem.startswith("front matter is not valid YAML")
    assert found.problem_line == 5


def test_a_rubric_with_broken_front_matter_is_one_line_naming_file_and_line(
    tmp_path: Path,
) -> None:
    rubric = tmp_path / "clear.md"
    rubric.write_text("---\ntype: checklist\ncriteria:\n  - a\n b\n---\nText\n")
    with pytest.raises(UserError) as info:
        read_rubric(rubric)
    assert info.value.file is not None and info.value.file.endswith("clear.md")
    assert info.value.line == 5 and "not valid YAML" in info.value.message


def test_a_rubric_with_crlf_and_a_bom_keeps_its_kind(tmp_path: Path) -> None:
    rubric = tmp_path / "clear.md"
    rubric.write_bytes(b"\xef\xbb\xbf---\r\ntype: checklist\r\n---\r\nText\r\n")
    (found,) = read_rubric(rubric)
    assert found.kind == "checklist"


def test_tab_indented_lists_are_read_as_claude_code_reads_them() -> None:
    # YAML forbids tabs as indentation; Claude Code's second reading turns each
    # leading tab into two spaces and loads the agent with its tools.
    found = read_front_matter("---\nname: a\ndescription: Tabbed\ntools:\n\t- Read\n---\nbody\n")
    assert found.problem is None
    assert found.fields == {"name": "a", "description": "Tabbed", "tools": ["Read"]}


def test_values_claude_code_does_not_quote_are_not_read_either() -> None:
    # Claude Code's second reading quotes `KEY: value` only for a key of letters,
    # `_` and `-`: such a block gives the file no fields there, so none here (a
    # check requiring them fails).
    text = "---\nname: a\ndescription: fine\nx2: [a] [b]\n---\nbody\n"
    found = read_front_matter(text)
    assert found.fields == {} and found.problem is not None, text


def test_a_crlf_line_is_quoted_without_its_carriage_return() -> None:
    # The bundled CLI (2.1.337 in claude-agent-sdk 0.2.190) quotes a CRLF line's
    # value too, its `\r` left out (test_descriptions_match_what_the_bundled_cli_reads).
    text = "---\r\nname: a\r\ndescription: Use this: when asked\r\n---\r\nbody\r\n"
    assert read_front_matter(text).fields == {"name": "a", "description": "Use this: when asked"}


def test_only_values_that_need_it_are_quoted() -> None:
    # A value with nothing YAML-special keeps its type; a flow list stays a list.
    text = "---\ndescription: Fix: it\ndisable-model-invocation: true\ntools: [Read, Write]\n---\n"
    assert read_front_matter(text).fields == {
        "description": "Fix: it",
        "disable-model-invocation": True,
        "tools": ["Read", "Write"],
    }


# What the bundled CLI reads, seen where it shows: each plugin agent's description
# in the agent tool's listing it sends the model ("Agent from P plugin" when its
# front matter gave it none).
CLI_CASES = {
    "plain": "---\nname: plain\ndescription: Plain helper\n---\nbody\n",
    "colon": "---\nname: colon\ndescription: Use this: when asked\n---\nbody\n",
    "crlfplain": "---\r\nname: crlfplain\r\ndescription: Plain\r\n---\r\nbody\r\n",
    "crlfcolon": "---\r\nname: crlfcolon\r\ndescription: Use this: when asked\r\n---\r\nb\r\n",
    "tabs": "---\nname: tabs\ndescription: Tabbed\ntools:\n\t- Read\n---\nbody\n",
    "digitkey": "---\nname: digitkey\ndescription: fine\nx2: [a] [b]\n---\nbody\n",
    "bom": "\ufeff---\nname: bom\ndescription: Bom one\n---\nbody\n",
    "midline": "---\nname: midline\ndescription: a---b\n---\nbody\n",
    "hint": "---\nname: hint\ndescription: Review it\nargument-hint: [pr] [branch]\n---\nb\n",
}


@pytest.mark.slow
def test_descriptions_match_what_the_bundled_cli_reads(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "p", "version": "0.1.0", "description": "probe"}
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (plugin / "agents").mkdir()
    for name, text in CLI_CASES.items():
        (plugin / "agents" / f"{name}.md").write_bytes(text.encode())
    (tmp_path / "ws").mkdir()
    script = loads_script("rules:\n  - turns: [{text: 'hi'}]\n", "stub.yaml")
    with StubServer(script) as server, BodyCapture(server.port) as capture:
        run = run_query(
            server,
            "hi",
            tmp_path / "ws",
            tmp_path,
            plugins=[plugin],
            env={"ANTHROPIC_BASE_URL": capture.url},
        )
        sent = capture.text()
    assert run.error is None, run.stderr[-5:]
    seen = {}
    for name in CLI_CASES:
        match = re.search(rf"- p:{name}: (.*?) \(Tools:", sent)
        assert match is not None, f"agent p:{name} not in the listing"
        seen[name] = match.group(1)
    ours = {
        name: str(read_front_matter(text).fields.get("description", "Agent from p plugin"))
        for name, text in CLI_CASES.items()
    }
    assert ours == seen
