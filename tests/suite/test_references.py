"""Stage prompts' slash commands and reviewer agents are checked against the plugin
at load (issue 10, item 4), on the feature-dev test plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.errors import Problems, UserError
from ci_evals.suite.load import load_suite
from tests.onboarding_helpers import copy_feature_dev, write

REVIEWER = """\
    reviewer:
      agent: {agent}
      rubrics: [rubrics]
      prompt: "Read {{plugin}}/{agent} and review. Output format: json"
"""


def suite(top: Path, prompt: str, *, reviewer_agent: str | None = None) -> Path:
    plugin = copy_feature_dev(top)
    if reviewer_agent is not None:
        write(plugin / "rubrics" / "checklist" / "tests-pass.md", "Tests pass.\n")
    extra = REVIEWER.format(agent=reviewer_agent) if reviewer_agent is not None else ""
    body = (
        "version: 1\nplugin: plugin\nstage_map: null\nstages:\n"
        f"  - name: explore\n    prompt: {json.dumps(prompt)}\n{extra}"
    )
    return write(top / "ci-evals.yaml", body)


def error_of(path: Path) -> str:
    with pytest.raises(UserError) as info:
        load_suite(path, display="ci-evals.yaml")
    text = str(info.value)
    assert "\n" not in text
    return text


def test_the_real_command_loads(tmp_path: Path) -> None:
    loaded = load_suite(suite(tmp_path, "/feature-dev:feature-dev Add a --json flag"))
    assert loaded.plugin.commands == ("feature-dev",)
    assert loaded.plugin.agents == (
        "agents/code-architect.md",
        "agents/code-explorer.md",
        "agents/code-reviewer.md",
    )


def test_a_typo_in_the_command_is_one_line_with_the_valid_names(tmp_path: Path) -> None:
    text = error_of(suite(tmp_path, "/feature-dev:featuredev Add a --json flag"))
    assert text == (
        "ci-evals.yaml:6:13: stages[0].prompt: /feature-dev:featuredev: the plugin has no "
        "command 'featuredev' (valid: /feature-dev:feature-dev)"
    )


def test_another_plugin_name_is_refused(tmp_path: Path) -> None:
    text = error_of(suite(tmp_path, "/featuredev:feature-dev Add a flag"))
    assert text.startswith("ci-evals.yaml:6:13: stages[0].prompt: /featuredev:feature-dev")
    assert "the suite's plugin is 'feature-dev' (valid: /feature-dev:feature-dev)" in text


@pytest.mark.parametrize(
    "prompt",
    [
        "Explore the code base, then /feature-dev:feature-dev.",  # trailing punctuation
        "/feature-dev:feature-dev {feature}",  # a placeholder as the argument
        "Open http://localhost:8080/x and describe it",  # a URL is no command
        "/feature-dev:{command} x",  # the command comes from an input: not known at load
    ],
)
def test_prompts_that_load(tmp_path: Path, prompt: str) -> None:
    path = suite(tmp_path, prompt)
    text = path.read_text() + "scenarios:\n  - {id: a, inputs: {feature: f, command: c}}\n"
    path.write_text(text)
    load_suite(path)


def test_a_reviewer_agent_typo_lists_the_agents(tmp_path: Path) -> None:
    text = error_of(
        suite(tmp_path, "/feature-dev:feature-dev x", reviewer_agent="agents/reviewer.md")
    )
    assert text.startswith("ci-evals.yaml:8:14: stages[0].reviewer.agent: the plugin has no agent")
    assert (
        "its agents: agents/code-architect.md, agents/code-explorer.md, agents/code-reviewer.md"
        in text
    )


def test_a_reviewer_agent_outside_the_plugin_is_refused(tmp_path: Path) -> None:
    text = error_of(suite(tmp_path, "/feature-dev:feature-dev x", reviewer_agent="../x.md"))
    assert "reviewer.agent: must be a path inside the plugin folder" in text


def test_a_real_reviewer_agent_loads(tmp_path: Path) -> None:
    path = suite(tmp_path, "/feature-dev:feature-dev x", reviewer_agent="agents/code-reviewer.md")
    grading = load_suite(path).stages[0].grading
    assert grading.reviewer is not None and grading.reviewer.agent == "agents/code-reviewer.md"


def test_nested_commands_skills_and_manifest_paths(tmp_path: Path) -> None:
    plugin = copy_feature_dev(tmp_path)
    write(plugin / "commands" / "git" / "commit.md", "Commit.\n")
    write(plugin / "skills" / "tidy" / "SKILL.md", "---\nname: tidy\n---\nTidy.\n")
    write(plugin / "extra" / "release.md", "Release.\n")
    manifest = plugin / ".claude-plugin" / "plugin.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "commands": ["./extra/release.md"]}))
    body = "version: 1\nplugin: plugin\nstage_map: null\nstages:\n" + "".join(
        f"  - {{name: s{i}, prompt: '/feature-dev:{c} now'}}\n"
        for i, c in enumerate(("feature-dev", "git:commit", "tidy", "release"))
    )
    loaded = load_suite(write(tmp_path / "ci-evals.yaml", body))
    assert loaded.plugin.commands == ("feature-dev", "git:commit", "release", "tidy")


def test_collected_problems_are_all_listed(tmp_path: Path) -> None:
    path = suite(tmp_path, "/feature-dev:featuredev x", reviewer_agent="agents/nope.md")
    path.write_text(path.read_text().replace("rubrics: [rubrics]", "rubrics: [rubric]"))
    problems = Problems(collect=True)
    load_suite(path, display="ci-evals.yaml", problems=problems)
    found = [str(p) for p in problems.found]
    assert len(found) == 3, found
    for expected in (
        "ci-evals.yaml:6:13: stages[0].prompt: /feature-dev:featuredev: the plugin has no",
        "ci-evals.yaml:8:14: stages[0].reviewer.agent: the plugin has no agent file",
        "ci-evals.yaml:9:16: stages[0].reviewer.rubrics: rubric pattern 'rubric' matches",
    ):
        assert sum(line.startswith(expected) for line in found) == 1, (expected, found)


@pytest.mark.slow
def test_the_names_are_the_ones_the_real_cli_offers(tmp_path: Path) -> None:
    """What `plugin_commands` finds is what the bundled CLI lists as the plugin's
    slash commands (its init message): commands, sub-folders as `a:b`, skills."""
    from ci_evals.endpoints.stub_model import StubServer, loads_script  # noqa: PLC0415
    from ci_evals.suite.references import plugin_commands  # noqa: PLC0415
    from tests.stub_helpers import run_query  # noqa: PLC0415

    plugin = copy_feature_dev(tmp_path)
    write(plugin / "commands" / "git" / "commit.md", "Commit.\n")
    write(plugin / "skills" / "tidy" / "SKILL.md", "---\nname: tidy\ndescription: t\n---\nTidy.\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = loads_script("rules:\n  - turns: [{text: done}]\n")
    with StubServer(script) as server:
        run = run_query(server, "hello", workspace, tmp_path, plugins=[plugin])
    offered = next(
        m.data["slash_commands"]
        for m in run.messages
        if isinstance(getattr(m, "data", None), dict) and "slash_commands" in m.data
    )
    ours = plugin_commands(plugin, json.loads((plugin / ".claude-plugin/plugin.json").read_text()))
    assert sorted(
        c.removeprefix("feature-dev:") for c in offered if c.startswith("feature-dev:")
    ) == [*ours]
    assert ours == ("feature-dev", "git:commit", "tidy")
