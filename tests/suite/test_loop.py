"""The suite keys of the loop agent: `agent: {kind: loop, ...}` (and the old `loop:`),
`scaffold:`, and no `plugin:` for it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ci_evals.agents.base import AgentConfig
from ci_evals.agents.loop.config import TOOL_NAMES, LoopConfig
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
    assert suite.plugin.path == NO_PLUGIN and suite.agent == AgentConfig("loop", LoopConfig())
    assert LoopConfig().max_steps == 20 and LoopConfig().tools == TOOL_NAMES


def test_loop_settings(tmp_path: Path) -> None:
    head = """\
        agent:
          kind: loop
          max_steps: 7
          tools: [run_command, read_file]
          system_prompt: Be brief.
          context: {strategy: window, keep_last: 3}
        """
    loop = load_suite(suite_file(tmp_path, head)).agent.options
    assert isinstance(loop, LoopConfig)
    assert loop.max_steps == 7 and loop.system_prompt == "Be brief."
    assert loop.tools == ("run_command", "read_file", "final_submit")  # always offered
    assert (loop.context, loop.keep_last) == ("window", 3)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("agent: claude\n", "ci-evals.yaml:1:1: missing required key 'plugin'"),
        (
            "agent: {kind: loop, tools: [run_command, shell]}\n",
            "ci-evals.yaml:2:42: agent.tools[1]: unknown tool 'shell'",
        ),
        ("agent: {kind: loop, context: {strategy: fold}}\n", "unknown context strategy 'fold'"),
        ("agent: {kind: loop, max_steps: 0}\n", "2:32: agent.max_steps: must be at least 1"),
        ("agent: {kind: loop, steps: 3}\n", "2:21: agent.steps: unknown key 'steps'"),
        ("agent: {kind: claude, max_steps: 3}\n", "agent.max_steps: unknown key 'max_steps'"),
        ("agent: {max_steps: 3}\n", "2:8: agent: needs a kind"),
        (
            "agent: gpt\n",
            "2:8: agent: unknown agent 'gpt' (known: claude, loop; a package adds one with an "
            "entry point in group ci_evals.agents)",
        ),
        ("loop: {max_steps: 3}\n", "loop: configures agent loop, but this suite's agent is claude"),
        ("agent: {kind: loop}\nloop: {max_steps: 3}\n", "loop: and agent: {kind: loop, ...}"),
        # The old form: its mistakes still at their own line.
        ("agent: loop\nloop: {max_steps: 0}\n", "3:19: loop.max_steps: must be at least 1"),
        ("agent: loop\nscaffold: nowhere\n", "scaffold: scaffold folder not found"),
    ],
)
def test_mistakes_are_one_line_with_their_place(tmp_path: Path, head: str, expected: str) -> None:
    message = error_of(tmp_path, head)
    assert expected in message and "\n" not in message


def test_the_old_loop_key_loads_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = suite_file(tmp_path, "agent: loop\nloop: {max_steps: 7}\n")
    assert load_suite(path).agent == AgentConfig("loop", LoopConfig(max_steps=7))
    assert capsys.readouterr().err.splitlines() == [
        f"ci-evals: warning: {path}:3: loop: is the old form; write agent: {{kind: loop, "
        "<its keys>}"
    ]
    load_suite(suite_file(tmp_path, "agent: {kind: loop, max_steps: 7}\n"))
    assert capsys.readouterr().err == ""  # the new form, and a bare name, say nothing


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
        ("tool_sets: {min: [run_command, run_command]}\n", "listed twice"),
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


def test_the_agent_kind_checks_a_matrix_tool_set_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text("tool_sets: {min: [run_command, curl]}\n", encoding="utf-8")
    (configuration,) = load_matrix(path)
    loop = load_suite(suite_file(tmp_path, "agent: loop\n"))
    with pytest.raises(UserError) as caught:
        configuration.apply(loop, "t")
    assert str(caught.value).startswith(f"{path}:1:32: tool_sets.min[1]: unknown tool 'curl'")
    claude = tmp_path / "claude"
    (claude / "plugin" / ".claude-plugin").mkdir(parents=True)
    (claude / "plugin" / ".claude-plugin" / "plugin.json").write_text('{"name": "p"}')
    suite = load_suite(suite_file(claude, "plugin: plugin\n"))
    with pytest.raises(UserError, match="task 't': agent claude has no system prompt or tool"):
        configuration.apply(suite, "t")


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
