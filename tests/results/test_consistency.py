"""A report that cannot be fooled: an edited `results.json` is never reported as a pass.

Each test writes a consistent results file with the real models, edits its
JSON as an attacker would (the agent under test can write where the artifact
lies), and runs the real `ci-evals report` on it: the exit code, the Markdown
headline and the JUnit XML must all say the same thing, and never "passed".
The slow test does the same to the results of a real run on the stub model.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ci_evals.main import main
from ci_evals.report.verify import problems
from ci_evals.results.model import (
    Forwarded,
    RunResult,
    ScenarioResult,
    read_results,
    write_results,
)
from tests.report.test_report import (
    a_run,
    criterion,
    failed_stage,
    passed_stage,
    real_run,
    scenario,
    stage,
    verdict,
)

Data = dict[str, Any]


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def failing_run() -> RunResult:
    """Two scenarios; acme fails stage 2 (stage 3 skipped), globex passes everything."""
    skipped = "stage 2 (s2) ended with failed"
    return a_run(
        scenario("acme", passed_stage(1), failed_stage(2), stage(3, "skipped", error=skipped)),
        scenario("globex", passed_stage(1), passed_stage(2), passed_stage(3)),
    )


def passing_run() -> RunResult:
    return a_run(scenario("acme", passed_stage(1), passed_stage(2)))


def save(tmp_path: Path, result: RunResult) -> tuple[Path, Data]:
    run_dir = tmp_path / "run"
    write_results(run_dir, result)
    return run_dir, json.loads((run_dir / "results.json").read_text(encoding="utf-8"))


def rewrite(run_dir: Path, data: Data) -> None:
    (run_dir / "results.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


class Report:
    """What `ci-evals report` said about a run folder: exit code, headline, JUnit."""

    def __init__(self, tmp_path: Path, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        junit, markdown = tmp_path / "out" / "junit.xml", tmp_path / "out" / "summary.md"
        capsys.readouterr()
        self.code = main(
            ["report", str(run_dir), "--junit", str(junit), "--markdown", str(markdown)]
        )
        self.stderr = capsys.readouterr().err
        self.markdown = markdown.read_text(encoding="utf-8")
        self.headline = self.markdown.splitlines()[0]
        self.junit = ET.fromstring(junit.read_bytes())

    @property
    def junit_bad(self) -> int:
        return int(self.junit.attrib["failures"]) + int(self.junit.attrib["errors"])

    def inconsistency(self) -> str:
        """The problems the JUnit error case lists (asserting it is there)."""
        error = self.junit.find("./testsuite[@name='ci-evals.results']/testcase/error")
        assert error is not None, ET.tostring(self.junit, encoding="unicode")
        return error.text or ""


def assert_inconsistent(report: Report, *expected: str) -> None:
    """Exit 2, headline `error`, a JUnit `<error>` listing the problems — never a pass."""
    assert report.code == 2, report.markdown
    assert report.headline == "## ci-evals: error"
    assert "### Results file inconsistent" in report.markdown
    listed = report.inconsistency()
    for text in expected:
        assert text in listed, listed
    assert "the results file is inconsistent" in report.stderr


def test_the_untouched_files_agree_with_themselves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert problems(failing_run()) == [] and problems(passing_run()) == []
    run_dir, _ = save(tmp_path, failing_run())
    report = Report(tmp_path, run_dir, capsys)
    assert (report.code, report.headline, report.junit_bad) == (1, "## ci-evals: failed", 1)
    run_dir, _ = save(tmp_path / "p", passing_run())
    report = Report(tmp_path / "p", run_dir, capsys)
    assert (report.code, report.headline, report.junit_bad) == (0, "## ci-evals: passed", 0)


def _stage(data: Data, scenario: int, index: int) -> Data:
    return data["scenarios"][scenario]["stages"][index]  # type: ignore[no-any-return]


def _summary(data: Data, scenario: str, number: int) -> Data:
    return next(
        s["summary"] for s in data["summaries"] if (s["scenario"], s["stage"]) == (scenario, number)
    )


def flip_status(data: Data) -> None:
    _stage(data, 0, 1)["status"] = "passed"


def flip_summaries(data: Data) -> None:
    for item in data["summaries"]:
        s = item["summary"]
        s.update(verdict="passed", passed=s["runs"], failed=0, errors=0, pass_rate=1.0)
        s["verdicts"] = ["passed"] * s["runs"]


def flip_status_and_summaries(data: Data) -> None:
    flip_status(data)
    flip_summaries(data)


def flip_verdict_too(data: Data) -> None:
    """Stage, verdict and summaries all say passed; the criteria still say b failed."""
    flip_status_and_summaries(data)
    _stage(data, 0, 1)["grading"]["verdict"] = "passed"
    _stage(data, 0, 1)["error"] = None


def edit_criteria(data: Data) -> None:
    """The failed criterion marked passed (its score still 0), everything else passed too."""
    flip_verdict_too(data)
    grading = _stage(data, 0, 1)["grading"]
    for c in grading["graders"][0]["criteria"]:
        c["passed"] = True
    grading["checklist_all_passed"] = True


def edit_scores(data: Data) -> None:
    """Scores and `passed` edited, but not the verdict's numbers computed from them."""
    edit_criteria(data)
    for c in _stage(data, 0, 1)["grading"]["graders"][0]["criteria"]:
        c["score"] = 1.0


