"""The suite keys of the loop agent: `loop:`, `scaffold:`, and no `plugin:` for it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ci_evals.agents.loop_config import TOOL_NAMES, LoopConfig
from ci_evals.errors import UserError
from ci_evals.suite.load import NO_PLUGIN, load_suite
from ci_evals.suite.matrix import load_matrix
from ci_evals.workspace.create import create_workspace

STAGES = "stages:\n  - {name: build, prompt: Build it.}\n"


def suite_file(tmp_path: Path, head: str) -> Path:
    path = tmp_path / "ci-evals.yaml"
    path.write_text("version: 1\n" + textwrap.dedent(head) + STAGES, encoding="utf-8")
    return path


def error_of(tmp_path: Path, head: str) -> str:
    with pytest.raises(UserError) as caught:
        load_suite(suite_file(tmp_path, head))
    return str(caught.value)


def test_a_loop_suite_needs_no_plugin_and_gets_the_defaults(tmp_path: Path) -> None:
    suite = load_suite(suite_file(tmp_path, "agent: loop\n"))
    assert suite.plugin.path == NO_PLUGIN and suite.loop == LoopConfig()
    assert suite.loop.max_steps == 20 and suite.loop.tools == TOOL_NAMES


def test_loop_settings(tmp_path: Path) -> None:
    head = """\
        agent: loop
        loop:
          max_steps: 7
          tools: [run_command, read_file]
          system_prompt: Be brief.
          context: {strategy: window, keep_last: 3}
        """
    loop = load_suite(suite_file(tmp_path, head)).loop
    assert loop is not None
    assert loop.max_steps == 7 and loop.system_prompt == "Be brief."
    assert loop.tools == ("run_command", "read_file", "final_submit")  # always offered
    assert (loop.context, loop.keep_last) == ("window", 3)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("agent: claude\n", "ci-evals.yaml:1:1: missing required key 'plugin'"),
        (
            "agent: loop\nloop: {tools: [run_command, shell]}\n",
            "loop.tools[1]: unknown tool 'shell'",
        ),
        ("agent: loop\nloop: {context: {strategy: fold}}\n", "unknown context strategy 'fold'"),
        ("agent: loop\nloop: {max_steps: 0}\n", "loop.max_steps: must be at least 1"),
        ("agent: loop\nloop: {steps: 3}\n", "loop.steps: unknown key 'steps'"),
        ("loop: {max_steps: 3}\n", "loop: configures agent: loop, not claude"),
        ("agent: loop\nscaffold: nowhere\n", "scaffold: scaffold folder not found"),
    ],
)
def test_mistakes_are_one_line_with_their_place(tmp_path: Path, head: str, expected: str) -> None:
    message = error_of(tmp_path, head)
    assert expected in message and "\n" not in message


def test_the_scaffold_is_laid_into_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "scaffold" / "src").mkdir(parents=True)
    (tmp_path / "scaffold" / "src" / "main.py").write_text("# start here\n")
    (tmp_path / "scaffold" / "README.md").write_text("the task\n")
    suite = load_suite(suite_file(tmp_path, "agent: loop\nscaffold: scaffold\n"))
    workspace = create_workspace(suite, 1, tmp_path / "run")
    assert (workspace.root / "src" / "main.py").read_text() == "# start here\n"
    assert (workspace.root / "README.md").read_text() == "the task\n"
    assert not (tmp_path / "run" / "workspace" / "scaffold").exists()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tool_sets: {min: [run_command, curl]}\n", "tool_sets.min[1]: unknown tool 'curl'"),
        ("system_prompts: {}\n", "system_prompts: needs at least one name: value"),
        ("system_prompts: {'a b': x}\n", "bad name 'a b'"),
        ("model: x\n", "unknown key 'model'"),
    ],
)
def test_matrix_mistakes(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        load_matrix(path)
    assert expected in str(caught.value) and str(path) in str(caught.value)


def test_matrix_configurations_are_the_product(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text("models: [m1, m2]\ntool_sets: {all: [run_command], none: [read_file]}\n")
    labels = [c.label for c in load_matrix(path)]
    assert labels == [
        "model m1, tools all",
        "model m1, tools none",
        "model m2, tools all",
        "model m2, tools none",
    ]
    assert [c.folder(n) for n, c in enumerate(load_matrix(path), 1)][:2] == [
        "1-m1_all",
        "2-m1_none",
    ]
    assert load_matrix(None)[0].label == "each task's own model, prompt and tools"
    assert load_matrix(None)[0].folder(1) == "1-own"
