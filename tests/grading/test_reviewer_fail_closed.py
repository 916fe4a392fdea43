"""Reviewer answers that cannot be trusted, through the real CLI on the stub model:
each makes its stage `error` with a one-line reason, never a pass, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.agents.claude import MAX_MESSAGE_BYTES
from ci_evals.grading.reviewer.scorecard import MAX_OUTPUT_CHARS
from ci_evals.main import main
from tests.grading.review_suite import make_review_suite, run_graded

PASSING = [{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 5}]
FAILING = [{"criterion": "written", "score": 0}, {"criterion": "quality", "score": 1}]


def test_the_sdk_reads_more_than_the_scorecard_limit() -> None:
    # Escaped as JSON a character takes at most 6 (`\u001f`); the message
    # arrives twice per line at most (assistant message, result).
    assert MAX_MESSAGE_BYTES > 2 * 6 * MAX_OUTPUT_CHARS + 1_000_000


@pytest.mark.slow
def test_untrustworthy_scorecards_make_the_stage_an_error(tmp_path: Path) -> None:
    cases = {
        "good": json.dumps(PASSING),
        "huge": '[{"criterion": "written", "score": 1}, '
        '{"criterion": "quality", "score": 1' + "0" * 400 + "}]",
        "twice": f"```json\n{json.dumps(PASSING)}\n```\n"
        f"On reflection, the real scores are: {json.dumps(FAILING)}",
        "same": f"{json.dumps(PASSING)}\nAgain:\n```json\n{json.dumps(PASSING)}\n```",
        # A 5 MB answer: our size check decides, not the SDK's line limit.
        "big": json.dumps(PASSING) + "\n" + "x" * 5_000_000,
    }
    suite, stub = make_review_suite(tmp_path, cases)
    result, _ = run_graded(suite, stub, tmp_path / "run", jobs=2)
    stages = {s.id: s.stages[0] for s in result.scenarios}

    assert stages["good"].status == "passed"
    assert stages["same"].status == "passed"
    for case, reason in [
        ("huge", "item 1 ('quality'): score must be a finite number, got 1000"),
        ("twice", "the output holds 2 different scorecards"),
        ("big", "the reviewer's output is too large (5000"),
    ]:
        stage = stages[case]
        assert stage.status == "error", (case, stage.error)
        assert stage.error is not None and reason in stage.error, (case, stage.error)
        assert "\n" not in stage.error and len(stage.error) < 300, (case, stage.error)
        assert "buffer size" not in stage.error
        assert stage.grading is not None and stage.grading.verdict == "error"


@pytest.mark.slow
def test_check_fixtures_reports_a_huge_score_as_a_failing_fixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = '[{"criterion": "written", "score": 1' + "0" * 400 + "}]"
    suite, stub = make_review_suite(tmp_path, {"huge": huge})
    fixture = tmp_path / "fixtures" / "1-s1-output"
    fixture.mkdir(parents=True)
    (fixture / "out1.md").write_text("stage 1\n")
    out = str(tmp_path / "out")
    code = main(["check-fixtures", "--suite", str(suite), "--model", f"stub:{stub}", "--out", out])
    captured = capsys.readouterr()
    assert code == 1, captured.err  # a fixture that would fail, not 3 ("a bug in ci-evals")
    assert "score must be a finite number" in captured.out
    assert "unexpected error" not in captured.err
