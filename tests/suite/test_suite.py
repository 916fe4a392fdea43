"""ci-evals.yaml: loading, every validation error (file:line), templates, look-ups."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ci_evals.config.templates import parse_template
from ci_evals.errors import UserError
from ci_evals.suite.load import Limits, find_suite, load_suite
from tests.conftest import git

STAGES = """\
stages:
  - name: research
    prompt: "/demo:research {company}"
  - name: plan
    prompt: "/demo:plan {company} {product}"
    cwd: "labs/{lab}"
    limits: { max_turns: 5 }
"""
SCENARIOS = """\
scenarios:
  - id: acme
    inputs: { company: Acme, product: Arm, lab: acme-arm }
  - id: zeta
    inputs: { company: Zeta, product: Z1, lab: 7 }
"""


def make_plugin(top: Path, name: str = "demo") -> Path:
    plugin = top / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(f'{{"name": "{name}"}}')
    (plugin / "commands").mkdir()
    (plugin / "commands" / "research.md").write_text("Research $ARGUMENTS\n")
    (plugin / "commands" / "plan.md").write_text("Plan $ARGUMENTS\n")
    return plugin


def write_suite(top: Path, body: str, *, plugin: bool = True) -> Path:
    if plugin and not (top / "plugin").exists():
        make_plugin(top)
    path = top / "ci-evals.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def suite_text(head: str = "", stages: str = STAGES, scenarios: str = SCENARIOS) -> str:
    return "version: 1\nplugin: plugin\nstage_map: null\n" + head + stages + scenarios


def load_error(top: Path, body: str) -> str:
    path = write_suite(top, body)
    with pytest.raises(UserError) as info:
        load_suite(path, "ci-evals.yaml")
    return str(info.value)


# -- a valid suite --------------------------------------------------------------


def test_loads_a_full_suite(tmp_path: Path) -> None:
    head = (
        "fixtures: curated\nmodel: claude-sonnet-4-5\nbudget_usd: 5\n"
        "limits: { max_turns: 30, timeout_s: 900, max_budget_usd: 2.0 }\n"
        "repeat: 3\nscoring: { analytic_mean_at_least: 3.5 }\n"
    )
    suite = load_suite(write_suite(tmp_path, suite_text(head)))
    assert suite.plugin.name == "demo"
    assert suite.plugin.path == tmp_path / "plugin"
    assert suite.fixtures == tmp_path / "curated"
    assert suite.model == "claude-sonnet-4-5"
    assert suite.budget_usd == 5.0
    assert suite.stage_names == ("research", "plan")
    research, plan = suite.stages
    assert (research.number, plan.number) == (1, 2)
    # Suite limits are the defaults; a stage overrides only what it names.
    assert research.limits == Limits(max_turns=30, timeout_s=900.0, max_budget_usd=2.0)
    assert plan.limits == Limits(max_turns=5, timeout_s=900.0, max_budget_usd=2.0)
    assert research.cwd.text == "."
    assert plan.fixture_dirname == "2-plan-output"
    assert suite.fixture_dir(plan) == tmp_path / "curated" / "2-plan-output"
    # Numbers in inputs become text.
    assert suite.scenario("zeta").inputs["lab"] == "7"
    # Grading keys are kept, unparsed, with their positions.
    assert set(suite.extra) == {"repeat", "scoring"}
    assert suite.extra["scoring"].line == 9
    assert suite.grading.repeat == 3


def test_max_concurrency_is_a_positive_whole_number(tmp_path: Path) -> None:
    assert (
        load_suite(write_suite(tmp_path, suite_text("max_concurrency: 2\n"))).max_concurrency == 2
    )
    assert load_suite(write_suite(tmp_path, suite_text(""))).max_concurrency is None
    message = load_error(tmp_path, suite_text("max_concurrency: 0\n"))
    assert message.startswith("ci-evals.yaml:") and "max_concurrency" in message, message
    assert "\n" not in message


def test_a_stage_can_lift_the_suite_budget_cap(tmp_path: Path) -> None:
    head = "budget_usd: null\nlimits: { max_budget_usd: 2 }\n"
    stages = (
        "stages:\n  - { name: a, prompt: go }\n"
        "  - { name: b, prompt: go, limits: { max_budget_usd: null } }\n"
    )
    suite = load_suite(write_suite(tmp_path, suite_text(head, stages=stages)))
    assert suite.budget_usd is None
    assert [s.limits.max_budget_usd for s in suite.stages] == [2.0, None]


def test_defaults(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, suite_text()))
    assert suite.fixtures == tmp_path / "fixtures"
    assert suite.model is None
    assert suite.budget_usd is None
    assert suite.stages[0].limits == Limits()
    assert suite.stages[0].limits.max_output_files == 10_000
    assert suite.stage_map is None


def test_max_output_files_is_a_limit_a_stage_overrides(tmp_path: Path) -> None:
    head = "limits: { max_output_files: 500 }\n"
    stages = (
        "stages:\n  - { name: a, prompt: go }\n"
        "  - { name: b, prompt: go, limits: { max_output_files: 50000 } }\n"
    )
    suite = load_suite(write_suite(tmp_path, suite_text(head, stages=stages)))
    assert [s.limits.max_output_files for s in suite.stages] == [500, 50_000]


def add_reviewer(top: Path) -> None:
    plugin = top / "plugin"
    (plugin / "agents").mkdir(parents=True, exist_ok=True)
    (plugin / "agents" / "review.md").write_text("Review.\n")
    rubrics = plugin / "references" / "checklist"
    rubrics.mkdir(parents=True)
    (rubrics / "has-goals.md").write_text("# Has goals\n")


REVIEWED = """\
stages:
  - name: research
    prompt: go
    reviewer:
      agent: agents/review.md
      rubrics: [references/checklist]
      prompt: "Read {plugin}/agents/review.md. Review {lab}/lab.md"
    checks: [{ files: "*.md", min: 1 }]
