"""Rubrics kept next to the suite (`suite:PATH`), outside a plugin you do not own
(issue 10, item 5): loaded and checked, mapped by the stage map, copied read-only
into the reviewer's copy, hashed alike there and in the repository (so `grade`
re-uses a scorecard until one changes). On a copy of feature-dev, the real CLI on
the stub model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.config.templates import parse_template
from ci_evals.errors import UserError
from ci_evals.grading.reviewer.review import fingerprint, reviewer_note
from ci_evals.suite.load import load_suite
from tests.conftest import git
from tests.onboarding_helpers import cli, copy_feature_dev, write

SUITE = """\
version: 1
plugin: plugin
stages:
  - name: architect
    prompt: "/feature-dev:feature-dev {feature}"
    reviewer:
      agent: agents/code-reviewer.md
      rubrics: [suite:rubrics/architect]
      prompt: >-
        Read {plugin}/agents/code-reviewer.md for your instructions, then score
        design.md against every rubric under {rubrics}. Output format: json
scenarios:
  - { id: flag, inputs: { feature: "Add a --json flag" } }
"""
MAP = """\
version: 1
root: plugin
stages: [architect]
entries:
  - { glob: "**", stage: architect }
global: [ci-evals.yaml, rubrics]
"""
RUBRIC = "rubrics/architect/checklist/has-blueprint.md"
# The reviewer reads its rubric, tries to change it, then scores.
STUB = """\
rules:
  - name: architect
    match: {command: "feature-dev:feature-dev"}
    turns:
      - tools: [{write: {path: design.md, content: "# Design for {args}\\n"}}]
      - text: "Designed."
  - name: reviewer
    match: {prompt_contains: "agents/code-reviewer.md"}
    turns:
      - tools: [{bash: "cat ../rubrics/RUBRIC; echo tampered >> ../rubrics/RUBRIC; echo rc=$?"}]
      - text: '[{"criterion": "has-blueprint", "score": 1}, {"criterion": "clarity", "score": 4}]'
""".replace("RUBRIC", RUBRIC)

NOTE = reviewer_note(0)  # nothing of these states is renamed


def project(top: Path) -> Path:
    git(top, "init", "-q", "-b", "main")
    copy_feature_dev(top)
    write(top / RUBRIC, "The design names every file it changes.\n")
    write(top / "rubrics/architect/analytic/clarity.md", "How clear is the design? 1-5\n")
    write(top / "stage_map.yaml", MAP)
    write(top / "stub.yaml", STUB)
    suite = write(top / "ci-evals.yaml", SUITE)
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "feature-dev, evaluated from outside")
    return suite


def test_suite_rubrics_load_with_their_kinds(tmp_path: Path) -> None:
    suite = load_suite(project(tmp_path))
    config = suite.stages[0].grading.reviewer
    assert config is not None
    rubrics = config.rubric_set(suite.plugin.path, suite.root)
    assert {(r.id, r.kind, r.origin) for r in rubrics.values()} == {
        ("has-blueprint", "checklist", "suite"),
        ("clarity", "analytic", "suite"),
    }


def test_a_missing_suite_rubric_folder_is_one_line(tmp_path: Path) -> None:
    suite = project(tmp_path)
    suite.write_text(suite.read_text().replace("suite:rubrics/architect", "suite:rubrics/arch"))
    with pytest.raises(UserError) as info:
        load_suite(suite, display="ci-evals.yaml")
    assert str(info.value).startswith(
        "ci-evals.yaml:8:16: stages[0].reviewer.rubrics: rubric pattern 'suite:rubrics/arch' "
        "matches no markdown file"
    )


def test_a_suite_rubric_that_links_into_proc_is_refused_at_load(tmp_path: Path) -> None:
    """Read at load and copied for the reviewer, a link to `/proc/self/environ` would
    hand ci-evals' own environment (its API key) to the reviewer agent."""
    suite = project(tmp_path)
    leak = tmp_path / "rubrics/architect/checklist/leak.md"
    leak.symlink_to("/proc/self/environ")
    with pytest.raises(UserError) as info:
        load_suite(suite, display="ci-evals.yaml")
    text = str(info.value)
    assert text.startswith("ci-evals.yaml:8:16: stages[0].reviewer.rubrics: "), text
    assert f"rubric {leak} is a link into /proc (/proc/" in text, text
    assert "\n" not in text


def compute_stage(repo: Path) -> subprocess.CompletedProcess[str]:
    """`ci-evals compute-stage main` in `repo`, as CI runs it."""
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "compute-stage", "main"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_stage_map_must_reach_them_and_compute_stage_sees_a_change(tmp_path: Path) -> None:
    suite = project(tmp_path)
    (tmp_path / "stage_map.yaml").write_text(MAP.replace(", rubrics]", "]"))
    with pytest.raises(UserError) as info:
        load_suite(suite, display="ci-evals.yaml")
    text = str(info.value)
    assert (
        "the rubric rubrics/architect/analytic/clarity.md is in no stage of the stage map" in text
    )
    assert "add 'rubrics/architect/analytic' to its global:" in text
    (tmp_path / "stage_map.yaml").write_text(MAP)
    git(tmp_path, "checkout", "-q", "-b", "change")
    write(tmp_path / RUBRIC, "The design names every file it changes, and why.\n")
    git(tmp_path, "commit", "-q", "-am", "a stricter rubric")
    proc = compute_stage(tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "1\n"), proc.stderr
    assert "global-file" in proc.stderr and RUBRIC in proc.stderr


