"""`ci-evals check-fixtures` on the labsmith example: good fixtures pass, a change that
would fail good work is caught."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ci_evals.main import main
from tests.conftest import ExampleLayout, copy_example, git
from tests.test_untrusted_text import runner_commands


@pytest.fixture
def example(tmp_path: Path) -> ExampleLayout:
    example = copy_example(tmp_path / "labsmith")
    git(example.root, "init", "-q", "-b", "main")  # the stage map lives in a repo
    return example


def check(example: ExampleLayout, out: Path, *args: str) -> int:
    return main(["check-fixtures", "--suite", str(example.suite), "--out", str(out), *args])


@pytest.mark.slow
def test_the_curated_fixtures_pass_their_reviewers_and_checks(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stub = example.model()
    assert check(example, tmp_path / "out", "--model", stub) == 0

    out = capsys.readouterr().out
    assert "fixtures/3-plan-lab-output (stage 3 plan-lab): passed" in out
    assert "stage 5 (generate-chapter): graders but no fixture" in out
    report = json.loads((tmp_path / "out" / "check-fixtures.json").read_text())
    assert [(r["stage"], r["verdict"]) for r in report] == [
        (1, "passed"), (2, "passed"), (3, "passed"), (4, "passed"),
    ]  # fmt: skip
    plan_lab = report[2]
    graders = [g["grader"] for g in plan_lab["graders"]]
    # the contract: its `produces`; last, the advisory flag (the curated plan does not
    # address its reviewer)
    assert graders == ["checks", "contract", "reviewer", "addressed-to-graders"]
    assert plan_lab["graders"][3]["criteria"][0]["passed"] is True
    # A fixture has no trajectory: trajectory checks are left out, not failed.
    checks = [c["id"] for c in plan_lab["graders"][0]["criteria"]]
    assert not any(c.startswith("trajectory") for c in checks)
    assert len(plan_lab["graders"][1]["criteria"]) == 4  # files, headings; files, schema
    assert len(plan_lab["graders"][2]["criteria"]) == 6  # every rubric scored
    assert not (tmp_path / "out" / ".work").exists()


@pytest.mark.slow
def test_a_threshold_that_would_fail_good_work_is_caught(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = example.suite
    suite.write_text(
        suite.read_text().replace("analytic_mean_at_least: 3.0", "analytic_mean_at_least: 4.8")
    )
    stub = example.model()

    assert check(example, tmp_path / "out", "--model", stub, "--stage", "plan-lab") == 1
    out = capsys.readouterr().out
    assert "fixtures/3-plan-lab-output (stage 3 plan-lab): failed - analytic mean 4.50 < 4.8" in out
    assert "1 fixture(s) would fail: fixtures/3-plan-lab-output" in out


def _break_chapter_count(fixture: Path) -> None:
    """A plan the schema accepts (so the contract holds) but the stage's check does not."""
    plan = fixture / "3-plan-lab-output/lab/plan.json"
    plan.write_text(plan.read_text().replace('"chapter_count": 3', '"chapter_count": 4'))