"""


def test_grading_keys_are_validated_and_kept(tmp_path: Path) -> None:
    make_plugin(tmp_path)
    add_reviewer(tmp_path)
    suite = load_suite(write_suite(tmp_path, suite_text(stages=REVIEWED)))
    stage = suite.stages[0]
    assert set(stage.extra) == {"reviewer", "checks"}
    assert stage.extra["checks"].line == 11
    assert stage.grading.reviewer is not None
    assert stage.grading.reviewer.agent == "agents/review.md"
    (checks,) = stage.grading.graders
    assert checks.name == "checks"
    assert len(checks.checks) == 1  # type: ignore[attr-defined]
    # The reviewer prompt is a template like the stage prompt.
    assert stage.reviewer_prompt is not None
    assert stage.reviewer_prompt.names == {"plugin", "lab"}
    values = suite.template_values(
        stage, suite.scenario("acme"), workspace=Path("/w"), plugin=Path("/p")
    )
    rendered = stage.reviewer_prompt.render(values)
    assert rendered == "Read /p/agents/review.md. Review acme-arm/lab.md"


def test_reviewer_prompt_placeholders_checked_against_scenarios(tmp_path: Path) -> None:
    make_plugin(tmp_path)
    add_reviewer(tmp_path)
    scenarios = "scenarios:\n  - id: acme\n"
    message = load_error(tmp_path, suite_text(stages=REVIEWED, scenarios=scenarios))
    assert message.startswith("ci-evals.yaml:10:15: stages[0].reviewer.prompt: ")
    assert "unknown placeholder {lab}: scenario 'acme' has no input 'lab'" in message


def test_grading_errors_have_positions(tmp_path: Path) -> None:
    stages = "stages:\n  - name: research\n    prompt: go\n    reviewer: { agent: nope.md }\n"
    message = load_error(tmp_path, suite_text(stages=stages))
    assert message.startswith("ci-evals.yaml:7:15: stages[0].reviewer: missing required key")


def test_scenarios_may_be_left_out(tmp_path: Path) -> None:
    stages = 'stages:\n  - { name: a, prompt: "/demo:research {scenario}" }\n'
    suite = load_suite(write_suite(tmp_path, suite_text(stages=stages, scenarios="")))
    assert [(s.id, dict(s.inputs)) for s in suite.scenarios] == [("default", {})]
    # ... but then a template naming an input cannot be filled.
    stages = 'stages:\n  - { name: a, prompt: "/demo:research {company}" }\n'
    message = load_error(tmp_path, suite_text(stages=stages, scenarios=""))
    assert "unknown placeholder {company}: scenario 'default' has no input 'company'" in message


def test_empty_scenario_list(tmp_path: Path) -> None:
    message = load_error(tmp_path, suite_text(scenarios="scenarios: []\n"))
    assert message.startswith("ci-evals.yaml:11:12: scenarios: must not be empty")


def test_stage_and_scenario_lookup(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, suite_text()), "ci-evals.yaml")
    assert suite.stage(2).name == "plan"
    assert suite.stage("2").name == "plan"
    assert suite.stage("research").number == 1
    assert suite.scenario("zeta").id == "zeta"
    for bad in ("3", 0, "nope"):
        with pytest.raises(UserError) as info:
            suite.stage(bad)
        assert "unknown stage" in str(info.value)
        assert "stages: 1 research, 2 plan" in str(info.value)
    with pytest.raises(UserError) as info:
        suite.scenario("beta")
    assert str(info.value) == ("ci-evals.yaml: unknown scenario 'beta' (scenarios: acme, zeta)")


def test_prompt_and_cwd_rendering(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, suite_text()))
    plan, acme = suite.stage("plan"), suite.scenario("acme")
    ws, plugin = tmp_path / "ws", tmp_path / "p"
    assert suite.prompt_for(plan, acme, workspace=ws, plugin=plugin) == "/demo:plan Acme Arm"
    assert suite.cwd_for(plan, acme, workspace=ws, plugin=plugin) == ws / "labs" / "acme-arm"
    values = suite.template_values(plan, acme, workspace=ws, plugin=plugin)
    assert values["workspace"] == str(ws)
    assert values["plugin"] == str(plugin)
    assert values["stage"] == "plan"
    assert values["stage_number"] == "2"
    assert values["scenario"] == "acme"


# -- templates -----------------------------------------------------------------


def test_template_escapes_and_names() -> None:
    template = parse_template("{{literal}} {a} and {b_c-d}}} {{")
    assert template.names == {"a", "b_c-d"}
    assert template.render({"a": "1", "b_c-d": "2"}) == "{literal} 1 and 2} {"


def test_template_with_no_placeholders() -> None:
    assert parse_template("plain").render({}) == "plain"
    assert parse_template("").render({}) == ""


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a { b", "unmatched '{'"),
        ("a } b", "unmatched '}'"),
        ("{a.b}", "bad placeholder '{a.b}'"),
        ("{0}", "bad placeholder '{0}'"),
        ("{name:>10}", "bad placeholder"),
        ("{}", "bad placeholder '{}'"),
    ],
)
def test_template_syntax_errors(tmp_path: Path, text: str, problem: str) -> None:
    stages = f'stages:\n  - name: research\n    prompt: "{text}"\n'
    message = load_error(tmp_path, suite_text(stages=stages))
    assert message.startswith("ci-evals.yaml:6:13: stages[0].prompt: ")
    assert problem in message


def test_unknown_placeholder_names_template_line_and_scenario(tmp_path: Path) -> None:
    scenarios = """\
