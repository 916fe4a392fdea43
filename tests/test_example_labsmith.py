"""The labsmith example stays a working, consistent example.

It is the README's main job, so these tests hold it to what the README claims:
the plugin follows Claude Code's conventions, the stage map covers it, the suite
and stub scripts load, the fixtures keep the stage-3 -> 4 contract, the stub's
scorecards parse against the plugin's rubrics, and `ci-evals run` on the stub
writes exactly the fixture files (slow: the real Claude Code CLI).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pathspec
import pytest
import yaml

from ci_evals.agents.registry import get_agent
from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.grading.reviewer import rubrics, scorecard
from ci_evals.main import main
from ci_evals.run.grading_hook import GradingHook
from ci_evals.run.runner import Runner, RunPlan
from ci_evals.selection.stage_map import load_stage_map
from ci_evals.suite.load import load_suite
from tests.conftest import EXAMPLE, PROJECT, git

PLUGIN = EXAMPLE.plugin
FIXTURES = EXAMPLE.fixtures
STUB = EXAMPLE.example / "stub"
_FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


def frontmatter(path: Path) -> dict[str, Any]:
    found = _FRONTMATTER.match(path.read_text(encoding="utf-8"))
    assert found, f"{path} has no YAML frontmatter"
    data = yaml.safe_load(found.group(1))
    assert isinstance(data, dict), path
    return data


def plugin_files() -> list[str]:
    return sorted(p.relative_to(PLUGIN).as_posix() for p in PLUGIN.rglob("*") if p.is_file())


# ------------------------------------------------------------------ the plugin


def test_manifest_names_the_plugin() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "labsmith"
    assert manifest["version"] and manifest["description"]


def test_commands_have_frontmatter_and_use_their_arguments() -> None:
    commands = sorted(p.stem for p in (PLUGIN / "commands").glob("*.md"))
    assert commands == [
        "generate-chapter",
        "plan-chapter",
        "plan-lab",
        "research-company",
        "research-product",
    ]
    for path in (PLUGIN / "commands").glob("*.md"):
        meta = frontmatter(path)
        assert {"description", "argument-hint", "allowed-tools"} <= meta.keys(), path
        assert "$ARGUMENTS" in path.read_text(), path


def test_agents_have_frontmatter_and_launch_only_existing_agents() -> None:
    names = {p.stem for p in [*PLUGIN.glob("agents/*.md"), *PLUGIN.glob("commands/*.md")]}
    for path in (PLUGIN / "agents").glob("*.md"):
        meta = frontmatter(path)
        assert meta["name"] == path.stem, path
        assert meta["description"] and meta["tools"] and meta["model"], path
    # Every `labsmith:<name>` a command or agent mentions is an agent, command or skill.
    for path in [*PLUGIN.glob("commands/*.md"), *PLUGIN.glob("agents/*.md")]:
        for named in re.findall(r"labsmith:([a-z-]+)", path.read_text()):
            assert named in names or (PLUGIN / "skills" / named).is_dir(), (path, named)


def test_skills_have_frontmatter_and_their_reference_files() -> None:
    skills = sorted(p.name for p in (PLUGIN / "skills").iterdir())
    assert len(skills) >= 2
    for name in skills:
        skill = PLUGIN / "skills" / name / "SKILL.md"
        meta = frontmatter(skill)
        assert meta["name"] == name and meta["description"], skill
        for referenced in re.findall(r"`([a-z-]+\.md)` \(next to this file\)", skill.read_text()):
            assert (skill.parent / referenced).is_file(), (skill, referenced)


def test_every_rubric_declares_its_kind_in_the_folder_it_lives_in() -> None:
    for kind in ("checklist", "analytic"):
        for stage in ("plan-lab", "generate-chapter"):
            files = list((PLUGIN / "references" / "evaluation" / kind / stage).glob("*.md"))
            assert files, (kind, stage)
            for path in files:
                assert frontmatter(path)["type"] == kind, path


# ------------------------------------------------------------------ the stage map and suite


def test_stage_map_covers_every_plugin_file_and_has_no_dead_entry() -> None:
    stage_map = load_stage_map(EXAMPLE.stage_map)
    assert stage_map.warnings == ()
    files = plugin_files()
    specs = {e.glob: pathspec.PathSpec.from_lines("gitignore", [e.glob]) for e in stage_map.entries}
    uncovered = [f for f in files if not any(s.match_file(f) for s in specs.values())]
    dead = [glob for glob, spec in specs.items() if not any(spec.match_file(f) for f in files)]
    assert uncovered == []
    assert dead == []


def test_check_coverage_command_passes_on_the_example(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the repository's top with no flags: the map is found where a user puts it."""
    monkeypatch.chdir(PROJECT)
    assert main(["check-coverage"]) == 0
    assert "examples/labsmith/plugin" in capsys.readouterr().out