def test_a_map_that_does_not_reach_the_suite_is_refused_then_a_change_runs_all(
    tmp_path: Path,
) -> None:
    """The suite's prompts decide every stage: a map whose `global:` leaves it out
    (here: outside root) would answer `none` to a prompt change — fail open."""
    suite = project(tmp_path)
    (tmp_path / "stage_map.yaml").write_text(MAP.replace("[ci-evals.yaml, rubrics]", "[rubrics]"))
    with pytest.raises(UserError) as info:
        load_suite(suite, display="ci-evals.yaml")
    text = str(info.value)
    assert "the suite ci-evals.yaml is in no stage of the stage map" in text
    assert "add '/ci-evals.yaml' to the map's global:" in text
    (tmp_path / "stage_map.yaml").write_text(
        MAP.replace("[ci-evals.yaml, rubrics]", "[/ci-evals.yaml, rubrics]")
    )
    load_suite(suite, display="ci-evals.yaml")  # the hint's glob is enough
    git(tmp_path, "commit", "-q", "-am", "the suite in global")
    git(tmp_path, "checkout", "-q", "-b", "prompt")
    suite.write_text(suite.read_text().replace("Add a --json flag", "Add a --yaml flag"))
    git(tmp_path, "commit", "-q", "-am", "another scenario input")
    proc = compute_stage(tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "1\n"), proc.stderr


def test_the_fingerprint_of_a_copy_equals_the_repository_s(tmp_path: Path) -> None:
    suite = load_suite(project(tmp_path))
    config, prompt = suite.stages[0].grading.reviewer, suite.stages[0].reviewer_prompt
    assert config is not None and prompt is not None
    here = fingerprint(config, suite.plugin.path, prompt, suite.root, note=NOTE)
    copy = tmp_path / "copy"
    shutil.copytree(suite.plugin.path, copy / "plugin")
    shutil.copytree(tmp_path / "rubrics", copy / "rubrics" / "rubrics")
    assert fingerprint(config, copy / "plugin", prompt, copy / "rubrics", note=NOTE) == here
    (copy / "rubrics" / RUBRIC).write_text("changed\n")
    assert fingerprint(config, copy / "plugin", prompt, copy / "rubrics", note=NOTE) != here
    other = parse_template(prompt.text + " ")
    assert fingerprint(config, suite.plugin.path, other, suite.root, note=NOTE) != here


@pytest.mark.slow
def test_the_reviewer_reads_a_read_only_copy_and_grade_reuses_its_scorecard(
    tmp_path: Path,
) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    project(top)
    out = tmp_path / "run"
    ran = cli(top, "run", "--model", "stub:stub.yaml", "--out", str(out))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = json.loads((out / "results.json").read_text())
    stage = results["scenarios"][0]["stages"][0]
    assert stage["status"] == "passed", stage
    reviewer = next(g for g in stage["grading"]["graders"] if g["grader"] == "reviewer")
    assert sorted(r["path"] for r in reviewer["rubrics"]) == [
        "suite/rubrics/architect/analytic/clarity.md",
        f"suite/{RUBRIC}",
    ]
    trajectory = (out / "flag" / "1-architect" / "reviewer-trajectory.jsonl").read_text()
    assert "The design names every file it changes." in trajectory  # it read its copy
    # ... and could not change it: a read-only mount (root can write a 0444 file).
    assert results["isolated"] is True, "needs bubblewrap (apt-get install bubblewrap)"
    assert "rc=0" not in trajectory
    assert (top / RUBRIC).read_text() == "The design names every file it changes.\n"
    suite = load_suite(top / "ci-evals.yaml")
    config, prompt = suite.stages[0].grading.reviewer, suite.stages[0].reviewer_prompt
    assert config is not None and prompt is not None
    assert reviewer["fingerprint"] == fingerprint(
        config, suite.plugin.path, prompt, suite.root, note=NOTE
    )

    again = cli(top, "grade", str(out), "--output", str(tmp_path / "regraded.json"))
    assert again.returncode == 0, again.stdout + again.stderr
    regraded = json.loads((tmp_path / "regraded.json").read_text())
    graders = regraded["scenarios"][0]["stages"][0]["grading"]["graders"]
    assert next(g for g in graders if g["grader"] == "reviewer")["reused"] is True

    write(top / RUBRIC, "The design names every file it changes, and why.\n")
    changed = cli(top, "grade", str(out), "--output", str(tmp_path / "changed.json"))
    assert changed.returncode != 0  # a changed rubric: the reviewer must run again
    assert "--model" in changed.stderr or "model" in changed.stderr, changed.stderr
