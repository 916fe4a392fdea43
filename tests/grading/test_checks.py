from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from claude_agent_sdk import AssistantMessage, TextBlock, ToolUseBlock

from ci_evals.config import yaml_source
from ci_evals.errors import UserError
from ci_evals.grading.config import load_policy
from ci_evals.grading.kinds.checks.base import Check
from ci_evals.grading.kinds.checks.equals_length import _MISSING, dotted
from ci_evals.grading.kinds.checks.files import FilesExist
from ci_evals.grading.kinds.checks.headings import headings_of
from ci_evals.grading.kinds.checks.load import load_checks
from ci_evals.grading.kinds.checks.run import run_checks
from ci_evals.grading.kinds.trajectory import tool_uses
from tests.conftest import EXAMPLE

PLAN_SCHEMA = {
    "type": "object",
    "required": ["chapter_count", "chapters"],
    "properties": {
        "chapter_count": {"type": "integer"},
        "chapters": {"type": "array", "items": {"type": "object", "required": ["slug"]}},
    },
}


def load(text: str, tmp_path: Path) -> tuple[Check, ...]:
    plugin = tmp_path / "plugin"
    (plugin / "templates").mkdir(parents=True, exist_ok=True)
    (plugin / "templates" / "plan.schema.json").write_text(json.dumps(PLAN_SCHEMA))
    return load_checks(
        yaml_source.loads(text, "ci-evals.yaml"),
        suite_dir=tmp_path,
        plugin_dir=plugin,
        within=tmp_path,
    )