def everything_passed(data: Data) -> None:
    """Every stage and every summary set to passed."""
    for sc in data["scenarios"]:
        for st in sc["stages"]:
            st["status"] = "passed"
            st["error"] = None
            if st["grading"] is not None:
                st["grading"]["verdict"] = "passed"
    flip_summaries(data)


def remove_failed_stage(data: Data) -> None:
    del data["scenarios"][0]["stages"][1]
    data["summaries"] = [s for s in data["summaries"] if (s["scenario"], s["stage"]) != ("acme", 2)]


def remove_stages_after_the_pass(data: Data) -> None:
    """acme keeps only its passing stage 1, and only its summary."""
    data["scenarios"][0]["stages"] = data["scenarios"][0]["stages"][:1]
    data["summaries"] = [s for s in data["summaries"] if s["scenario"] != "acme" or s["stage"] == 1]


def complete_an_interrupted_run(data: Data) -> None:
    data["status"] = "completed"


def drop_the_verdict(data: Data) -> None:
    """The failed stage becomes a `completed` one without graders: no verdict at all."""
    st = _stage(data, 0, 1)
    st.update(status="completed", graded=False, grading=None, error=None)
    flip_summaries(data)


def skip_then_run(data: Data) -> None:
    _stage(data, 0, 2).update(status="passed", error=None, grading=_stage(data, 1, 2)["grading"])


TAMPERINGS: dict[str, tuple[Callable[[Data], None], str]] = {
    "stage status flipped": (flip_status, "acme stage 2 (s2): is passed but its verdict is failed"),
    "summaries flipped": (flip_summaries, "the summary of acme stage 2 says passed"),
    "status and summaries flipped": (flip_status_and_summaries, "its verdict is failed"),
    "verdict flipped": (flip_verdict_too, "verdict passed but criteria failed: b"),
    "criteria edited": (edit_criteria, "criterion b (checklist, score 0) is recorded passed"),
    "scores edited": (edit_scores, "binary_score is 50 but the criteria give 100"),
    "everything passed": (everything_passed, "verdict passed but criteria failed: b"),
    "failed stage removed": (remove_failed_stage, "are not the stages from 1 on"),
    "stages removed": (remove_stages_after_the_pass, "do not all have the same stages"),
    "verdict dropped": (drop_the_verdict, "stage 2 has graders in some scenarios only"),
    "stage run after a skip": (skip_then_run, "the runner would not have started it"),
}