scenarios:
  - id: acme
    inputs: { company: Acme, product: Arm, lab: x }
  - id: beta
    inputs: { company: Beta, lab: y }
"""
    message = load_error(tmp_path, suite_text(scenarios=scenarios))
    assert message.startswith("ci-evals.yaml:8:13: stages[1].prompt: ")
    assert "unknown placeholder {product}: scenario 'beta' has no input 'product'" in message
    assert "its inputs: company, lab" in message


def test_placeholder_in_cwd_checked_too(tmp_path: Path) -> None:
    scenarios = "scenarios:\n  - id: acme\n    inputs: { company: A, product: B }\n"
    message = load_error(tmp_path, suite_text(scenarios=scenarios))
    assert message.startswith("ci-evals.yaml:9:10: stages[1].cwd: unknown placeholder {lab}")


def test_builtins_need_no_inputs(tmp_path: Path) -> None:
    stages = (
        "stages:\n  - name: research\n"
        '    prompt: "{workspace} {plugin} {stage} {stage_number} {scenario}"\n'
        '    cwd: "out/{scenario}/{stage}"\n'
    )
    suite = load_suite(write_suite(tmp_path, suite_text(stages=stages)))
    stage, acme = suite.stages[0], suite.scenario("acme")
    prompt = suite.prompt_for(stage, acme, workspace=Path("/w"), plugin=Path("/p"))
    assert prompt == "/w /p research 1 acme"


@pytest.mark.parametrize("cwd", ["..", "labs/../../x", "/etc", "{plugin}", "{lab}/../../up"])
def test_cwd_must_stay_in_the_workspace(tmp_path: Path, cwd: str) -> None:
    stages = f'stages:\n  - name: research\n    prompt: go\n    cwd: "{cwd}"\n'
    message = load_error(tmp_path, suite_text(stages=stages))
    assert message.startswith("ci-evals.yaml:7:10: stages[0].cwd: cwd leaves the workspace")
    assert "scenario 'acme'" in message


def test_cwd_may_name_the_workspace(tmp_path: Path) -> None:
    stages = 'stages:\n  - name: research\n    prompt: go\n    cwd: "{workspace}/labs"\n'
    suite = load_suite(write_suite(tmp_path, suite_text(stages=stages)))
    cwd = suite.cwd_for(
        suite.stages[0], suite.scenarios[0], workspace=tmp_path / "w", plugin=tmp_path
    )
    assert cwd == tmp_path / "w" / "labs"


# -- validation errors, each with file:line ----------------------------------


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("colour: blue\n", "ci-evals.yaml:4:1: colour: unknown key 'colour'"),
        ("model: 3\n", "ci-evals.yaml:4:8: model: expected a string, got an integer"),
        ("budget_usd: -1\n", "ci-evals.yaml:4:13: budget_usd: must be at least 0.0"),
        ("budget_usd: 0\n", "ci-evals.yaml:4:13: budget_usd: must be greater than 0"),
        (
            "max_forecast_usd: 0\n",
            "ci-evals.yaml:4:19: max_forecast_usd: must be greater than 0",
        ),
        (
            "max_forecast_usd: lots\n",
            "ci-evals.yaml:4:19: max_forecast_usd: expected a number",
        ),
        ("limits: { max_turns: 0 }\n", "ci-evals.yaml:4:22: limits.max_turns: must be at least 1"),
        (
            "limits: { timeout_s: 0 }\n",
            "ci-evals.yaml:4:22: limits.timeout_s: must be greater than 0",
        ),
        ("limits: { turns: 3 }\n", "ci-evals.yaml:4:11: limits.turns: unknown key 'turns'"),
        (
            "limits: { max_budget_usd: 0 }\n",
            "ci-evals.yaml:4:27: limits.max_budget_usd: must be greater than 0",
        ),
        (
            "limits: { max_output_files: 0 }\n",
            "ci-evals.yaml:4:29: limits.max_output_files: must be at least 1",
        ),
    ],
)
def test_top_level_errors(tmp_path: Path, head: str, expected: str) -> None:
    assert load_error(tmp_path, suite_text(head)).startswith(expected)


def test_version_errors(tmp_path: Path) -> None:
    body = suite_text().replace("version: 1", "version: 2")
    assert load_error(tmp_path, body).startswith(
        "ci-evals.yaml:1:10: version: unsupported version 2"
    )
    body = suite_text().replace("version: 1\n", "")
    assert load_error(tmp_path, body).startswith(
        "ci-evals.yaml:1:1: missing required key 'version'"
    )


def test_yaml_syntax_error(tmp_path: Path) -> None:
    message = load_error(tmp_path, "version: 1\nstages: [\n")
    assert message.startswith("ci-evals.yaml:2:10: YAML syntax error")  # the last line, not past it


def test_plugin_folder_missing(tmp_path: Path) -> None:
    path = write_suite(tmp_path, suite_text().replace("plugin: plugin", "plugin: nowhere"))
    with pytest.raises(UserError) as info:
        load_suite(path, "ci-evals.yaml")
    assert str(info.value).startswith("ci-evals.yaml:2:9: plugin: plugin folder not found")


def test_plugin_without_manifest_is_named_after_its_folder(tmp_path: Path) -> None:
    """As Claude Code names a `--plugin-dir` plugin without .claude-plugin/plugin.json."""
    (make_plugin(tmp_path) / ".claude-plugin" / "plugin.json").unlink()
    body = suite_text().replace("/demo:", "/plugin:")
    suite = load_suite(write_suite(tmp_path, body), "ci-evals.yaml")
    assert suite.plugin.name == "plugin"
    assert suite.plugin.commands == ("plan", "research")
    assert suite.plugin.manifest_to_write == {"name": "plugin"}


def test_plugin_without_manifest_needs_a_plain_folder_name(tmp_path: Path) -> None:
    (tmp_path / "my plugin" / "agents").mkdir(parents=True)
    body = suite_text().replace("plugin: plugin", 'plugin: "my plugin"')
    message = load_error(tmp_path, body)
    assert "has no .claude-plugin/plugin.json, and Claude Code would name it after" in message
    assert "'my plugin', which is not a plugin name" in message


def test_plugin_manifest_invalid_json(tmp_path: Path) -> None:
    manifest = make_plugin(tmp_path) / ".claude-plugin" / "plugin.json"
    manifest.write_text('{\n  "name": demo\n}')
    message = load_error(tmp_path, suite_text())
    assert message.startswith(f"{manifest}:2:11: invalid JSON")


def test_plugin_manifest_without_name(tmp_path: Path) -> None:
    manifest = make_plugin(tmp_path) / ".claude-plugin" / "plugin.json"
    manifest.write_text('{"version": "1"}')
    message = load_error(tmp_path, suite_text())
    assert message == f'{manifest}: name: the manifest needs a "name" string'


def test_duplicate_stage_name(tmp_path: Path) -> None:
    stages = "stages:\n  - { name: research, prompt: a }\n  - { name: research, prompt: b }\n"
    message = load_error(tmp_path, suite_text(stages=stages))
    assert message == (
        "ci-evals.yaml:6:13: stages[1].name: duplicate stage name 'research' (first used at line 5)"
    )


@pytest.mark.parametrize("name", ["Research", "12", "a b", "-x", "s" * 65])
def test_bad_stage_name(tmp_path: Path, name: str) -> None:
    stages = f'stages:\n  - {{ name: "{name}", prompt: a }}\n'
    message = load_error(tmp_path, suite_text(stages=stages))
    assert message.startswith(f"ci-evals.yaml:5:13: stages[0].name: bad stage name '{name}'")


def test_stage_errors(tmp_path: Path) -> None:
    assert load_error(tmp_path, suite_text(stages="stages: []\n")).startswith(
        "ci-evals.yaml:4:9: stages: must not be empty"
    )
    assert load_error(tmp_path, suite_text(stages="stages:\n  - { name: a }\n")).startswith(
        "ci-evals.yaml:5:5: stages[0]: missing required key 'prompt'"
    )
    stages = "stages:\n  - { name: a, prompt: b, command: c }\n"
    assert load_error(tmp_path, suite_text(stages=stages)).startswith(
        "ci-evals.yaml:5:27: stages[0].command: unknown key 'command'"
    )
    stages = "stages:\n  - { name: a, prompt: '' }\n"
    assert load_error(tmp_path, suite_text(stages=stages)).startswith(
        "ci-evals.yaml:5:24: stages[0].prompt: must not be empty"
    )


def test_duplicate_scenario_id(tmp_path: Path) -> None:
    stages = "stages:\n  - { name: a, prompt: go }\n"
    scenarios = "scenarios:\n  - id: acme\n  - id: acme\n"
    message = load_error(tmp_path, suite_text(stages=stages, scenarios=scenarios))
    assert message == (
        "ci-evals.yaml:8:9: scenarios[1].id: duplicate scenario id 'acme' (first used at line 7)"
    )


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("  - id: a/b\n", "ci-evals.yaml:7:9: scenarios[0].id: bad scenario id 'a/b'"),
        ('  - id: ".."\n', "ci-evals.yaml:7:9: scenarios[0].id: bad scenario id '..'"),
        (  # a name the file system would refuse: the suite's, not the run's, mistake
            f"  - id: {'x' * 65}\n",
            f"ci-evals.yaml:7:9: scenarios[0].id: bad scenario id '{'x' * 65}' (use letters",
        ),
        (
            "  - id: a\n    inputs: { stage: x }\n",
            "ci-evals.yaml:8:22: scenarios[0].inputs.stage: input 'stage' shadows a built-in",
        ),
        (
            "  - id: a\n    inputs: { x: [1] }\n",
            "ci-evals.yaml:8:18: scenarios[0].inputs.x: input values must be strings or numbers",
        ),
        (
            "  - id: a\n    inputs: { x: true }\n",
            "ci-evals.yaml:8:18: scenarios[0].inputs.x: input values must be strings or numbers",
        ),
        (
            "  - id: a\n    inputs: { a.b: x }\n",
            "ci-evals.yaml:8:20: scenarios[0].inputs.a.b: bad input name 'a.b'",
        ),
        (
            "  - id: a\n    inputs: [x]\n",
            "ci-evals.yaml:8:13: scenarios[0].inputs: expected a mapping of input names",
        ),
        ("  - inputs: {}\n", "ci-evals.yaml:7:5: scenarios[0]: missing required key 'id'"),
    ],
)
def test_scenario_errors(tmp_path: Path, scenario: str, expected: str) -> None:
    stages = "stages:\n  - { name: a, prompt: go }\n"
    message = load_error(tmp_path, suite_text(stages=stages, scenarios="scenarios:\n" + scenario))
    assert message.startswith(expected)


# -- the stage map cross-check -------------------------------------------------

MAP = """\
version: 1
root: plugin
stages: [{stages}]
entries:
  - {{ glob: "**", stage: 1 }}