def results(text: str, tmp_path: Path, folder: Path, trajectory: Path | None = None) -> dict:  # type: ignore[type-arg]
    result = run_checks(load(text, tmp_path), folder, trajectory)
    assert result.error is None
    for c in result.criteria:
        assert (c.kind, c.source, c.score) == ("checklist", "check", 1.0 if c.passed else 0.0)
    return {c.id: (c.passed, c.detail) for c in result.criteria}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace after stage 3 and 4: a plan, a lab page, three chapter files."""
    root = tmp_path / "ws"
    (root / "lab" / "chapters").mkdir(parents=True)
    plan = {"chapter_count": 3, "chapters": [{"slug": s} for s in ("a", "b", "c")]}
    (root / "lab" / "plan.json").write_text(json.dumps(plan))
    (root / "lab" / "lab.md").write_text(
        "# Lab\n\n## Overview\ntext\n\n```md\n## Not a heading\n```\n\n### Sources ###\n"
    )
    for n in (1, 2, 3):
        (root / "lab" / "chapters" / f"0{n}-ch.md").write_text("## Steps\n## Check\n")
    return root


# -- files ---------------------------------------------------------------------


def test_files_exist_counts(ws: Path, tmp_path: Path) -> None:
    got = results(
        "- { files: 'lab/chapters/[0-9][0-9]-*.md', min: 3 }\n"
        "- { files: lab/lab.md, count: 1, id: lab-page }\n"
        "- { files: 'lab/chapters/*.md', max: 2, id: too-many }\n"
        "- { files: [lab/missing.md, 'lab/*.json'], count: 2, id: either }\n"
        "- { files: 'lab/content/*.md', id: content }\n",
        tmp_path,
        ws,
    )
    assert got["files:lab/chapters/[0-9][0-9]-*.md"] == (
        True,
        "3 file(s) match lab/chapters/[0-9][0-9]-*.md, expected at least 3: "
        "lab/chapters/01-ch.md, lab/chapters/02-ch.md, lab/chapters/03-ch.md",
    )
    assert got["lab-page"][0] is True
    assert got["too-many"] == (
        False,
        "3 file(s) match lab/chapters/*.md, expected 0 to 2: "
        "lab/chapters/01-ch.md, lab/chapters/02-ch.md, lab/chapters/03-ch.md",
    )
    assert got["either"][0] is False and "1 file(s)" in got["either"][1]
    assert got["content"] == (False, "0 file(s) match lab/content/*.md, expected at least 1")


def test_a_link_out_of_the_folder_is_not_counted(ws: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("## Overview\n")
    os.symlink(secret, ws / "lab" / "escape.md")
    got = results(
        "- { files: lab/escape.md, id: f }\n"
        "- { headings: lab/escape.md, require: [Overview], id: h }\n",
        tmp_path,
        ws,
    )
    assert got["f"] == (
        False,
        "0 file(s) match lab/escape.md, expected at least 1 "
        "(skipped, outside the folder: lab/escape.md)",
    )
    assert got["h"] == (
        False,
        "no file matches lab/escape.md (skipped, outside the folder: lab/escape.md)",
    )


def test_linked_plugin_folders_are_skipped_not_failed(ws: Path, tmp_path: Path) -> None:
    # The runner links the plugin's folders into the workspace; `**` must not
    # read (or fail on) them.
    plugin_agents = tmp_path / "plugin" / "agents"
    plugin_agents.mkdir(parents=True)
    (plugin_agents / "reviewer.md").write_text("no headings here\n")
    os.symlink(plugin_agents, ws / "agents")
    got = results(
        "- { headings: [lab/lab.md, 'agents/*.md'], require: ['## Overview'], id: h }\n"
        "- { files: 'lab/**', min: 5, id: f }\n",
        tmp_path,
        ws,
    )
    assert got["h"] == (
        True,
        "1 file(s) have all 1 (skipped, outside the folder: agents/reviewer.md)",
    )
    # A trailing ** means every file below (as in Python 3.13), not just folders.
    assert got["f"][0] is True
    assert got["f"][1].startswith("5 file(s) match lab/**")


# -- headings ------------------------------------------------------------------


def test_headings(ws: Path, tmp_path: Path) -> None:
    got = results(
        "- { headings: lab/lab.md, require: ['## Overview', Sources, '# Lab'], id: ok }\n"
        "- { headings: lab/lab.md, require: ['## Sources', 'Not a heading'], id: wrong }\n"
        "- { headings: 'lab/chapters/*.md', require: ['## Steps', '##   Check'], id: chapters }\n"
        "- { headings: 'lab/nothing/*.md', require: [X], id: none }\n",
        tmp_path,
        ws,
    )
    assert got["ok"] == (True, "1 file(s) have all 3")
    # Level matters when given; a heading inside a code fence does not count.
    assert got["wrong"] == (False, "lab/lab.md: missing '## Sources', 'Not a heading'")
    assert got["chapters"][0] is True
    assert got["none"] == (False, "no file matches lab/nothing/*.md")


def test_headings_of_parses_atx_only_outside_fences() -> None:
    text = "#Not\n# One #\n   ## Two  words \n~~~\n# fenced\n~~~\n####### seven\n## \n"
    assert headings_of(text) == ["# One", "## Two words", "## "]


# -- json schema -----------------------------------------------------------------


def test_json_schema(ws: Path, tmp_path: Path) -> None:
    (ws / "lab" / "broken.json").write_text("{not json")
    (ws / "lab" / "bad.json").write_text(json.dumps({"chapter_count": "3", "chapters": []}))
    got = results(
        "- { json_schema: lab/plan.json, schema: 'plugin:templates/plan.schema.json', id: ok }\n"
        "- { json_schema: lab/bad.json, schema: 'plugin:templates/plan.schema.json', id: bad }\n"
        "- json_schema: lab/broken.json\n"
        "  id: broken\n"
        "  schema: { type: object }\n"
        "- { json_schema: lab/none.json, schema: { type: object }, id: none }\n",
        tmp_path,
        ws,
    )
    assert got["ok"][0] is True
    assert got["ok"][1].endswith(
        "1 file(s) valid against " + str(tmp_path / "plugin/templates/plan.schema.json")
    )
    assert got["bad"] == (False, "lab/bad.json: at chapter_count: '3' is not of type 'integer'")
    assert got["broken"][0] is False
    assert got["broken"][1].startswith("lab/broken.json: not valid JSON (Expecting property name")
    assert got["none"] == (False, "no file matches lab/none.json")


def test_schema_file_relative_to_the_suite(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "plan.json").write_text(json.dumps(PLAN_SCHEMA))
    got = results(
        "- { json_schema: lab/plan.json, schema: schemas/plan.json, id: s }\n", tmp_path, ws
    )
    assert got["s"][0] is True


# -- field equals length ---------------------------------------------------------


def test_equals_length(ws: Path, tmp_path: Path) -> None:
    nested = {"meta": {"count": 2}, "plan": {"chapters": [1, 2, 3]}, "flag": True}
    (ws / "lab" / "nested.json").write_text(json.dumps(nested))
    got = results(
        "- { equals_length: lab/plan.json, field: chapter_count, array: chapters }\n"
        "- { equals_length: lab/nested.json, field: meta.count, array: plan.chapters,"
        "    id: mismatch }\n"
        "- { equals_length: lab/nested.json, field: meta.missing, array: plan.chapters,"
        "    id: gone }\n"
        "- { equals_length: lab/nested.json, field: flag, array: plan.chapters, id: bool }\n"
        "- { equals_length: lab/nested.json, field: meta.count, array: meta, id: notlist }\n"
        "- { equals_length: lab/absent.json, field: a, array: b, id: absent }\n",
        tmp_path,
        ws,
    )
    assert got["equals_length:lab/plan.json:chapter_count"] == (
        True,
        "lab/plan.json: chapter_count 3 == len(chapters) 3",
    )
    assert got["mismatch"] == (False, "lab/nested.json: meta.count 2 != len(plan.chapters) 3")
    assert got["gone"] == (False, "lab/nested.json: no field 'meta.missing'")
    assert got["bool"] == (False, "lab/nested.json: flag is true, not an integer")
    assert got["notlist"] == (False, "lab/nested.json: meta is not an array")
    assert got["absent"] == (False, "no file match lab/absent.json")


def test_dotted_indexes_lists() -> None:
    doc = {"chapters": [{"slug": "a"}, {"slug": "b"}]}
    assert dotted(doc, "chapters.1.slug") == "b"
    assert dotted(doc, "chapters.2.slug") is _MISSING


# -- trajectory ------------------------------------------------------------------


def sdk_lines() -> list[str]:
    """Messages as the runner records them: SDK dataclasses as dicts, in an envelope."""
    messages = [
        AssistantMessage(
            content=[
                TextBlock(text="planning"),
                ToolUseBlock(
                    id="t1",
                    name="Agent",
                    input={"subagent_type": "labsmith:lab-planner", "prompt": "plan"},
                ),
            ],
            model="stub",
        ),
        AssistantMessage(
            content=[ToolUseBlock(id="t2", name="Skill", input={"skill": "labsmith:research"})],
            model="stub",
            parent_tool_use_id="t1",
        ),
        AssistantMessage(
            content=[
                ToolUseBlock(
                    id="t3",
                    name="Write",
                    # A tool's input is data: this nested name/input is not a call.
                    input={
                        "file_path": "/w/x.json",
                        "content": {"name": "Bash", "input": {}, "id": 1},
                    },
                )
            ],
            model="stub",
        ),
    ]
    return [
        json.dumps({"type": type(m).__name__, "ts": 1.5, "message": dataclasses.asdict(m)})
        for m in messages
    ]


def test_tool_uses_reads_sdk_messages() -> None:
    uses = tool_uses([*sdk_lines(), ""])
    assert [u.name for u in uses] == ["Agent", "Skill", "Write"]


def test_tool_uses_reads_cli_stream_json() -> None:
    line = json.dumps(
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "tool_use", "id": "x", "name": "Bash", "input": {"command": "ls"}}
                ]
            },
        }
    )
    assert [u.name for u in tool_uses([line])] == ["Bash"]
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        tool_uses([line, "{oops"])


def test_trajectory_checks(tmp_path: Path, ws: Path) -> None:
    trajectory = tmp_path / "trajectory.jsonl"
    trajectory.write_text("\n".join(sdk_lines()) + "\n")
    got = results(
        "- { trajectory: { subagent: 'labsmith:lab-planner' } }\n"
        "- { trajectory: { subagent: lab-planner }, id: short-name }\n"
        "- { trajectory: { subagent: 'other:lab-planner' }, id: other-plugin }\n"
        "- { trajectory: { skill: research }, id: skill }\n"
        "- { trajectory: { tool: Write }, id: write }\n"
        "- { trajectory: { tool: Bash, used: false }, id: no-bash }\n"
        "- { trajectory: { tool: Write, used: false }, id: no-write }\n"
        "- { trajectory: { subagent: chapter-implementer }, id: never }\n",
        tmp_path,
        ws,
        trajectory,
    )
    assert got["trajectory:subagent-used:labsmith:lab-planner"] == (
        True,
        "subagent 'labsmith:lab-planner' called 1 time(s)",
    )
    assert got["short-name"][0] is True
    assert got["other-plugin"] == (False, "subagent 'other:lab-planner' was never called")
    assert got["skill"][0] is True
    assert got["write"][0] is True
    assert got["no-bash"] == (True, "tool 'Bash' not called")
    assert got["no-write"] == (False, "tool 'Write' called 1 time(s), expected never")
    assert got["never"][0] is False


def test_trajectory_missing_or_corrupt_fails_closed(tmp_path: Path, ws: Path) -> None:
    text = "- { trajectory: { tool: Bash, used: false }, id: no-bash }\n"
    assert results(text, tmp_path, ws, None)["no-bash"] == (
        False,
        "no trajectory was recorded for this stage",
    )
    corrupt = tmp_path / "t.jsonl"
    corrupt.write_text('{"type": "x"}\n{half')
    passed, detail = results(text, tmp_path, ws, corrupt)["no-bash"]
    assert not passed
    assert detail.startswith("trajectory t.jsonl unreadable: line 2 is not JSON")


# -- loading ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "- { files: a.md, headings: a.md }\n",
            "1:3: [0]: a check names exactly one kind, got files, headings",
        ),
        ("- { id: x }\n", "a check names exactly one kind (one of: files"),
        ("- { files: a.md, require: [x] }\n", "'require' does not apply to a 'files' check"),
        ("- { filez: a.md }\n", "unknown key 'filez'"),
        ("- { files: /etc/passwd }\n", "must be relative to the workspace"),
        ("- { files: ../up.md }\n", "must be relative"),
        ("- { files: a.md, count: 1, min: 1 }\n", "use either 'count' or 'min'/'max'"),
        ("- { files: a.md, min: 3, max: 1 }\n", "max 1 is below min 3"),
        ("- { files: a.md, count: -1 }\n", "must be at least 0"),
        ("- { headings: a.md }\n", "missing required key 'require'"),
        ("- { headings: a.md, require: [] }\n", "must not be empty"),
        ("- { json_schema: a.json }\n", "missing required key 'schema'"),
        ("- { json_schema: a.json, schema: nope.json }\n", "schema file not found"),
        (
            "- { json_schema: a.json, schema: { type: 12 } }\n",
            "invalid JSON Schema: 12 is not valid",
        ),
        ("- { equals_length: a.json, field: n }\n", "missing required key 'array'"),
        ("- { trajectory: { tool: A, skill: B } }\n", "exactly one of tool, skill, subagent"),
        ("- { trajectory: { tool: A, used: maybe } }\n", "expected a boolean"),
        (
            "- { files: a.md }\n- { files: a.md }\n",
            "2:3: [1]: duplicate check id 'files:a.md' (also line 1)",
        ),
    ],
)
def test_load_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        load(text, tmp_path)
    assert message in str(info.value)
    assert str(info.value).startswith("ci-evals.yaml:")


def test_files_default_is_at_least_one(tmp_path: Path) -> None:
    [check] = load("- { files: a.md }\n", tmp_path)
    assert check == FilesExist(id="files:a.md", globs=("a.md",), min=1)


def test_the_example_suite_loads_and_its_fixture_passes_the_checks() -> None:
    """ci-evals.yaml's (the example suite) checks and scoring, as the suite loader loads them."""
    root = yaml_source.load(EXAMPLE.suite).mapping(_AnyKey())
    loaded = {}
    for stage in root["stages"].sequence():
        keys = stage.mapping(_AnyKey())
        if "checks" in keys:
            loaded[keys["name"].as_str()] = load_checks(
                keys["checks"],
                suite_dir=EXAMPLE.root,
                plugin_dir=EXAMPLE.plugin,
                within=EXAMPLE.root,
            )
    assert "plan-lab" in loaded
    assert load_policy(root["scoring"]).analytic_threshold == 3.0
    # Stage 3's curated fixture is known-good: its file checks must pass.
    files_only = [c for c in loaded["plan-lab"] if not c.reads_trajectory]
    result = run_checks(files_only, EXAMPLE.fixtures / "3-plan-lab-output")
    assert [c.id for c in result.criteria if not c.passed] == []
    # The files, headings and schema are in the stage's contract (`produces`) now.
    assert [c.id for c in result.criteria] == ["plan-chapter-count"]


class _AnyKey:
    """Every key allowed: this test reads only the parts grading owns."""

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_absurdly_nested_json_fails_the_check_without_crashing(ws: Path, tmp_path: Path) -> None:
    (ws / "lab" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    trajectory = tmp_path / "deep.jsonl"
    trajectory.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n")
    got = results(
        "- { json_schema: lab/deep.json, schema: { type: array }, id: s }\n"
        "- { equals_length: lab/deep.json, field: a, array: b, id: e }\n"
        "- { trajectory: { tool: Bash, used: false }, id: t }\n",
        tmp_path,
        ws,
        trajectory,
    )
    assert got["s"] == (False, "lab/deep.json: not valid JSON (nested too deeply)")
    assert got["e"] == (False, "lab/deep.json: not valid JSON (nested too deeply)")
    assert got["t"] == (
        False,
        "trajectory deep.jsonl unreadable: line 1 is not JSON (nested too deeply)",
    )
