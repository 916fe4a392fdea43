"""Reviewer graders on the real CLI and the stub model: each scripted answer's verdict.

One run holds one scenario per case (the stub's reviewer rule for each case
answers with that case's final message), so every verdict below comes from
the real pipeline: stage run, state saved, reviewer run on a copy, scorecard
parsed against the plugin's rubrics, policy applied, status set.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ci_evals.agents import Abort
from ci_evals.agents.registry import get_agent
from ci_evals.grade_state.pipeline import GradeJob, grade_state
from ci_evals.results.model import RunResult, read_results
from ci_evals.results.summary import exit_code
from ci_evals.suite.load import load_suite
from tests.grading.review_suite import make_review_suite, run_graded

GOOD = [
    {"criterion": "written", "score": 1, "rationale": "it is there"},
    {"criterion": "quality", "score": 4},
]
CASES = {
    "valid": json.dumps(GOOD),
    "fenced": "My review follows.\n\n```json\n" + json.dumps(GOOD, indent=2) + "\n```\n",
    "prose": "I read out1.md; it is short but fine. Scores: " + json.dumps(GOOD),
    "invalid": '[{"criterion": "written", "score": 1,}]',
    "empty": "[]",
    "missing": '[{"criterion": "written"}, {"criterion": "quality", "score": 4}]',
    "seven": '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 7}]',
    "analytic-one": '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 1}]',
    "unknown": '[{"criterion": "written", "score": 1}, {"criterion": "style", "score": 4}]',
}
# The valid case's reviewer also writes into its folder: that must reach nothing graded.
VALID_TURNS = (
    "      - tools: [{write: {path: reviewer-note.md, content: scribbles}}]\n"
    f"      - text: {json.dumps(CASES['valid'])}\n"
)


@pytest.fixture(scope="module")
def graded_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path]:
    root = tmp_path_factory.mktemp("review")
    suite, stub = make_review_suite(root / "suite", CASES, reviewer_turns={"valid": VALID_TURNS})
    result, server = run_graded(suite, stub, root / "run")
    assert server.unmatched() == []
    return result, root / "run"


def stages(result: RunResult, case: str) -> list[Any]:
    return next(s for s in result.scenarios if s.id == case).stages


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("valid", "passed", "checklist 2/2; analytic mean 4.00"),
        ("fenced", "passed", "analytic mean 4.00"),
        ("prose", "passed", "analytic mean 4.00"),
        ("invalid", "error", "reviewer: unusable scorecard: invalid JSON"),
        ("empty", "error", "the scorecard is an empty JSON array"),
        ("missing", "error", "item 0 ('written'): missing score"),
        ("seven", "error", "score 7 is outside the analytic scale 1-5"),
        ("analytic-one", "failed", "analytic mean 1.00 < 3 (low: quality)"),
        ("unknown", "error", "no rubric defines this criterion (known: quality, written)"),
    ],
)
def test_each_scripted_reviewer_answer_gives_its_verdict(
    graded_run: tuple[RunResult, Path], case: str, status: str, reason: str
) -> None:
    result, run_dir = graded_run
    s1, s2 = stages(result, case)
    assert s1.status == status
    assert s1.grading is not None and reason in s1.grading.reason
    # Anything but a pass stops the scenario: stage 2 needs stage 1's files.
    assert s2.status == ("completed" if status == "passed" else "skipped")
    # The raw message is kept in the run folder whatever it was.
    raw = run_dir / case / "1-s1" / "reviewer-output.txt"
    assert raw.read_text() == CASES[case]
    reviewer = next(g for g in s1.grading.graders if g.grader == "reviewer")
    assert reviewer.raw_output is not None
    assert reviewer.raw_output.path == f"{case}/1-s1/reviewer-output.txt"
    assert reviewer.raw_output.sha256 == hashlib.sha256(CASES[case].encode()).hexdigest()
    saved = json.loads((run_dir / case / "1-s1" / "scorecard.json").read_text())
    assert saved["raw"] == CASES[case]
    assert saved["result"]["error"] == reviewer.error
    assert exit_code(result) == 1  # some cases fail, so the run does


@pytest.mark.slow
def test_the_verdict_records_judge_rubric_hashes_and_criteria(
    graded_run: tuple[RunResult, Path],
) -> None:
    result, run_dir = graded_run
    s1 = stages(result, "valid")[0]
    assert s1.grading is not None
    assert read_results(run_dir).scenarios[0].stages[0].grading == s1.grading
    reviewer = next(g for g in s1.grading.graders if g.grader == "reviewer")
    assert reviewer.judge_model  # the model the reviewer's CLI was answered as
    plugin = run_dir.parent / "suite" / "plugin"
    hashes = {r.id: r.sha256 for r in reviewer.rubrics}
    assert hashes == {
        "quality": hashlib.sha256(
            (plugin / "references/evaluation/analytic/s1/quality.md").read_bytes()
        ).hexdigest(),
        "written": hashlib.sha256(
            (plugin / "references/evaluation/checklist/s1/written.md").read_bytes()
        ).hexdigest(),
    }
    kinds = {c.id: (c.kind, c.score, c.passed) for c in reviewer.criteria}
    assert kinds == {"written": ("checklist", 1.0, True), "quality": ("analytic", 4.0, True)}
    checks = next(g for g in s1.grading.graders if g.grader == "checks")
    assert [c.id for c in checks.criteria] == ["files:out1.md"]
    assert (run_dir / str(reviewer.trajectory)).stat().st_size > 0


@pytest.mark.slow
def test_the_reviewer_works_on_a_copy_that_reaches_nothing(
    graded_run: tuple[RunResult, Path],
) -> None:
    result, run_dir = graded_run
    s2 = stages(result, "valid")[1]
    # The reviewer wrote reviewer-note.md in its own folder (the stub's Write ran)...
    trajectory = (run_dir / "valid" / "1-s1" / "reviewer-trajectory.jsonl").read_text()
    assert "reviewer-note.md" in trajectory
    # ...which is neither in the saved state of stage 1 nor seen by stage 2.
    assert sorted(
        p.name for p in (run_dir / "valid" / "1-s1" / "after").iterdir() if not p.is_symlink()
    ) == ["out1.md"]
    assert [p.path for p in s2.produced] == ["out2.md"]
    assert not (run_dir / "valid" / "2-s2" / "after" / "reviewer-note.md").exists()
    # Stage 2's saved state shares stage 1's unchanged file instead of copying it.
    one, two = (run_dir / "valid" / f"{k}-s{k}" / "after" / "out1.md" for k in (1, 2))
    assert one.stat().st_ino == two.stat().st_ino


@pytest.mark.slow
def test_a_reviewer_that_times_out_is_an_error(tmp_path: Path) -> None:
    hang = "      - fault: {hang: forever}\n"
    suite, stub = make_review_suite(
        tmp_path / "suite",
        {"slow": ""},
        limits="{max_turns: 10, timeout_s: 12}",
        reviewer_turns={"slow": hang},
    )
    result, _ = run_graded(suite, stub, tmp_path / "run")
    s1, s2 = result.scenarios[0].stages
    assert (s1.status, s2.status) == ("error", "skipped")
    assert s1.error == "reviewer: the reviewer timed out after 12 s"
    assert exit_code(result) == 1


@pytest.mark.slow
def test_a_rubric_missing_when_the_reviewer_runs_is_an_error(tmp_path: Path) -> None:
    suite, stub = make_review_suite(tmp_path / "suite", {"valid": CASES["valid"]})
    analytic = tmp_path / "suite" / "plugin" / "references/evaluation/analytic/s1"

    result, server = run_graded(
        suite, stub, tmp_path / "run", before_run=lambda: shutil.rmtree(analytic)
    )
    s1 = result.scenarios[0].stages[0]
    assert s1.status == "error"
    assert s1.error is not None and "matches no markdown file" in s1.error
    # Nothing to grade against: the reviewer was not even asked.
    assert not any(r.rule == "review-valid" for r in server.requests)


@pytest.mark.slow
def test_a_reviewer_gets_at_most_what_is_left_of_the_run_budget(tmp_path: Path) -> None:
    costly = (
        f"      - text: {json.dumps(CASES['valid'])}\n"
        "        usage: {input_tokens: 100000, output_tokens: 10000}\n"
    )
    suite, stub = make_review_suite(
        tmp_path / "suite",
        {"valid": CASES["valid"]},
        reviewer_turns={"valid": costly},
        budget_usd=0.05,
    )

    result, _ = run_graded(suite, stub, tmp_path / "run")

    s1, s2 = result.scenarios[0].stages
    # Without a cap the reviewer would finish and pass the stage, over budget.
    assert (s1.status, s2.status) == ("error", "skipped")
    assert str(s1.error).startswith("reviewer: the reviewer hit its budget limit")
    assert (s1.cost_usd or 0) < 0.05 < result.total_cost_usd
    assert exit_code(result) == 1


def test_no_review_once_the_run_budget_is_spent_is_not_a_pass(tmp_path: Path) -> None:
    suite_file, _ = make_review_suite(tmp_path / "suite", {"valid": CASES["valid"]})
    suite = load_suite(suite_file)
    state = tmp_path / "state"
    (state / "plugin").mkdir(parents=True)
    (state / "out1.md").write_text("stage 1 output\n")  # the check alone would pass
    job = GradeJob(
        suite=suite,
        stage=suite.stages[0],
        scenario=suite.scenarios[0],
        state=state,
        trajectory=None,
        out_dir=tmp_path / "out",
        work_dir=tmp_path / "work",
        run_dir=tmp_path,
        env_for=lambda root: {"HOME": str(root)},
        budget_usd=0.0,
    )

    verdict = asyncio.run(grade_state(job, agent=get_agent("claude"), abort=Abort()))

    assert verdict.verdict == "error"
    reviewer = next(g for g in verdict.graders if g.grader == "reviewer")
    assert reviewer.error == "the run budget is spent: the reviewer was not run"
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_a_reviewer_whose_endpoint_fails_makes_its_stage_an_error(tmp_path: Path) -> None:
    # The model API answers every reviewer request 503: no verdict was reached, so
    # the stage is an error naming it, never a pass or a fail.
    down = "      - fault: {http_status: 503, times: 999, scope: server}\n"
    suite, stub = make_review_suite(tmp_path / "suite", {"down": ""}, reviewer_turns={"down": down})
    result, _ = run_graded(suite, stub, tmp_path / "run")
    s1, s2 = result.scenarios[0].stages
    assert (s1.status, s2.status) == ("error", "skipped"), s1.error
    assert s1.error is not None and s1.error.startswith("reviewer: ")
    assert "503" in s1.error
    assert exit_code(result) == 1