@pytest.mark.parametrize("name", TAMPERINGS)
def test_a_tampered_failing_run_is_never_a_pass(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tamper, expected = TAMPERINGS[name]
    run_dir, data = save(tmp_path, failing_run())
    tamper(data)
    rewrite(run_dir, data)
    assert_inconsistent(Report(tmp_path, run_dir, capsys), expected)


def test_an_interrupted_run_edited_to_completed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = a_run(
        scenario("acme", passed_stage(1), stage(2, "running"), stage(3, "pending")),
        status="interrupted",
    )
    run_dir, data = save(tmp_path, result)
    complete_an_interrupted_run(data)
    rewrite(run_dir, data)
    assert_inconsistent(
        Report(tmp_path, run_dir, capsys), "the run is completed but acme stage 2 (s2) is running"
    )


def test_a_running_file_edited_to_completed_has_no_finish_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, data = save(tmp_path, a_run(scenario("acme", passed_stage(1)), status="running"))
    data["status"] = "completed"
    rewrite(run_dir, data)
    assert_inconsistent(Report(tmp_path, run_dir, capsys), "has no finished_at time")


def test_costs_that_do_not_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, data = save(tmp_path, passing_run())
    data["total_cost_usd"] = 0.01
    rewrite(run_dir, data)
    assert_inconsistent(Report(tmp_path, run_dir, capsys), "total_cost_usd is 0.010000")


def test_the_total_is_what_the_endpoint_forwarded_and_the_report_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = passing_run()
    # The stages report their CLIs' costs; the proxy also forwarded the agent's own calls.
    outside = 0.25
    cost = result.stages_cost_usd + outside
    result.forwarded = Forwarded(requests=9, refused=2, cost_usd=cost, input_tokens=10)
    result.total_cost_usd = cost
    assert problems(result) == []
    run_dir, data = save(tmp_path, result)
    report = Report(tmp_path, run_dir, capsys)
    assert report.code == 0, report.markdown
    assert f"total cost ${cost:.4f}; 9 model request(s) forwarded, $0.2500 of it outside" in (
        report.markdown
    )
    assert "2 refused for the budget" in report.markdown
    data["total_cost_usd"] = result.stages_cost_usd  # the agent's own calls left out
    rewrite(run_dir, data)
    assert_inconsistent(
        Report(tmp_path, run_dir, capsys),
        f"but the model endpoint forwarded {cost:.6f}",
    )


def test_a_lowered_threshold_in_one_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    low = criterion("q", False, "analytic")  # score 2: fails at 3
    graded = verdict("failed", "analytic mean 2.00 < 3", low)
    result = a_run(
        scenario("acme", stage(1, "failed", error="analytic mean 2.00 < 3", grading=graded)),
        scenario("globex", passed_stage(1)),
    )
    run_dir, data = save(tmp_path, result)
    st = _stage(data, 0, 0)
    st.update(status="passed", error=None)
    st["grading"].update(verdict="passed", analytic_threshold=2.0)
    st["grading"]["graders"][0]["criteria"][0]["passed"] = True
    flip_summaries(data)
    rewrite(run_dir, data)
    assert_inconsistent(
        Report(tmp_path, run_dir, capsys), "stage 1 was graded against different analytic"
    )


def test_a_failed_criterion_made_advisory_in_one_place_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graded = verdict(
        "failed", "checklist 1 of 2 failed: b", criterion("b", False), criterion("B", True)
    )
    result = a_run(scenario("acme", stage(1, "failed", error="x", grading=graded)))
    run_dir, data = save(tmp_path, result)
    st = _stage(data, 0, 0)
    st.update(status="passed", error=None)
    st["grading"].update(verdict="passed", checklist_all_passed=True)
    st["grading"]["graders"][0]["criteria"][0]["advisory"] = True
    flip_summaries(data)
    rewrite(run_dir, data)
    assert_inconsistent(Report(tmp_path, run_dir, capsys), "is advisory in one place and not")


def test_a_passed_verdict_with_a_grader_error_or_no_criteria(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, data = save(tmp_path, passing_run())
    grading = _stage(data, 0, 0)["grading"]
    grading["graders"][0]["error"] = "no JSON in the reply"
    grading["graders"].append({"grader": "reviewer", "criteria": [], "error": None})
    _stage(data, 0, 1)["grading"]["graders"][0]["criteria"] = []
    rewrite(run_dir, data)
    assert_inconsistent(
        Report(tmp_path, run_dir, capsys),
        "verdict passed although grader checks failed",
        "acme stage 2 (s2): verdict passed with no criterion deciding it",
    )


def test_the_graded_flag_removed_from_a_completed_stage_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing `graded` means graded: a `completed` stage is then never graded, an error."""
    run_dir, data = save(tmp_path, a_run(scenario("acme", stage(1, "completed"))))
    assert _stage(data, 0, 0)["graded"] is False
    del _stage(data, 0, 0)["graded"]
    rewrite(run_dir, data)
    report = Report(tmp_path, run_dir, capsys)
    # Summaries recorded as passed, recomputed as error: the file is inconsistent.
    assert_inconsistent(report, "recomputed from the stages it is error")


def test_grade_refuses_an_inconsistent_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, data = save(tmp_path, failing_run())
    flip_status(data)
    rewrite(run_dir, data)
    capsys.readouterr()
    assert main(["grade", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "ci-evals grade: acme stage 2 (s2): is passed but its verdict is failed" in err
    assert "the results file is inconsistent (" in err
    assert sorted(p.name for p in run_dir.iterdir()) == ["results.json"]  # nothing written


def test_a_graded_stage_left_completed_is_an_error_in_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run interrupted between the agent and its graders (as an older ci-evals left it)."""
    run_dir, _ = save(
        tmp_path,
        a_run(
            scenario("acme", passed_stage(1), stage(2, "completed", graded=True)),
            status="interrupted",
        ),
    )
    assert problems(read_results(run_dir)) == []  # consistent: just never graded
    report = Report(tmp_path, run_dir, capsys)
    assert (report.code, report.headline) == (1, "## ci-evals: interrupted")
    error = report.junit.find("./testsuite/testcase[@name='2 s2']/error")
    assert error is not None and "not graded" in error.attrib["message"]
    assert "| 2 s2 | completed:ungraded |" in report.markdown
    assert "**acme stage 2 s2** (completed:ungraded): not graded" in report.markdown


# ------------------------------------------------------------------ a real run (slow)


@pytest.mark.slow
def test_a_tampered_real_run_is_never_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = real_run(tmp_path, "broken-plan.yaml", "--from-stage", "3", "--scenario", "acme-arm")
    result = read_results(run_dir)
    assert problems(result) == []
    assert Report(tmp_path, run_dir, capsys).code == 1
    data = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    everything_passed(data)
    rewrite(run_dir, data)
    assert_inconsistent(Report(tmp_path, run_dir, capsys), "verdict passed but criteria failed")


def _isolation_run(sandbox: str, isolated: bool) -> RunResult:
    return passing_run().model_copy(update={"sandbox": sandbox, "isolated": isolated})


def test_isolation_claim_of_a_local_run_is_an_inconsistency() -> None:
    assert any("isolated" in line for line in problems(_isolation_run("local", True)))
    assert not any("isolated" in line for line in problems(_isolation_run("bwrap", True)))
    assert not any("isolated" in line for line in problems(_isolation_run("local", False)))


@pytest.mark.parametrize(
    ("endpoint", "replayed_from", "expected"),
    [
        ("replay:rec", None, "does not say what made it (replayed_from)"),
        ("anthropic", {"origin": "anthropic", "model": "m"}, "its endpoint is anthropic"),
        ("stub:s.yaml", {"origin": "stub"}, "its endpoint is stub:s.yaml"),
    ],
)
def test_a_replay_without_its_origin_or_an_origin_without_a_replay(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    endpoint: str,
    replayed_from: Data | None,
    expected: str,
) -> None:
    """An edit that drops a replay's origin (to pass as a live model's verdict) or
    dresses a live run as a replay is an inconsistency, never a pass."""
    run_dir, data = save(tmp_path, passing_run())
    data.update(model_endpoint=endpoint, replayed_from=replayed_from)
    rewrite(run_dir, data)
    assert_inconsistent(Report(tmp_path, run_dir, capsys), expected)


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("claude\x1b[2J", "not a model id"),
        ("claude sonnet", "not a model id"),
        ("[see](https://x.example)", "not a model id"),
        ("m" * 201, "201 characters, over 200"),
    ],
)
def test_a_replayed_model_that_is_no_model_id_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, why: str
) -> None:
    run_dir, data = save(tmp_path, passing_run())
    data.update(model_endpoint="replay:rec", replayed_from={"origin": "anthropic", "model": model})
    rewrite(run_dir, data)
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "replayed_from.model" in err and why in err, err


