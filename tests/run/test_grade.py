"""`ci-evals grade RUN_DIR`: re-grade a saved run; no agent stage runs, ever."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.main import main
from ci_evals.report.verify import problems
from ci_evals.results.model import read_results
from tests.grading.review_suite import make_review_suite, run_graded

GOOD = '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 4}]'


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("saved")
    suite, stub = make_review_suite(root / "suite", {"valid": GOOD})
    result, _ = run_graded(suite, stub, root / "run")
    assert [s.status for s in result.scenarios[0].stages] == ["passed", "completed"]
    return root


@pytest.fixture
def copy(saved_run: Path, tmp_path: Path) -> Path:
    """A private copy of the suite and the run (tests change the suite)."""
    shutil.copytree(saved_run, tmp_path / "w", symlinks=True)
    return tmp_path / "w"


@pytest.fixture
def stub(copy: Path, monkeypatch: pytest.MonkeyPatch) -> StubServer:
    """The stub, reachable as if it were the real API: any model call would land here."""
    server = StubServer(load_script(copy / "suite" / "stub.yaml"))
    server.start()
    for name, value in server.cli_env().items():
        monkeypatch.setenv(name, value)
    yield server  # type: ignore[misc]
    server.stop()


def grade(copy: Path, *args: str) -> tuple[int, Path]:
    output = copy / "regraded.json"
    code = main(
        ["grade", str(copy / "run"), "--suite", str(copy / "suite" / "ci-evals.yaml"),
         "--output", str(output), *args]
    )  # fmt: skip
    if output.exists():  # what grade writes, a report believes: it agrees with itself
        assert problems(read_results(output)) == []
    return code, output


def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model can be reached: no key, no token, no URL."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def set_threshold(copy: Path, value: float) -> None:
    suite = copy / "suite" / "ci-evals.yaml"
    text = suite.read_text()
    suite.write_text(
        text.replace("stages:\n", f"scoring: {{analytic_mean_at_least: {value}}}\nstages:\n", 1)
    )


@pytest.mark.slow
def test_a_higher_threshold_fails_the_saved_run_without_any_model_call(
    copy: Path, stub: StubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (copy / "run" / "results.json").read_bytes()
    set_threshold(copy, 4.5)

    code, output = grade(copy)

    assert code == 1
    regraded = read_results(output)
    s1, s2 = regraded.scenarios[0].stages
    assert (s1.status, s2.status) == ("failed", "completed")
    assert s1.error == "analytic mean 4.00 < 4.5 (low: quality)"
    assert s1.grading is not None
    reviewer = next(g for g in s1.grading.graders if g.grader == "reviewer")
    assert reviewer.reused is True
    assert stub.requests == []  # no stage, no reviewer: nothing asked the model
    assert (copy / "run" / "results.json").read_bytes() == before  # the run's record stands
    out = capsys.readouterr().out
    assert "valid stage 1 s1: passed -> failed (reviewer: reuse)" in out


@pytest.mark.slow
def test_the_same_policy_gives_the_same_verdict(copy: Path, stub: StubServer) -> None:
    code, output = grade(copy)

    assert code == 0
    saved = read_results(copy / "run").scenarios[0].stages[0]
    regraded = read_results(output).scenarios[0].stages[0]
    assert regraded.status == saved.status == "passed"
    assert regraded.grading is not None and saved.grading is not None
    assert regraded.grading.reason == saved.grading.reason
    assert stub.requests == []


@pytest.mark.slow
def test_a_changed_rubric_runs_the_reviewer_again_but_no_stage(
    copy: Path, stub: StubServer
) -> None:
    rubric = copy / "suite" / "plugin" / "references/evaluation/analytic/s1/quality.md"
    rubric.write_text(rubric.read_text() + "\nA new anchor for 3.\n")

    code, output = grade(copy)

    assert code == 0
    reviewer = next(
        g for g in read_results(output).scenarios[0].stages[0].grading.graders  # type: ignore[union-attr]
        if g.grader == "reviewer"
    )  # fmt: skip
    assert reviewer.reused is False
    rules = {r.rule for r in stub.requests if r.outcome == "turn"}
    assert rules == {"review-valid"}  # the reviewer ran; stages s1 and s2 did not
    # Its new output went to a folder of its own in the run folder.
    assert reviewer.raw_output is not None and reviewer.raw_output.path is not None
    assert reviewer.raw_output.path.startswith("regrade-")
    assert (copy / "run" / reviewer.raw_output.path).read_text() == GOOD


@pytest.mark.slow
def test_a_changed_rubric_offline_needs_a_model_or_reuse(
    copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    offline(monkeypatch)
    rubric = copy / "suite" / "plugin" / "references/evaluation/checklist/s1/written.md"
    rubric.write_text("# Written, stricter\n")

    code, _ = grade(copy)
    assert code == 2
    err = capsys.readouterr().err
    assert "has to run again (its agent file, prompt or rubrics changed)" in err
    # The hint names a flag `grade` has: following it works, offline.
    hint = err.rsplit("(", 1)[1]
    assert hint.startswith("--reviewer skip ")
    code, _ = grade(copy, *hint.split()[:2])
    assert code == 0

    code, output = grade(copy, "--reviewer", "reuse")
    assert code == 0
    reviewer = next(
        g for g in read_results(output).scenarios[0].stages[0].grading.graders  # type: ignore[union-attr]
        if g.grader == "reviewer"
    )  # fmt: skip
    assert "re-used a scorecard written against other rubrics or prompt" in reviewer.warnings


@pytest.mark.slow
def test_an_explicit_rerun_says_it_was_asked_for(
    copy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    offline(monkeypatch)

    code, _ = grade(copy, "--reviewer", "rerun")  # nothing changed since the run

    assert code == 2
    err = capsys.readouterr().err
    assert "has to run again (--reviewer rerun asks for it): it needs a model" in err
    assert "changed" not in err


@pytest.mark.slow
def test_a_new_check_and_no_reviewer(copy: Path, stub: StubServer) -> None:
    suite = copy / "suite" / "ci-evals.yaml"
    suite.write_text(
        suite.read_text().replace(
            "      - { files: out1.md, count: 1 }\n",
            "      - { files: out1.md, count: 1 }\n      - { files: missing.md }\n",
        )
    )
    code, output = grade(copy, "--reviewer", "skip")

    assert code == 1
    s1 = read_results(output).scenarios[0].stages[0]
    assert s1.status == "failed"
    assert s1.grading is not None
    assert [g.grader for g in s1.grading.graders] == ["checks"]
    assert "files:missing.md" in str(s1.error)
    assert stub.requests == []


def test_grade_refuses_a_folder_without_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["grade", str(tmp_path)]) == 2
    assert "results file not found" in capsys.readouterr().err


def test_grade_keeps_the_results_json_it_reads(copy: Path) -> None:
    code = main(["grade", str(copy / "run"), "--suite", str(copy / "suite" / "ci-evals.yaml"),
                 "--output", str(copy / "run" / "results.json")])  # fmt: skip
    assert code == 2
    assert json.loads((copy / "run" / "results.json").read_text())["run_id"] == "graded"


@pytest.mark.slow
def test_a_rerun_reviewer_the_stub_cannot_answer_makes_its_stage_an_error(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline(monkeypatch)
    script = copy / "suite" / "stub.yaml"
    text = script.read_text()
    start = text.index("  - name: review-valid")
    silent = copy / "silent.yaml"  # the stages' rules only: the reviewer matches none
    silent.write_text(text[:start] + text[text.index("  - name: s1\n") :])

    code, output = grade(copy, "--reviewer", "rerun", "--model", f"stub:{silent}")

    assert code == 1
    s1 = read_results(output).scenarios[0].stages[0]
    assert s1.status == "error"
    assert s1.endpoint_misses and {m.outcome for m in s1.endpoint_misses} == {"unmatched"}
    assert (s1.error or "").startswith("the stub model had no scripted answer")


@pytest.mark.slow
def test_a_re_run_reviewer_adds_what_its_endpoint_forwarded(copy: Path, stub: StubServer) -> None:
    # As if the run had been on the real API: its proxy forwarded 3 requests,
    # $0.50 of them beyond what the stages reported (the agent's own calls).
    saved = json.loads((copy / "run" / "results.json").read_text())
    cost = saved["total_cost_usd"] + 0.5
    saved["forwarded"] = {"requests": 3, "refused": 1, "cost_usd": cost}
    saved["total_cost_usd"] = cost
    (copy / "run" / "results.json").write_text(json.dumps(saved))
    rubric = copy / "suite" / "plugin" / "references/evaluation/analytic/s1/quality.md"
    rubric.write_text(rubric.read_text() + "\nA new anchor for 3.\n")

    code, output = grade(copy)

    assert code == 0
    regraded = read_results(output)
    asked = [r for r in stub.requests if r.path.startswith("/v1/messages")]
    assert asked, "the reviewer did not run again"
    assert regraded.forwarded is not None
    assert (regraded.forwarded.requests, regraded.forwarded.refused) == (3 + len(asked), 1)
    assert regraded.forwarded.cost_usd >= cost
    assert regraded.total_cost_usd == pytest.approx(regraded.forwarded.cost_usd)