def test_a_broken_fixture_fails_its_checks_without_a_model(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_chapter_count(example.fixtures)

    assert check(example, tmp_path / "out", "--no-reviewer") == 1
    out = capsys.readouterr().out
    assert "contracts: 28 item(s) hold on the fixtures" in out
    assert "fixtures/3-plan-lab-output (stage 3 plan-lab): failed" in out
    assert "fixtures/4-plan-chapter-output (stage 4 plan-chapter): passed" in out
    assert out.rstrip().endswith("1 fixture(s) would fail: fixtures/3-plan-lab-output")


def test_a_fixture_that_breaks_a_contract_fails_before_any_grader(
    example: ExampleLayout,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chapter = example.root / "fixtures/4-plan-chapter-output/lab/chapters/02-pick-and-place.md"
    chapter.write_text(chapter.read_text().replace("## Steps", "## Things to do"))

    # No --no-reviewer and no model: the contracts stop it before a model is needed.
    monkeypatch.chdir(example.root)  # paths are shown relative to the current folder
    assert main(["check-fixtures", "--suite", "ci-evals.yaml", "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out.splitlines()
    shown = "fixtures/4-plan-chapter-output/lab/chapters/02-pick-and-place.md: missing '## Steps'"
    assert [line.split(" -- ")[1] for line in out if line.startswith(shown)] == [
        "stage 4 (plan-chapter) produces[0].headings, ci-evals.yaml:67",
        "stage 5 (generate-chapter) consumes[0].headings (produced by stage 4 (plan-chapter)), "
        "ci-evals.yaml:72",
    ]
    assert out[-1].startswith("2 contract problem(s) in the fixtures")
    assert not (tmp_path / "out").exists()  # nothing graded, no report


def test_reviewers_need_a_model(
    example: ExampleLayout,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert check(example, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "set ANTHROPIC_API_KEY, or run offline with --model stub:PATH" in err


def test_a_scenario_with_its_own_fixtures_has_them_checked(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = example.fixtures / "acme-arm-students"  # the example's second scenario has its own
    _break_chapter_count(own)

    assert check(example, tmp_path / "shared", "--no-reviewer") == 0
    args = ("--no-reviewer", "--scenario", "acme-arm-students")
    assert check(example, tmp_path / "own", *args) == 1

    out = capsys.readouterr().out
    assert "fixtures/3-plan-lab-output (stage 3 plan-lab): passed" in out
    assert "fixtures/acme-arm-students/3-plan-lab-output (stage 3 plan-lab): failed" in out


def test_a_missing_fixture_is_said_for_the_stages_produces_too(
    example: ExampleLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without fixture 3, neither stage 3's produces nor stage 4's consumes can be
    checked: both are said, not counted as holding."""
    shutil.rmtree(example.fixtures / "3-plan-lab-output")
    suite = str(example.suite)
    assert main(["check-fixtures", "--suite", suite, "--contracts-only"]) == 0
    out = capsys.readouterr().out
    assert (
        "note: stage 3 (plan-lab): produces not checked: its fixture (or one before) is missing"
        in out
    )
    assert (
        "note: stage 4 (plan-chapter): consumes not checked: a fixture before it is missing" in out
    )


def test_the_seed_is_laid_down_and_checked(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = example.fixtures / "0-codebase"
    (seed / "notes").mkdir(parents=True)
    (seed / "notes" / "brief.md").write_text("what stage 1 starts from\n")

    assert check(example, tmp_path / "out", "--no-reviewer") == 0
    out = capsys.readouterr().out
    assert "fixtures/0-codebase (seed of stage 1): lays down, 1 file(s) and link(s)" in out
    assert "fixtures/3-plan-lab-output (stage 3 plan-lab): passed" in out

    # A seed a run would refuse, check-fixtures refuses too, naming the link.
    (seed / "escape").symlink_to("../../ci-evals.yaml")
    assert check(example, tmp_path / "bad", "--no-reviewer") == 2
    err = capsys.readouterr().err
    assert "fixture link" in err and "0-codebase/escape -> ../../ci-evals.yaml" in err
    assert "points outside" in err


def test_a_fixture_file_name_is_never_a_workflow_command(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pull request's fixture named to inject: its problem line is inert (text.inert)."""
    chapters = example.root / "fixtures/4-plan-chapter-output/lab/chapters"
    (chapters / "03-x\n::add-mask::secret ##[error]y.md").write_text("# no steps\n")
    assert check(example, tmp_path / "out") == 1
    out = capsys.readouterr().out
    assert "03-x\\n:\\x3aadd-mask:\\x3asecret \\x23\\x23[error]y.md" in out
    assert runner_commands(out) == []


def test_a_link_in_the_output_folder_is_removed_and_refused(
    example: ExampleLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # CI uploads --out, following links: one planted there (an unisolated grader
    # of an earlier step, anyone who wrote the folder) must not reach the upload.
    out = tmp_path / "out"
    out.mkdir()
    (out / "zz-environ").symlink_to("/proc/self/environ")

    assert check(example, out, "--no-reviewer") == 2
    err = capsys.readouterr().err
    assert "the check-fixtures folder" in err and "'zz-environ'" in err, err
    assert not os.path.lexists(out / "zz-environ")
    assert (out / "check-fixtures.json").is_file()