def _case(sid: str, runs: int, repeat: int) -> ScenarioResult:
    """A `claude plugin eval` case unit's run: its own stage, named after it."""
    ran = passed_stage(1).model_copy(update={"name": sid})
    return ScenarioResult(id=sid, repeat=repeat, repeats=runs, unit="case", stages=[ran])


def cases_run() -> RunResult:
    """Three cases of runs 1, 2 and 3 in a run whose `repeat` is 1."""
    return a_run(
        *(_case(sid, runs, r) for sid, runs in (("a", 1), ("b", 2), ("c", 3)) for r in range(runs))
    )


def test_a_run_of_cases_with_their_own_runs_and_stages_agrees_with_itself() -> None:
    result = cases_run()
    assert problems(result) == []
    assert [result.label_of(s) for s in result.scenarios] == [
        "a",
        "b#1",
        "b#2",
        "c#1",
        "c#2",
        "c#3",
    ]
    assert result.folder_of(result.scenarios[5]) == "c/r3" and result.repeats_text == "1 to 3"


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda r: r.scenarios.pop(),
            "scenario c has repeats [1, 2] but the run repeated it 3 time(s)",
        ),
        (
            lambda r: setattr(r.scenarios[5], "repeats", 4),
            "scenario c's repeats disagree on how many it ran, or its unit",
        ),
        (
            lambda r: setattr(r.scenarios[0], "unit", "scenario"),
            "some scenarios are claude plugin eval cases",
        ),
        (
            lambda r: r.scenarios[1].stages.append(
                passed_stage(2).model_copy(update={"name": "b"})
            ),
            "case b does not run one stage, the same in each of its runs",
        ),
    ],
)
def test_a_run_of_cases_that_disagrees_with_itself_is_inconsistent(
    edit: Callable[[RunResult], object], says: str
) -> None:
    result = cases_run()
    edit(result)
    found = problems(result)
    assert any(says in p for p in found), found
