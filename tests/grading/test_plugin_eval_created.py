"""The `files` target and `file_exists` of a case with a scaffold: the CLI's "created"
(a path the run's folder did not hold once the scaffold was done; not one it
modified, nor one the scaffold made), from the list the runner keeps beside the
stage (`scaffold-files.json`). Without that list no file list is trusted: the
grader is an error, never a pass. tests/suite/test_plugin_evals_context.py checks
the same against the bundled CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.config.yaml_source import loads
from ci_evals.grading.kinds.base import GradeContext
from ci_evals.grading.kinds.plugin_eval import SCAFFOLD_FILES, PluginEvalGrader, load_grader
from ci_evals.results.criteria import GraderResult

GRADERS = """\
- {type: file_exists, name: made-out, path: out.txt}
- {type: file_exists, name: seed-not-made, path: "**/seed.txt", exists: false}
- {type: regex, name: listed, target: files, pattern: "^out\\\\.txt\\n?$"}
"""


def _grader(*, scaffolded: bool) -> PluginEvalGrader:
    items = loads(GRADERS, "case.yaml").sequence()
    graders = tuple(load_grader(item, folder=Path()) for item in items)
    return PluginEvalGrader(graders, scaffolded=scaffolded)


@pytest.fixture
def stage(tmp_path: Path) -> tuple[Path, Path]:
    """A stage's saved state (the scaffold's seed.txt and mod.txt, the agent's out.txt)
    and its folder, with its trajectory."""
    folder = tmp_path / "after"
    (folder / "sub").mkdir(parents=True)
    for rel in ("sub/seed.txt", "mod.txt", "out.txt"):
        (folder / rel).write_text("x\n")
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    (stage_dir / "trajectory.jsonl").write_text("")
    return folder, stage_dir


def _grade(grader: PluginEvalGrader, stage: tuple[Path, Path]) -> GraderResult:
    folder, stage_dir = stage
    return grader.grade(GradeContext(folder, stage_dir / "trajectory.jsonl", out_dir=stage_dir))


def test_what_the_scaffold_left_is_not_created(stage: tuple[Path, Path]) -> None:
    (stage[1] / SCAFFOLD_FILES).write_text(json.dumps(["mod.txt", "sub/seed.txt"]))
    result = _grade(_grader(scaffolded=True), stage)
    assert result.error is None
    assert {c.id: c.passed for c in result.criteria} == {
        "made-out": True,
        "seed-not-made": True,
        "listed": True,
    }


def test_without_a_scaffold_every_file_is_created(stage: tuple[Path, Path]) -> None:
    result = _grade(_grader(scaffolded=False), stage)
    assert {c.id: c.passed for c in result.criteria} == {
        "made-out": True,
        "seed-not-made": False,
        "listed": False,
    }


@pytest.mark.parametrize("written", [None, "{}", '["ok", 1]', "not json"])
def test_no_trusted_record_of_the_scaffold_is_an_error(
    stage: tuple[Path, Path], written: str | None
) -> None:
    if written is not None:
        (stage[1] / SCAFFOLD_FILES).write_text(written)
    result = _grade(_grader(scaffolded=True), stage)
    assert result.error is not None and result.error.startswith("made-out: "), result.error
    assert result.criteria == ()