def test_compute_stage_at_the_top_needs_no_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(PROJECT)
    assert main(["compute-stage", "HEAD", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["from_stage"], answer["reason"]) == (None, "base-equals-head")


def test_one_suite_one_map_one_fixtures_tree() -> None:
    """The reference layout: the example's suite, map and fixtures at the top, no copies."""
    tracked = git(PROJECT, "ls-files", "ci-evals.yaml", "stage_map.yaml", "examples").split()
    names = ("ci-evals.yaml", "stage_map.yaml")
    copies = [p for p in tracked if p.rsplit("/", 1)[-1] in names or "/fixtures/" in p]
    assert copies == list(names)  # nothing of them left in (or copied to) examples/
    stage_map = load_stage_map(EXAMPLE.stage_map)
    assert (stage_map.root, stage_map.fixtures) == ("examples/labsmith/plugin", "fixtures")
    suite = load_suite(EXAMPLE.suite)
    assert (suite.plugin.path, suite.fixtures) == (EXAMPLE.plugin, EXAMPLE.fixtures)
    assert suite.stage_map == EXAMPLE.stage_map


def test_shared_files_map_to_the_lowest_stage_that_uses_them() -> None:
    stage_map = load_stage_map(EXAMPLE.stage_map)
    stage_of = {e.glob: e.stage for e in stage_map.entries}
    assert stage_of[".claude-plugin/plugin.json"] == 1
    assert stage_of["skills/research-product/**"] == 2  # also used by stage 5
    assert stage_of["agents/rubric-scorer.md"] == 3  # both reviewers
    assert stage_of["references/evaluation/*/plan-lab/**"] == 3


def test_suite_loads_and_matches_the_stage_map() -> None:
    suite = load_suite(EXAMPLE.suite)
    stage_map = load_stage_map(EXAMPLE.stage_map)
    assert tuple(s.name for s in suite.stages) == stage_map.stages
    assert suite.plugin.name == "labsmith"
    assert [s.id for s in suite.scenarios] == ["acme-arm", "acme-arm-students"]
    for number, stage in enumerate(suite.stages[:4], start=1):
        assert (FIXTURES / f"{number}-{stage.name}-output").is_dir()


# ------------------------------------------------------------------ fixtures and stub content


def test_fixture_plan_keeps_the_contract_stage_4_reads() -> None:
    schema = json.loads((PLUGIN / "templates" / "plan.schema.json").read_text())
    for plan_path in [
        FIXTURES / "3-plan-lab-output" / "lab" / "plan.json",
        STUB / "files" / "acme-arm-students" / "lab" / "plan.json",
    ]:
        plan = json.loads(plan_path.read_text())
        jsonschema.validate(plan, schema, cls=jsonschema.Draft202012Validator)
        assert plan["chapter_count"] == len(plan["chapters"])
        table = (plan_path.parent / "lab.md").read_text()
        rows = re.findall(r"^\| (\d+) \| ([a-z0-9-]+) \|", table, re.MULTILINE)
        assert [(int(n), slug) for n, slug in rows] == [
            (c["number"], c["slug"]) for c in plan["chapters"]
        ]


def test_each_chapter_has_a_plan_and_a_generated_chapter_with_its_sections() -> None:
    plan = json.loads((FIXTURES / "3-plan-lab-output" / "lab" / "plan.json").read_text())
    for chapter in plan["chapters"]:
        name = f"{chapter['number']:02d}-{chapter['slug']}.md"
        first_line = f"# Chapter {chapter['number']}: {chapter['title']}"
        planned = (FIXTURES / "4-plan-chapter-output" / "lab" / "chapters" / name).read_text()
        written = (STUB / "files" / "acme-arm" / "lab" / "content" / name).read_text()
        assert planned.splitlines()[0] == first_line == written.splitlines()[0]
        steps = re.findall(r"^(\d+)\. \*\*", planned, re.MULTILINE)
        assert re.findall(r"^### (\d+)\. ", written, re.MULTILINE) == steps
        assert re.findall(r"^## .+$", written, re.MULTILINE) == [
            "## Before you start",
            "## Steps",
            "## Check your work",
            "## If something goes wrong",
            "## Clean up",
        ]


@pytest.mark.parametrize("script", ["labsmith.yaml", "broken-plan.yaml"])
def test_stub_scripts_load(script: str) -> None:
    assert load_script(STUB / script).rules


@pytest.mark.parametrize(
    ("script", "reviewer", "stage", "verdict"),
    [
        ("labsmith.yaml", "review-lab-plan", "plan-lab", True),
        ("labsmith.yaml", "review-generated", "generate-chapter", True),
        ("broken-plan.yaml", "review-lab-plan", "plan-lab", False),
    ],
)
def test_stub_scorecards_score_every_rubric(
    script: str, reviewer: str, stage: str, verdict: bool
) -> None:
    rubric_set = rubrics.discover(
        PLUGIN,
        [f"references/evaluation/checklist/{stage}", f"references/evaluation/analytic/{stage}"],
    )
    data = yaml.safe_load((STUB / script).read_text())
    rule = next(r for r in data["rules"] if r["name"] == reviewer)
    for turns in rule.get("variants", [rule.get("turns")]):  # every repeat's answer
        criteria = scorecard.parse_scorecard(turns[-1]["text"], rubric_set, require_all=True)
        checklist = [c.score for c in criteria if c.kind == "checklist"]
        analytic = [c.score for c in criteria if c.kind == "analytic"]
        assert len(criteria) == len(rubric_set)
        passed = all(s == 1 for s in checklist) and sum(analytic) / len(analytic) >= 3.0
        assert passed is verdict


# ------------------------------------------------------------------ end to end on the stub


def _run(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "ci_evals", "run", "--suite", str(EXAMPLE.suite)]
    argv += ["--model", f"stub:{STUB / 'labsmith.yaml'}", "--out", str(out), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    results["_out"] = out
    return results


def _produced(results: dict[str, Any], scenario: str) -> dict[str, bytes]:
    """Every file the scenario's stages wrote, by workspace path."""
    found: dict[str, bytes] = {}
    stages = next(s for s in results["scenarios"] if s["id"] == scenario)["stages"]
    for stage in stages:
        assert stage["status"] in {"completed", "passed"}, stage
        folder = results["_out"] / stage["produced_dir"]
        for path in folder.rglob("*"):
            if path.is_file():
                found[path.relative_to(folder).as_posix()] = path.read_bytes()
    return found


def _expected(*folders: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for folder in folders
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.mark.slow
def test_full_run_on_the_stub_reproduces_the_fixtures(tmp_path: Path) -> None:
    results = _run(tmp_path, "--scenario", "acme-arm")
    assert [s["number"] for s in results["scenarios"][0]["stages"]] == [1, 2, 3, 4, 5]
    expected = _expected(
        *sorted(FIXTURES.glob("[0-9]-*-output")),
        STUB / "files" / "acme-arm",
    )
    assert _produced(results, "acme-arm") == expected


@pytest.mark.slow
def test_the_second_scenarios_own_fixtures_are_what_its_stages_write(tmp_path: Path) -> None:
    results = _run(tmp_path, "--scenario", "acme-arm-students")
    own = FIXTURES / "acme-arm-students"
    produced = _produced(results, "acme-arm-students")
    stages_1_to_4 = {p: c for p, c in produced.items() if not p.startswith("lab/content/")}
    assert stages_1_to_4 == _expected(*sorted(own.iterdir()))
    # Its lab plan is its own (another audience); the rest equals the shared fixtures.
    plan = "3-plan-lab-output/lab/lab.md"
    assert (own / plan).read_bytes() != (FIXTURES / plan).read_bytes()


@pytest.mark.slow
def test_a_run_from_stage_4_lays_each_scenario_its_own_fixtures(tmp_path: Path) -> None:
    results = _run(tmp_path, "--from-stage", "4")
    out = results["_out"]
    titles = {
        scenario: (out / scenario / "4-plan-chapter" / "after" / "lab" / "lab.md")
        .read_text()
        .splitlines()[0]
        for scenario in ("acme-arm", "acme-arm-students")
    }
    assert titles == {
        "acme-arm": "# Program the Acme Arm in Python",
        "acme-arm-students": "# Your first industrial robot program: the Acme Arm in Python",
    }


@pytest.mark.slow
def test_run_from_stage_4_writes_chapter_plans_and_chapters(tmp_path: Path) -> None:
    results = _run(tmp_path, "--from-stage", "4", "--scenario", "acme-arm")
    assert [s["number"] for s in results["scenarios"][0]["stages"]] == [4, 5]
    expected = _expected(FIXTURES / "4-plan-chapter-output", STUB / "files" / "acme-arm")
    assert _produced(results, "acme-arm") == expected


def _graded(tmp_path: Path, script: str, from_stage: int) -> dict[int, Any]:
    """Run scenario acme-arm from `from_stage` on the stub, graded; stage number -> result."""
    suite = load_suite(EXAMPLE.suite)
    with StubServer(load_script(STUB / script)) as server:
        plan = RunPlan(
            suite=suite,
            from_stage=suite.stage(from_stage),
            scenarios=tuple(s for s in suite.scenarios if s.id == "acme-arm"),
            run_dir=tmp_path / "run",
            run_id="labsmith",
            model=None,
            environ=dict(os.environ),
            endpoint=server.cli_env(),
            jobs=1,
        )
        result = asyncio.run(Runner(plan, get_agent("claude"), after_stage=GradingHook()).run())
        assert [r for r in server.requests if r.rule is None] == []
    return {stage.number: stage for stage in result.scenarios[0].stages}


@pytest.mark.slow
def test_graded_run_from_stage_3_passes_with_both_reviewers(tmp_path: Path) -> None:
    stages = _graded(tmp_path, "labsmith.yaml", 3)
    assert {n: s.status for n, s in stages.items()} == {3: "passed", 4: "passed", 5: "passed"}
    reviewed = {c.id for n in (3, 5) for c in stages[n].grading.criteria if c.source == "reviewer"}
    assert {"chapter-count-consistent", "progression", "follows-plan", "clarity"} <= reviewed


@pytest.mark.slow
def test_broken_plan_fails_stage_3_on_the_check_and_the_reviewer(tmp_path: Path) -> None:
    stages = _graded(tmp_path, "broken-plan.yaml", 3)
    assert {n: s.status for n, s in stages.items()} == {3: "failed", 4: "skipped", 5: "skipped"}
    failed = {c.id for c in stages[3].grading.criteria if not c.passed}
    assert failed == {"plan-chapter-count", "chapter-count-consistent"}


def test_the_tour_s_example_suite_is_the_suite_the_quickstart_runs() -> None:
    """docs/tour.md's `ci-evals.yaml` block (once the README's) is an abridged copy of
    the real one: each of its lines is a line of ci-evals.yaml, in order, and it names
    every stage and scenario (it showed two stages, other inputs and another plugin folder)."""
    readme = (PROJECT / "docs" / "tour.md").read_text(encoding="utf-8")  # moved from the README
    block = next(b for b in readme.split("```yaml\n")[1:] if "\nstages:" in b.split("```")[0])
    shown = [line for line in block.split("```")[0].splitlines() if line[:1] not in ("", "#")]
    real = (PROJECT / "ci-evals.yaml").read_text(encoding="utf-8").splitlines()
    at = 0
    for line in shown:
        assert line in real[at:], f"README line not in ci-evals.yaml (in order): {line}"
        at = real.index(line, at) + 1
    suite = load_suite(PROJECT / "ci-evals.yaml")
    names = re.findall(r"^  - name: (\S+)$", "\n".join(shown), re.M)
    ids = re.findall(r"^  - id: (\S+)", "\n".join(shown), re.M)
    assert names == [stage.name for stage in suite.stages]
    assert ids == [scenario.id for scenario in suite.scenarios]
