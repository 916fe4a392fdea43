"""`ci-evals check`: run's own checks, every problem listed, nothing started (issue 10),
on the feature-dev test plugin (tests/data/onboarding/), through the real command line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import git
from tests.onboarding_helpers import copy_feature_dev, write

SUITE = """\
version: 1
plugin: plugin
stages:
  - name: explore
    prompt: "/feature-dev:feature-dev {feature}"
  - name: architect
    prompt: "/feature-dev:feature-dev {feature}"
    reviewer:
      agent: agents/code-reviewer.md
      rubrics: [rubrics]
      prompt: "Read {plugin}/agents/code-reviewer.md. Output format: json"
scenarios:
  - { id: flag, inputs: { feature: "Add a --json flag" } }
  - { id: retry, inputs: { feature: "Retry failed uploads" } }
"""
MAP = """\
version: 1
root: plugin
stages: [explore, architect]
entries:
  - { glob: "**", stage: explore }
"""
STUB = """\
rules:
  - match: {command: "feature-dev:feature-dev"}
    turns: [{text: done}]
"""


def project(top: Path) -> Path:
    git(top, "init", "-q", "-b", "main")  # a stage map lives in a repository
    plugin = copy_feature_dev(top)
    write(plugin / "rubrics" / "checklist" / "clear-plan.md", "The plan is clear.\n")
    write(top / "stage_map.yaml", MAP)
    write(top / "stub.yaml", STUB)
    return write(top / "ci-evals.yaml", SUITE)


def check(top: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "check", *args],
        cwd=top,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_good_suite_passes_and_nothing_is_started(tmp_path: Path) -> None:
    project(tmp_path)

    def files() -> list[Path]:  # git's own folder aside (the stage map's cache is kept there)
        return sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if ".git" not in p.parts)

    before = files()
    proc = check(tmp_path, "--model", "stub:stub.yaml", "--isolation", "none")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "ci-evals check: OK: ci-evals.yaml: 2 stages, 2 scenarios, stage map stage_map.yaml, "
        "model stub:stub.yaml, from stage 1 (explore)"
    )
    assert files() == before  # no run folder, no workspace


def test_every_problem_is_listed(tmp_path: Path) -> None:
    suite = project(tmp_path)
    text = suite.read_text()
    text = text.replace(
        'prompt: "/feature-dev:feature-dev {feature}"\n  - name: architect',
        'prompt: "/feature-dev:featuredev {feature}"\n  - name: architect',
    )
    text = text.replace("agents/code-reviewer.md\n", "agents/reviewer.md\n", 1)
    text = text.replace("rubrics: [rubrics]", "rubrics: [rubric]")
    suite.write_text(text)
    write(tmp_path / "stub.yaml", "rules:\n  - match: {commnd: x}\n    turns: [{text: hi}]\n")
    proc = check(tmp_path, "--model", "stub:stub.yaml", "--from-stage", "2", "--isolation", "none")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    expected = [
        "ci-evals.yaml:5:13: stages[0].prompt: /feature-dev:featuredev: the plugin has no command",
        "ci-evals.yaml:9:14: stages[1].reviewer.agent: the plugin has no agent file "
        "'agents/reviewer.md'",
        "ci-evals.yaml:10:16: stages[1].reviewer.rubrics: rubric pattern 'rubric' matches no",
        "fixture folder",  # stage 1's fixtures, for each of the two scenarios
        "stub.yaml:2:13: rules[0].match.commnd: unknown key 'commnd'",
    ]
    for part in expected:
        assert any(part in line for line in lines), (part, lines)
    # Both scenarios start from the suite's fixtures: the one missing folder, once.
    assert sum("missing fixture folder for stage 1 (explore)" in line for line in lines) == 1
    assert lines[-1] == "ci-evals check: 5 problems; nothing was started", lines
    problems = [line for line in lines if not line.startswith("ci-evals: warning:")]
    assert all(line.startswith("ci-evals check: ") for line in problems), lines
    numbers = [int(m.group(1)) for m in map(re.compile(r"ci-evals.yaml:(\d+):").search, lines) if m]
    assert numbers == [5, 9, 10]  # in line order


def test_a_suite_that_cannot_load_still_has_its_stub_script_checked(tmp_path: Path) -> None:
    suite = project(tmp_path)
    suite.write_text(suite.read_text().replace("version: 1\n", "version: 1\nbudget: 5\n"))
    write(tmp_path / "stub.yaml", "rules: [\n")
    proc = check(tmp_path, "--model", "stub:stub.yaml")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert any("ci-evals.yaml:2:1: budget: unknown key" in line for line in lines), lines
    assert any(line.startswith("ci-evals check: stub.yaml:") for line in lines), lines
    assert lines[-1] == "ci-evals check: 2 problems; nothing was started"


def test_the_stage_map_is_cross_checked(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path / "stage_map.yaml", MAP.replace("[explore, architect]", "[explore, design]"))
    proc = check(tmp_path, "--model", "stub:stub.yaml", "--isolation", "none")
    assert proc.returncode == 2
    assert "the stages differ from the stage map" in proc.stderr


def test_the_real_api_needs_a_key(tmp_path: Path) -> None:
    project(tmp_path)
    env_less = subprocess.run(
        [sys.executable, "-m", "ci_evals", "check", "--isolation", "none"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert env_less.returncode == 2
    assert "ANTHROPIC_API_KEY" in env_less.stderr
