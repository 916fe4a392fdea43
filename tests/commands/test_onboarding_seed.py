"""Issue 10 items 2 and 3 on a real public plugin's layout (feature-dev, as
`ci-evals init` drafts it), with the real CLI on the stub: stage 1 reads the
codebase its seed lays down, and a subagent the script does not answer (the
explorer) makes its stage an error, not a failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git
from tests.onboarding_helpers import cli, copy_feature_dev

STAGES = "explore,architect,implement"
EXPLORER = """  - name: "code-explorer"
    match: {agent: "feature-dev:code-explorer"}
    turns:
      - text: "Placeholder findings of code-explorer (stub)."
"""


def drafted(tmp_path: Path) -> Path:
    """feature-dev in a repository, drafted by `ci-evals init`, with a codebase to
    explore as the stage-1 seed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    copy_feature_dev(repo)
    assert cli(repo, "init", "plugin", "--stages", STAGES).returncode == 0
    seed = repo / "fixtures" / "0-codebase" / "src"
    seed.mkdir(parents=True)
    (seed / "app.py").write_text("def greet():\n    return 'hello'\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "drafted, with a seed")
    return repo


def results(out: Path) -> list[dict[str, object]]:
    return json.loads((out / "results.json").read_text())["scenarios"][0]["stages"]  # type: ignore[no-any-return]


@pytest.mark.slow
def test_stage_one_explores_the_seed(tmp_path: Path) -> None:
    repo = drafted(tmp_path)
    script = repo / "stub" / "feature-dev.yaml"
    done = '      - text: "Stage explore done (stub)."\n'
    text = script.read_text()
    assert done in text
    # Stage 1 reads the codebase (its own turn: the write before it makes outputs/).
    looks = "      - tools: [{bash: 'cat src/app.py > outputs/explored.md'}]\n"
    script.write_text(text.replace(done, looks + done))
    assert cli(repo, "check", "--model", "stub:stub/feature-dev.yaml").returncode == 0

    out = tmp_path / "out"
    ran = cli(repo, "run", "--model", "stub:stub/feature-dev.yaml", "--out", str(out))

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [s["status"] for s in results(out)] == ["passed", "passed", "passed"]
    explored = out / "example" / "1-explore" / "produced" / "outputs" / "explored.md"
    assert explored.read_text() == "def greet():\n    return 'hello'\n"
    # A change to the seed runs everything again: compute-stage agrees with run.
    (repo / "fixtures" / "0-codebase" / "src" / "app.py").write_text("changed\n")
    git(repo, "commit", "-q", "-am", "the codebase changed")
    assert cli(repo, "compute-stage", "HEAD~1").stdout == "1\n"


@pytest.mark.slow
def test_a_subagent_the_script_does_not_answer_is_an_error(tmp_path: Path) -> None:
    repo = drafted(tmp_path)
    script = repo / "stub" / "feature-dev.yaml"
    script.write_text(script.read_text().replace(EXPLORER, ""))  # the explorer: no rule

    out = tmp_path / "out"
    ran = cli(repo, "run", "--model", "stub:stub/feature-dev.yaml", "--out", str(out))

    assert ran.returncode == 1
    explore, architect, _ = results(out)
    assert explore["status"] == "error"  # not "failed": the wiring is broken
    (miss,) = explore["endpoint_misses"]  # type: ignore[misc]
    assert miss["outcome"] == "unmatched" and miss["subagent"] is True
    assert "ERROR:stub" in ran.stdout
    assert "example stage 1 explore: stub: no rule matched this request" in ran.stdout
    assert architect["status"] == "skipped"
    report = cli(repo, "report", str(out))
    assert "**Stub script mismatch:** 1 request(s) in 1 stage(s)" in report.stdout
