"""`report --fixtures`: a fixture a change touched is graded by check-fixtures (no model),
and the report — summary and PR comment — says so, failing when the fixture did not pass.

On the stub model stage k's answer *is* fixture k, so a run never grades a changed
fixture: before this, a broken fixture passed a fork's CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.results.model import write_results
from tests.conftest import ExampleLayout, copy_example, git
from tests.github.test_comment import FakeGitHub, github
from tests.github.test_fork_comment import a_fork_pr, ci_evals, post, pull_request_event, zipped
from tests.report.test_report import a_run, finished, passed_stage, saved, scenario

__all__ = ["github"]  # the stand-in GitHub server fixture


@pytest.fixture
def example(tmp_path: Path) -> ExampleLayout:
    example = copy_example(tmp_path / "labsmith")
    git(example.root, "init", "-q", "-b", "main")
    return example


def test_a_broken_fixture_fails_the_report_of_a_passing_run(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = example.fixtures / "3-plan-lab-output/lab/plan.json"
    plan.write_text(plan.read_text().replace('"chapter_count": 3', '"chapter_count": 4'))
    out = tmp_path / "fixtures"
    argv = ["check-fixtures", "--suite", str(example.suite), "--out", str(out)]
    assert main([*argv, "--stage", "3", "--no-reviewer"]) == 1
    capsys.readouterr()
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", passed_stage(1)))))
    markdown = tmp_path / "summary.md"

    code = main(
        [
            "report",
            str(run_dir),
            "--markdown",
            str(markdown),
            "--fixtures",
            str(out / "check-fixtures.json"),
        ]
    )

    assert code == 1
    text = markdown.read_text(encoding="utf-8")
    assert "### Changed fixtures (graded by `ci-evals check-fixtures`, no model)" in text
    assert "**failed**: 1 of 1 fixture(s) did not pass" in text
    assert "| 3 | fixtures/3-plan-lab-output | failed |" in text


def test_fixtures_that_pass_keep_a_passing_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "check-fixtures.json"
    report.write_text(
        json.dumps(
            [
                {
                    "stage": 1,
                    "fixture": "fixtures/1-a",
                    "verdict": "passed",
                    "reason": "checklist 2 of 2 passed",
                }
            ]
        )
    )
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", passed_stage(1)))))
    assert main(["report", str(run_dir), "--fixtures", str(report)]) == 0
    assert "| 1 | fixtures/1-a | passed |" in capsys.readouterr().out


def test_fixtures_that_were_not_graded_fail_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check-fixtures step died before writing its report: not a pass."""
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", passed_stage(1)))))
    assert main(["report", str(run_dir), "--fixtures", str(tmp_path / "none.json")]) == 1
    assert "**not graded**" in capsys.readouterr().out


# ------------------------------------------------------------------ the fork's comment


@pytest.mark.parametrize("form", ["folder", "zip"])
def test_the_fork_comment_says_how_the_changed_fixtures_fared(
    tmp_path: Path, github: FakeGitHub, form: str
) -> None:
    """`comment --pack --fixtures` carries the verdicts; the trusted job shows them."""
    report = tmp_path / "check-fixtures.json"
    report.write_text(
        json.dumps(
            [
                {
                    "stage": 3,
                    "fixture": "fixtures/3-plan-lab-output",
                    "verdict": "failed",
                    "reason": "chapter_count 4 != 3",
                    "extra": "kept out",
                }
            ]
        )
    )
    run_dir = tmp_path / "run"
    write_results(run_dir, a_run(scenario("acme", passed_stage(4))))
    out = tmp_path / "artifact"
    argv = ["comment", "--pack", str(run_dir), "--out", str(out), "--fixtures", str(report)]
    packing = ci_evals(tmp_path, argv, "pull_request", pull_request_event())
    assert packing.returncode == 0, packing.stderr
    assert json.loads((out / "fixtures.json").read_text())[0] == {
        "stage": 3,
        "fixture": "fixtures/3-plan-lab-output",
        "verdict": "failed",
        "reason": "chapter_count 4 != 3",
    }
    a_fork_pr(github)

    done = post(tmp_path, github, zipped(out) if form == "zip" else out)

    assert done.returncode == 0, done.stderr
    (comment,) = github.comments
    assert "### Changed fixtures (graded by `ci-evals check-fixtures`, no model)" in comment["body"]
    assert "**failed**: 1 of 1 fixture(s) did not pass" in comment["body"]


def test_a_fixture_report_that_is_missing_is_packed_as_not_graded(
    tmp_path: Path, github: FakeGitHub
) -> None:
    run_dir = tmp_path / "run"
    write_results(run_dir, a_run(scenario("acme", passed_stage(4))))
    out = tmp_path / "artifact"
    argv = ["comment", "--pack", str(run_dir), "--out", str(out), "--fixtures", "/nonexistent"]
    assert ci_evals(tmp_path, argv, "pull_request", pull_request_event()).returncode == 0
    a_fork_pr(github)
    assert post(tmp_path, github, out).returncode == 0
    (comment,) = github.comments
    assert "**not graded**" in comment["body"]