fixtures: fixtures
"""


def map_repo(repo: Path, stages: str = "research, plan", suite_map: str = "") -> Path:
    (repo / "stage_map.yaml").write_text(MAP.format(stages=stages))
    body = suite_text().replace("stage_map: null\n", suite_map)
    path = write_suite(repo, body)
    git(repo, "add", "-A")
    return path


def test_stage_map_found_next_to_the_suite_and_matching(repo: Path) -> None:
    suite = load_suite(map_repo(repo))
    assert suite.stage_map == repo / "stage_map.yaml"


def test_stage_map_with_other_stage_names(repo: Path) -> None:
    path = map_repo(repo, stages="research, planning")
    with pytest.raises(UserError) as info:
        load_suite(path, "ci-evals.yaml")
    message = str(info.value)
    assert message.startswith("ci-evals.yaml:4:3: stages: the stages differ from the stage map ")
    assert "stage_map.yaml: map [research, planning], suite [research, plan]" in message
    assert "(first difference at stage 2)" in message


def test_stage_map_with_other_order_or_count(repo: Path) -> None:
    with pytest.raises(UserError, match="first difference at stage 1"):
        load_suite(map_repo(repo, stages="plan, research"))
    (repo / "ci-evals.yaml").unlink()
    with pytest.raises(UserError, match="first difference at stage 3"):
        load_suite(map_repo(repo, stages="research, plan, ship"))


def test_stage_map_for_another_plugin_folder(repo: Path) -> None:
    path = map_repo(repo, suite_map="stage_map: stage_map.yaml\n")
    (repo / "other").mkdir()
    (repo / "stage_map.yaml").write_text(
        MAP.format(stages="research, plan").replace("root: plugin", "root: other")
    )
    with pytest.raises(UserError) as info:
        load_suite(path, "ci-evals.yaml")
    assert str(info.value).startswith("ci-evals.yaml:3:12: stage_map: the stage map")
    assert "has root" in str(info.value)


def test_stage_map_for_another_fixtures_folder(repo: Path) -> None:
    path = map_repo(repo)
    path.write_text(path.read_text().replace("plugin: plugin\n", "plugin: plugin\nfixtures: fx\n"))
    with pytest.raises(UserError, match=r"has fixtures .* but the suite's fixtures are"):
        load_suite(path)


def test_stage_map_null_turns_the_check_off(repo: Path) -> None:
    path = map_repo(repo, stages="other", suite_map="stage_map: null\n")
    assert load_suite(path).stage_map is None


def test_stage_map_named_but_missing(repo: Path) -> None:
    path = map_repo(repo, suite_map="stage_map: maps/none.yaml\n")
    with pytest.raises(UserError, match="file not found"):
        load_suite(path)


# -- discovery -----------------------------------------------------------------


def test_find_suite_from_a_subfolder_of_the_repo(repo: Path) -> None:
    (repo / "ci-evals.yaml").write_text("version: 1\n")
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    assert find_suite(deep) == (repo / "ci-evals.yaml").resolve()


def test_find_suite_prefers_the_nearest(repo: Path) -> None:
    (repo / "ci-evals.yaml").write_text("version: 1\n")
    (repo / "examples").mkdir()
    (repo / "examples" / "ci-evals.yaml").write_text("version: 1\n")
    assert find_suite(repo / "examples") == (repo / "examples" / "ci-evals.yaml").resolve()


def test_find_suite_missing(repo: Path) -> None:
    (repo / "sub").mkdir()
    with pytest.raises(UserError) as info:
        find_suite(repo / "sub")
    assert "no ci-evals.yaml found" in str(info.value)
    assert "pass --suite PATH" in str(info.value)


def test_find_suite_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "ci-evals.yaml").write_text("version: 1\n")
    assert find_suite(tmp_path) == (tmp_path / "ci-evals.yaml").resolve()


# -- templates: properties -------------------------------------------------------


@given(st.text())
def test_escaped_text_renders_back_to_itself(text: str) -> None:
    escaped = text.replace("{", "{{").replace("}", "}}")
    template = parse_template(escaped)
    assert template.names == frozenset()
    assert template.render({}) == text


@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(blacklist_characters="{}")).map(lambda t: (False, t)),
            st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True).map(lambda n: (True, n)),
        ),
        max_size=8,
    ),
    st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=5),
)
def test_placeholders_are_found_and_filled(pieces: list[tuple[bool, str]], value: str) -> None:
    text = "".join("{" + p + "}" if is_name else p for is_name, p in pieces)
    template = parse_template(text)
    names = {p for is_name, p in pieces if is_name}
    assert template.names == names
    expected = "".join(value if is_name else p for is_name, p in pieces)
    assert template.render(dict.fromkeys(names, value)) == expected


# -- through the command line: one line, exit 2, nothing started ------------------


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC")}
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            # Loaded as Claude Code would, named "plugin": the prompts name another.
            lambda top: (top / "plugin" / ".claude-plugin" / "plugin.json").unlink(),
            "ci-evals.yaml:6:13: stages[0].prompt: /demo:research names plugin 'demo', "
            "but the suite's plugin is 'plugin'",
        ),
        (
            lambda top: (top / "ci-evals.yaml").write_text(
                suite_text(
                    stages="stages:\n  - { name: a, prompt: x }\n  - { name: a, prompt: y }\n"
                )
            ),
            "ci-evals.yaml:6:13: stages[1].name: duplicate stage name 'a'",
        ),
        (
            lambda top: (top / "ci-evals.yaml").write_text(
                suite_text(stages="stages:\n  - { name: a, prompt: '{nope}' }\n")
            ),
            "ci-evals.yaml:5:24: stages[0].prompt: unknown placeholder {nope}",
        ),
    ],
)
def test_suite_errors_on_the_command_line(
    tmp_path: Path, change: Callable[[Path], object], expected: str
) -> None:
    write_suite(tmp_path, suite_text())
    change(tmp_path)
    result = run_cli("--suite", "ci-evals.yaml", "--from-stage", "1", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ci-evals: error: " + expected), lines[0]
    assert not (tmp_path / ".ci-evals").exists()  # nothing started


def test_escaping_fixture_link_on_the_command_line(tmp_path: Path) -> None:
    write_suite(tmp_path, suite_text())
    fixture = tmp_path / "fixtures" / "1-research-output"
    fixture.mkdir(parents=True)
    (fixture / "passwd").symlink_to("/etc/passwd")
    result = run_cli("--suite", "ci-evals.yaml", "--from-stage", "plan", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        # The fixture named from the current folder, as git names paths.
        "ci-evals: error: fixture link fixtures/1-research-output/passwd -> /etc/passwd is "
        "absolute (links in fixtures must be relative and stay inside their fixture folder)"
    ]


def test_a_scenario_may_have_its_own_fixtures(tmp_path: Path) -> None:
    scenarios = (
        "scenarios:\n"
        "  - { id: acme, inputs: { company: A, product: B, lab: c }, fixtures: acme }\n"
        "  - { id: zeta, inputs: { company: Z, product: Z, lab: z } }\n"
    )
    suite = load_suite(write_suite(tmp_path, suite_text(scenarios=scenarios)), "ci-evals.yaml")
    acme, zeta = suite.scenarios
    assert (acme.fixtures, zeta.fixtures) == ("acme", None)
    assert suite.fixture_dir(2, acme) == tmp_path / "fixtures" / "acme" / "2-plan-output"
    assert suite.fixture_dir(2, zeta) == tmp_path / "fixtures" / "2-plan-output"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("acme/x", "bad scenario fixtures folder 'acme/x'"),
        ("..", "bad scenario fixtures folder '..'"),
        ("2-plan-output", "looks like a stage's fixture folder"),
    ],
)
def test_a_scenario_fixtures_folder_is_one_name_not_shaped_like_a_stage(
    tmp_path: Path, value: str, problem: str
) -> None:
    scenarios = f'scenarios:\n  - {{ id: acme, inputs: {{ company: A }}, fixtures: "{value}" }}\n'
    stages = 'stages:\n  - { name: a, prompt: "/demo:research {company}" }\n'
    message = load_error(tmp_path, suite_text(stages=stages, scenarios=scenarios))
    assert message.startswith("ci-evals.yaml:7:")
    assert "scenarios[0].fixtures" in message and problem in message


@pytest.mark.parametrize(
    ("where", "how", "shown"),
    [
        (".", (), "ci-evals.yaml"),  # found (an absolute path), named from here
        ("plugin", (), "../ci-evals.yaml"),  # found upwards
        ("plugin", ("--suite", "ABSOLUTE"), "../ci-evals.yaml"),
        (".", ("--suite", "./sub/../ci-evals.yaml"), "ci-evals.yaml"),
    ],
)
def test_the_suite_is_named_from_the_current_folder(
    tmp_path: Path, where: str, how: tuple[str, ...], shown: str
) -> None:
    """As the stage map is, and as git names paths: never the absolute path the
    search found, nor a path as typed when it says more than it needs to."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # the search stops at its top
    write_suite(tmp_path, suite_text().replace("version: 1", "version: 1\nbogus: 1"))
    args = tuple(str(tmp_path / "ci-evals.yaml") if a == "ABSOLUTE" else a for a in how)
    result = run_cli(*args, cwd=tmp_path / where)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"ci-evals: error: {shown}:2:1: bogus: unknown key"), (
        result.stderr
    )


def test_a_stub_script_is_named_from_the_current_folder(tmp_path: Path) -> None:
    write_suite(tmp_path, suite_text())
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "stub.yaml").write_text("rules:\n  - turns: []\n")
    result = run_cli(
        "--suite", "ci-evals.yaml", "--model", f"stub:{tmp_path / 'evals' / 'stub.yaml'}",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ci-evals: error: evals/stub.yaml:2:"), result.stderr


def test_a_scenario_may_ask_for_a_git_workspace(tmp_path: Path) -> None:
    scenarios = (
        "scenarios:\n  - { id: acme, git: true, inputs: { company: A, product: B, lab: c } }\n"
    )
    suite = load_suite(write_suite(tmp_path, suite_text(scenarios=scenarios)))
    assert [(s.id, s.git) for s in suite.scenarios] == [("acme", True)]
    assert load_suite(write_suite(tmp_path, suite_text())).scenarios[0].git is False
    wrong = scenarios.replace("git: true", 'git: "yes please"')
    message = load_error(tmp_path, suite_text(scenarios=wrong))
    assert message == "ci-evals.yaml:12:22: scenarios[0].git: expected a boolean, got a string"
