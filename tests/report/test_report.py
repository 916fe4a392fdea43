"""`ci-evals report`: JUnit XML and a Markdown summary of a saved run.

Fast tests build `RunResult`s with the real models and write them with the
real `write_results`; the slow ones report on real runs of the labsmith
example on the stub model.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ci_evals.commands import report as report_command
from ci_evals.errors import UserError
from ci_evals.report.junit import junit_xml
from ci_evals.report.markdown import markdown_summary
from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict
from ci_evals.results.model import RunResult, ScenarioResult, StageResult, write_results
from ci_evals.results.summary import summarize_run
from ci_evals.run.progress import PlainProgress, summary_table
from ci_evals.run.runner import RunPlan
from ci_evals.suite.load import load_suite
from tests.conftest import EXAMPLE
from tests.run_helpers import make_suite

START = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite itself runs in GitHub Actions: never append to the real step summary."""
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------ building results


def criterion(cid: str, passed: bool, kind: str = "checklist", **kw: object) -> Criterion:
    score = (1.0 if passed else 0.0) if kind == "checklist" else (4.0 if passed else 2.0)
    return Criterion(id=cid, kind=kind, score=score, passed=passed, source="check", **kw)  # type: ignore[arg-type]


def verdict(kind: str, reason: str, *criteria: Criterion, error: str | None = None) -> StageVerdict:
    """A verdict whose numbers follow from its criteria, as `verdict.evaluate` gives them."""
    counted = [c for c in criteria if not c.advisory]
    checklist = [c.passed for c in counted if c.kind == "checklist"]
    analytic = [c.score for c in counted if c.kind == "analytic" and c.score is not None]
    return StageVerdict(
        verdict=kind,  # type: ignore[arg-type]
        reason=reason,
        graders=(GraderResult(grader="checks", criteria=criteria, error=error),),
        checklist_all_passed=all(checklist) if checklist else None,
        analytic_mean=sum(analytic) / len(analytic) if analytic else None,
        analytic_threshold=3.0,
        binary_score=100.0 * sum(c.passed for c in counted) / len(counted) if counted else None,
    )


def stage(number: int, status: str, **kw: object) -> StageResult:
    """A stage; a `completed` one has no graders unless `graded=True` is given."""
    kw.setdefault("graded", status != "completed")
    return StageResult(number=number, name=f"s{number}", status=status, **kw)  # type: ignore[arg-type]


def passed_stage(number: int) -> StageResult:
    graded = verdict("passed", "all passed", criterion("a", True), criterion("b", True, "analytic"))
    return stage(number, "passed", turns=3, cost_usd=0.125, duration_s=1.5, grading=graded)


def failed_stage(number: int, reason: str = "checklist 1 of 2 failed: b") -> StageResult:
    graded = verdict(
        "failed",
        reason,
        criterion("a", True),
        criterion("b", False, detail="plan.json: 4 != 3"),
        criterion("c", False, advisory=True),
    )
    return stage(
        number, "failed", turns=2, cost_usd=0.5, duration_s=2.25, error=reason, grading=graded
    )


def a_run(*scenarios: ScenarioResult, status: str = "completed", **kw: object) -> RunResult:
    """A run as the runner leaves it: finished (unless running), its total cost the
    sum of its stages', its summaries computed from them."""
    stages = [stage for sc in scenarios for stage in sc.stages]
    kw.setdefault("from_stage", min((stage.number for stage in stages), default=1))
    kw.setdefault("total_cost_usd", sum(stage.cost_usd or 0.0 for stage in stages))
    if status != "running":
        kw.setdefault("finished_at", START + timedelta(minutes=1))
    result = RunResult(
        run_id="20260304T050607Z-abcdef",
        tool_version="0.1.0",
        started_at=START,
        status=status,  # type: ignore[arg-type]
        suite_file="ci-evals.yaml",
        scenarios=list(scenarios),
        **kw,  # type: ignore[arg-type]
    )
    return finished(result)


def scenario(sid: str, *stages: StageResult, repeat: int = 0) -> ScenarioResult:
    return ScenarioResult(id=sid, inputs={"company": "Acme"}, repeat=repeat, stages=list(stages))


def finished(result: RunResult) -> RunResult:
    """The run as the runner leaves it: with its per-stage summaries."""
    result.summaries = summarize_run(result, result.pass_at_least)
    return result


# ------------------------------------------------------------------ reading outputs back


def parse(xml: str) -> ET.Element:
    return ET.fromstring(xml.encode("utf-8"))  # bytes: the declaration names the encoding


def counts(element: ET.Element) -> tuple[int, int, int, int]:
    return tuple(int(element.attrib[k]) for k in ("tests", "failures", "errors", "skipped"))  # type: ignore[return-value]


def case(root: ET.Element, suite: str, name: str) -> ET.Element:
    found = root.findall(f"./testsuite[@name='{suite}']/testcase[@name='{name}']")
    assert len(found) == 1, ET.tostring(root, encoding="unicode")
    return found[0]


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The data rows of the table under `### heading`, split on unescaped `|`."""
    lines = markdown.splitlines()
    start = lines.index(f"### {heading}")
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("### "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    assert rows[0][0] == "stage" and set(rows[1][0]) == {"-"}
    return rows[2:]


# ------------------------------------------------------------------ JUnit XML


def test_passing_run_has_one_suite_per_scenario_and_a_case_per_stage() -> None:
    result = finished(
        a_run(scenario("acme", passed_stage(1), stage(2, "completed", duration_s=0.5)))
    )
    root = parse(junit_xml(result))
    assert root.tag == "testsuites"
    assert counts(root) == (2, 0, 0, 0)
    (suite,) = root.findall("testsuite")
    assert suite.attrib["name"] == "acme" and counts(suite) == (2, 0, 0, 0)
    assert suite.attrib["time"] == "2.000"
    first = case(root, "acme", "1 s1")
    assert first.attrib["classname"] == "ci-evals.acme" and first.attrib["time"] == "1.500"
    assert list(first.iter("failure")) == [] and list(first.iter("error")) == []
    out = first.findtext("system-out") or ""
    assert "turns=3" in out and "cost_usd=0.1250" in out and "criteria_passed=2/2" in out
    completed = case(root, "acme", "2 s2")  # no graders: a pass
    assert [child.tag for child in completed] == ["system-out"]
    props = {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}
    assert props["run_id"] == "20260304T050607Z-abcdef" and props["input.company"] == "Acme"


def test_failed_stage_is_a_failure_listing_the_failed_criteria() -> None:
    result = finished(
        a_run(scenario("acme", failed_stage(3), stage(4, "skipped", error="stage 3 failed")))
    )
    root = parse(junit_xml(result))
    assert counts(root) == (2, 1, 0, 1)
    failure = case(root, "acme", "3 s3").find("failure")
    assert failure is not None
    assert failure.attrib["message"] == "checklist 1 of 2 failed: b"
    body = failure.text or ""
    assert "b (checklist, score 0): plan.json: 4 != 3" in body
    assert "a (" not in body  # passed
    assert "c (" not in body  # advisory: never decides
    skipped = case(root, "acme", "4 s4").find("skipped")
    assert skipped is not None and skipped.attrib["message"] == "stage 3 failed"


def test_limit_is_a_failure_and_error_is_an_error() -> None:
    graded = verdict("error", "reviewer: no scorecard", error="no JSON in the reply")
    result = finished(
        a_run(
            scenario("acme", stage(1, "limit", limit_hit="turns", turns=30)),
            scenario("globex", stage(1, "error", error="CLI exited 1", grading=graded)),
        )
    )
    root = parse(junit_xml(result))
    assert counts(root) == (2, 1, 1, 0)
    limit = case(root, "acme", "1 s1").find("failure")
    assert limit is not None and limit.attrib["type"] == "limit:turns"
    assert "turns limit" in limit.attrib["message"]
    error = case(root, "globex", "1 s1").find("error")
    assert error is not None
    assert "reviewer: no scorecard" in error.attrib["message"]
    assert "checks: no JSON in the reply" in (error.text or "")


def test_unfinished_stages_of_an_interrupted_run_are_errors_never_passes() -> None:
    result = a_run(
        scenario(
            "acme",
            passed_stage(1),
            stage(2, "running"),
            stage(3, "skipped", error="the run was interrupted"),
            stage(4, "pending"),
        ),
        status="interrupted",
    )
    root = parse(junit_xml(result))
    assert counts(root) == (5, 0, 4, 0)  # and one for the run itself: it did not finish
    for name in ("2 s2", "3 s3", "4 s4"):
        error = case(root, "acme", name).find("error")
        assert error is not None and error.attrib["message"] == "run interrupted"
    assert case(root, "acme", "1 s1").find("error") is None


def test_a_sandbox_with_the_network_is_said_in_both_reports() -> None:
    opened = a_run(scenario("acme", passed_stage(1)), sandbox="docker", isolated=True, network=True)
    closed = a_run(scenario("acme", passed_stage(1)), sandbox="docker", isolated=True)
    assert "**Network on:** the sandbox (`docker`)" in markdown_summary(opened)
    assert "Network on" not in markdown_summary(closed)
    for result, said in ((opened, "true"), (closed, "false")):
        props = {
            p.attrib["name"]: p.attrib["value"] for p in parse(junit_xml(result)).iter("property")
        }
        assert props["network"] == said and props["sandbox"] == "docker"


def test_control_characters_and_markup_in_agent_text_stay_valid_xml() -> None:
    nasty = 'bad\x00 \x1b[31mred\x1b[0m \x0b\ufffe \ud800 <b>&amp;</b> "q" ]]> tab\tend'
    graded = verdict("failed", nasty, criterion("x\x07", False, rationale=nasty))
    bad = stage(1, "failed", error=nasty, grading=graded)
    result = a_run(
        ScenarioResult(id="acme\x01", inputs={"k\x02": nasty}, stages=[bad]), status="completed"
    )
    xml = junit_xml(result)
    xml.encode("utf-8")  # a lone surrogate would not even encode
    root = parse(xml)
    failure = root.find(".//failure")
    assert failure is not None
    assert "\\x1b[31mred" in failure.attrib["message"]
    assert '<b>&amp;</b> "q" ]]>' in failure.attrib["message"]  # escaped, read back intact
    assert "\\x00" in (failure.text or "") and "\\ud800" in (failure.text or "")
    assert root.find("testsuite").attrib["name"] == "acme\\x01"  # type: ignore[union-attr]


def test_long_texts_are_cut_in_the_message() -> None:
    result = a_run(scenario("acme", stage(1, "error", error="x" * 50_000)))
    failure = parse(junit_xml(result)).find(".//error")
    assert failure is not None
    assert len(failure.attrib["message"]) <= 1000
    assert "more characters" in failure.attrib["message"]


def test_repeats_get_one_suite_per_repeat() -> None:
    result = finished(
        a_run(
            scenario("acme", passed_stage(1), repeat=0),
            scenario("acme", failed_stage(1), repeat=1),
            repeat=2,
            pass_at_least=1,
        )
    )
    root = parse(junit_xml(result))
    assert [s.attrib["name"] for s in root.findall("testsuite")] == ["acme#1", "acme#2"]
    assert case(root, "acme#2", "1 s1").find("failure") is not None


# ------------------------------------------------------------------ Markdown


def test_markdown_headline_and_a_table_per_scenario() -> None:
    result = finished(
        a_run(
            scenario(
                "acme",
                passed_stage(1),
                failed_stage(2),
                stage(3, "skipped", error="x", graded=False),
            ),
            scenario("globex", passed_stage(1), passed_stage(2), stage(3, "completed")),
        )
    )
    markdown = markdown_summary(result)
    assert markdown.startswith("## ci-evals: failed\n")
    assert "2 scenario(s), 6 stage run(s): 1 completed, 1 failed, 3 passed, 1 skipped" in markdown
    assert "total cost $0.8750" in markdown
    assert table_rows(markdown, "acme") == [
        ["1 s1", "passed", "2/2", "4.00", "3", "$0.1250", "1.5s"],
        ["2 s2", "failed", "1/2", "-", "2", "$0.5000", "2.2s"],
        ["3 s3", "skipped", "-", "-", "-", "-", "-"],
    ]
    assert table_rows(markdown, "globex")[2] == ["3 s3", "completed", "-", "-", "-", "-", "-"]
    failing = markdown.split("### Not passed\n\n", 1)[1]
    assert "**acme stage 2 s2** (failed): checklist 1 of 2 failed: b" in failing
    assert "  - b (checklist, score 0): plan.json: 4 != 3" in failing
    assert "s3" not in failing  # skipped after a failure: the failure says it all


def test_markdown_of_a_passing_run_has_no_failure_section() -> None:
    markdown = markdown_summary(finished(a_run(scenario("acme", passed_stage(1)))))
    assert markdown.startswith("## ci-evals: passed\n")
    assert "Not passed" not in markdown


def test_markdown_of_an_interrupted_run() -> None:
    result = a_run(
        scenario("acme", passed_stage(1), stage(2, "running"), stage(3, "pending")),
        status="interrupted",
    )
    markdown = markdown_summary(result)
    assert markdown.startswith("## ci-evals: interrupted\n")
    assert table_rows(markdown, "acme")[1][1] == "running"
    assert "**acme stage 2 s2** (running): run interrupted" in markdown
    assert "**acme stage 3 s3** (pending): run interrupted" in markdown


def test_pipes_newlines_and_markup_cannot_break_the_table() -> None:
    nasty = "a | b\nc\r\n| d <!-- hide --> @owner `x` *y* $1 and $2 \x1b[0m"
    graded = verdict("failed", nasty, criterion("id|1\n", False, rationale=nasty))
    bad = StageResult(number=1, name="pl|an\nx", status="failed", grading=graded)
    markdown = markdown_summary(a_run(ScenarioResult(id="acme", stages=[bad])))
    (row,) = table_rows(markdown, "acme")
    assert len(row) == 7
    assert row[0] == "1 pl\\|an x"
    assert "\x1b" not in markdown and "<!--" not in markdown
    # A mention is shown as code, which GitHub never links (tests/test_untrusted_text.py).
    assert "&lt;!-- hide --&gt;" in markdown and " `@owner` " in markdown
    assert "\\`x\\` \\*y\\* \\$1 and \\$2 \\\\x1b" in markdown
    failing = markdown.split("### Not passed\n\n", 1)[1].splitlines()
    assert failing[0].startswith("- **acme stage 1 pl\\|an x** (failed): a \\| b c \\| d")
    assert failing[1].startswith("  - id\\|1 (checklist, score 0): a \\| b c")


def test_markdown_caps_long_texts_and_many_criteria() -> None:
    many = [criterion(f"c{i}", False) for i in range(30)]
    graded = verdict("failed", "r" * 5000, *many)
    bad = stage(1, "failed", grading=graded)
    markdown = markdown_summary(a_run(scenario("acme", bad)))
    failing = markdown.split("### Not passed\n\n", 1)[1].splitlines()
    assert len(failing[0]) < 700 and "more characters" in failing[0]
    assert sum(1 for line in failing if line.startswith("  - c")) == 20
    assert "  - ... and 10 more failed criteria" in failing


def test_markdown_with_repeats_shows_the_k_of_n_verdict() -> None:
    result = finished(
        a_run(
            scenario("acme", passed_stage(1), repeat=0),
            scenario("acme", failed_stage(1), repeat=1),
            repeat=2,
            pass_at_least=1,
        )
    )
    markdown = markdown_summary(result)
    assert markdown.startswith("## ci-evals: passed\n")  # 1 of 2 was enough
    assert "### acme#1" in markdown and "### acme#2" in markdown
    assert "| acme | 1 s1 | passed | 1 of 2 runs passed (needs 1) |" in markdown


# ------------------------------------------------------------------ the command


def args(
    run_dir: Path, junit: Path | None = None, markdown: Path | None = None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    report_command.add_arguments(parser)
    argv = [str(run_dir)]
    if junit is not None:
        argv += ["--junit", str(junit)]
    if markdown is not None:
        argv += ["--markdown", str(markdown)]
    return parser.parse_args(argv)


def saved(tmp_path: Path, result: RunResult) -> Path:
    run_dir = tmp_path / "run"
    write_results(run_dir, result)
    return run_dir


def test_command_prints_the_markdown_and_exits_0_on_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", passed_stage(1)))))
    assert report_command.run(args(run_dir)) == 0
    out = capsys.readouterr().out
    summary = markdown_summary(finished(a_run(scenario("acme", passed_stage(1)))))
    # Then the cost section (docs/report.md, Cost): a full run saved nothing.
    assert out.startswith(summary + "\n### Cost\n")


def test_command_writes_both_files_and_exits_1_on_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", failed_stage(1)))))
    junit = tmp_path / "out" / "deep" / "junit.xml"
    markdown = tmp_path / "md" / "summary.md"
    assert report_command.run(args(run_dir, junit, markdown)) == 1
    assert capsys.readouterr().out == ""  # the Markdown went to its file
    assert counts(parse(junit.read_text(encoding="utf-8"))) == (1, 1, 0, 0)
    assert markdown.read_text(encoding="utf-8").startswith("## ci-evals: failed\n")
    assert sorted(os.listdir(junit.parent)) == ["junit.xml"]  # no temp file left behind
    assert (junit.stat().st_mode & 0o777) == 0o644


def test_command_replaces_an_existing_file(tmp_path: Path) -> None:
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", passed_stage(1)))))
    junit = tmp_path / "junit.xml"
    junit.write_text("old", encoding="utf-8")
    assert report_command.run(args(run_dir, junit, tmp_path / "s.md")) == 0
    assert junit.read_text(encoding="utf-8").startswith("<?xml")


def test_command_interrupted_run_exits_1(tmp_path: Path) -> None:
    result = a_run(scenario("acme", passed_stage(1)), status="interrupted")
    run_dir = saved(tmp_path, finished(result))
    assert report_command.run(args(run_dir, markdown=tmp_path / "s.md")) == 1


def test_command_run_without_stages_is_not_a_pass(tmp_path: Path) -> None:
    run_dir = saved(tmp_path, finished(a_run()))
    assert report_command.run(args(run_dir, markdown=tmp_path / "s.md")) == 1


def test_command_appends_to_the_step_summary_in_actions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", failed_stage(1)))))
    assert report_command.run(args(run_dir)) == 1
    # Printed between ::stop-commands:: and its token: the log reads no command from it.
    first, *printed, last = capsys.readouterr().out.splitlines(keepends=True)
    token = first.removeprefix("::stop-commands::").strip()
    assert first != token and last == f"::{token}::\n"
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + "".join(printed)


def test_command_missing_run_folder_is_a_one_line_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        report_command.run(args(tmp_path / "nope"))
    assert info.value.exit_code == 2
    assert "results file not found" in str(info.value)


def test_command_broken_results_file_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError) as info:
        report_command.run(args(tmp_path))
    assert info.value.exit_code == 2 and "not valid JSON" in str(info.value)


def test_command_unwritable_output_is_a_user_error(tmp_path: Path) -> None:
    run_dir = saved(tmp_path, finished(a_run(scenario("acme", passed_stage(1)))))
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(UserError) as info:
        report_command.run(args(run_dir, junit=blocker / "junit.xml"))
    assert info.value.exit_code == 2 and info.value.field == "--junit"
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ real runs (slow)


def real_run(tmp_path: Path, script: str, *extra: str) -> Path:
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "ci_evals", "run", "--suite", str(EXAMPLE.suite)]
    argv += ["--model", EXAMPLE.model(script), "--out", str(out), *extra]
    subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert (out / "results.json").is_file()
    return out


@pytest.mark.slow
def test_report_on_a_real_passing_run(tmp_path: Path) -> None:
    run_dir = real_run(tmp_path, "labsmith.yaml", "--from-stage", "4")
    junit, markdown = tmp_path / "junit.xml", tmp_path / "summary.md"
    assert report_command.run(args(run_dir, junit, markdown)) == 0
    root = parse(junit.read_text(encoding="utf-8"))
    assert counts(root) == (4, 0, 0, 0)
    assert [s.attrib["name"] for s in root.findall("testsuite")] == [
        "acme-arm",
        "acme-arm-students",
    ]
    rows = table_rows(markdown.read_text(encoding="utf-8"), "acme-arm")
    assert [row[:2] for row in rows] == [
        ["4 plan-chapter", "passed"],
        ["5 generate-chapter", "passed"],
    ]


@pytest.mark.slow
def test_report_on_a_real_failing_run(tmp_path: Path) -> None:
    run_dir = real_run(tmp_path, "broken-plan.yaml", "--from-stage", "3", "--scenario", "acme-arm")
    junit, markdown = tmp_path / "junit.xml", tmp_path / "summary.md"
    assert report_command.run(args(run_dir, junit, markdown)) == 1
    root = parse(junit.read_text(encoding="utf-8"))
    assert counts(root) == (3, 1, 0, 2)
    failure = case(root, "acme-arm", "3 plan-lab").find("failure")
    assert failure is not None and "plan-chapter-count" in (failure.text or "")
    text = markdown.read_text(encoding="utf-8")
    assert [row[1] for row in table_rows(text, "acme-arm")] == ["failed", "skipped", "skipped"]
    assert "plan-chapter-count (checklist, score 0)" in text


def test_a_run_that_was_not_isolated_says_so() -> None:
    local = a_run(scenario("acme", passed_stage(1)))
    isolated = local.model_copy(update={"sandbox": "bwrap", "isolated": True})
    assert "**Not isolated:**" in markdown_summary(local)
    assert "Not isolated" not in markdown_summary(isolated)
    props = ET.fromstring(junit_xml(isolated)).find(".//properties")
    assert props is not None
    assert {p.get("name"): p.get("value") for p in props}["isolated"] == "true"


def test_every_stub_cost_the_run_prints_says_simulated_and_mean_dash_is_explained(
    tmp_path: Path,
) -> None:
    checks_only = verdict("failed", "checklist 1 of 2 failed: b", criterion("a", True),
                          criterion("b", False))  # fmt: skip
    real = a_run(scenario("acme", passed_stage(1), stage(2, "failed", grading=checks_only)))
    stub = real.model_copy(update={"model_endpoint": "stub:stub/x.yaml"})
    # The table's cost column, not only the total below it.
    assert summary_table(stub).splitlines()[0].split()[6:8] == ["cost", "(simulated)"]
    assert summary_table(real).splitlines()[0].split()[6] == "cost"
    # Each stage's line in the run's progress.
    out = io.StringIO()
    plain = PlainProgress(out)
    suite = load_suite(make_suite(tmp_path)[0])
    plain.run_started(RunPlan(suite, suite.stage(1), [], tmp_path / "run", "r1", None, {}), stub)
    plain.stage_finished("acme", stub.scenarios[0].stages[0])
    assert "cost=$0.1250 (simulated) time=1.5s" in out.getvalue()
    # A stage of checks alone has no analytic mean: its "-" is said once, below the table.
    table = summary_table(real)
    assert table.splitlines()[3].split()[:6] == ["acme", "2", "s2", "FAIL", "1/2", "-"]
    assert (
        "mean: the mean of a stage's analytic (1-5) criteria; - where it has none (checks "
        "alone are passed/failed, counted under criteria)"
    ) in table
    assert "mean: " not in summary_table(a_run(scenario("acme", passed_stage(1))))


def test_a_stub_run_s_cost_is_said_to_be_simulated() -> None:
    """The quickstart prints a cost right after "no API key": wherever a stub run's
    cost is shown (summary table, Markdown report and comment, JUnit) it says it
    is simulated (issue 10, item 9)."""
    real = a_run(scenario("acme", passed_stage(1)))
    stub = real.model_copy(update={"model_endpoint": "stub:examples/labsmith/stub/labsmith.yaml"})
    cost = f"total cost ${real.total_cost_usd:.4f}"
    assert f"{cost} (simulated: stub model);" in markdown_summary(stub)
    assert "simulated" not in markdown_summary(real)
    assert summary_table(stub).splitlines()[-1].startswith(f"{cost} (simulated: stub model)")
    assert "simulated" not in summary_table(real)
    for result, simulated in ((stub, "true"), (real, "false")):
        props = ET.fromstring(junit_xml(result)).find(".//properties")
        assert props is not None
        assert {p.get("name"): p.get("value") for p in props}["cost_simulated"] == simulated


# ------------------------------------------------------------------ stub mismatches


EXHAUSTED = "stub: rule 'r' has no turn 3 (it scripts 2)"


def stub_missed_stage(number: int) -> StageResult:
    """A stage the stub could not answer twice (and once alike): graded, but an error."""
    from ci_evals.results.model import EndpointMiss, endpoint_miss_error  # noqa: PLC0415

    misses = [
        EndpointMiss(
            outcome="unmatched", text="stub: no rule matched this request (command='x:y')"
        ),
        EndpointMiss(
            outcome="unmatched", text="stub: no rule matched this request (command='x:y')"
        ),
        EndpointMiss(outcome="exhausted", rule="r", turn=3, text=EXHAUSTED),
    ]
    graded = verdict("passed", "all passed", criterion("a", True))
    return stage(
        number, "error", error=endpoint_miss_error(misses), grading=graded, endpoint_misses=misses
    )


def test_endpoint_misses_make_an_error_in_both_reports_whatever_the_verdict() -> None:
    result = a_run(scenario("acme", passed_stage(1), stub_missed_stage(2)))
    from ci_evals.report.verify import problems  # noqa: PLC0415

    assert problems(result) == []  # an error with a passing verdict: consistent, by this rule

    root = parse(junit_xml(result))
    error = case(root, "acme", "2 s2").find("error")
    assert error is not None and error.attrib["type"] == "error:stub"
    assert error.attrib["message"].startswith(
        "the stub model had no scripted answer for 3 request(s) (2 no rule matched, "
        "1 past a rule's last turn)"
    )
    assert "stub: no rule matched this request (command='x:y') (x2)" in (error.text or "")
    assert "stub: rule 'r' has no turn 3 (it scripts 2)" in (error.text or "")

    md = markdown_summary(result)
    assert md.startswith("## ci-evals: failed")
    assert "**Stub script mismatch:** 3 request(s) in 1 stage(s) had no scripted answer" in md
    assert table_rows(md, "acme")[1][:2] == ["2 s2", "error:stub"]
    # The first miss is quoted in the reason, and listed again only for its count.
    assert "  - stub: no rule matched this request (command='x:y') (x2)" in md
    assert "  - stub: rule 'r' has no turn 3 (it scripts 2)" in md
    once = a_run(scenario("acme", stub_missed_stage(1)))
    once.scenarios[0].stages[0].endpoint_misses.pop(0)
    assert markdown_summary(once).count("no rule matched this request") == 1


def test_a_replay_divergence_reads_replay_not_stub_in_every_report() -> None:
    from ci_evals.report.verify import problems  # noqa: PLC0415
    from ci_evals.results.model import (  # noqa: PLC0415
        EndpointMiss,
        ReplayedFrom,
        endpoint_miss_error,
    )

    text = "replay: request #1 of this stage (#1 of the run) has no recorded exchange; ..."
    misses = [EndpointMiss(outcome="diverged", text=text)]
    diverged = stage(1, "error", error=endpoint_miss_error(misses), endpoint_misses=misses)
    result = a_run(
        scenario("acme", diverged),
        model_endpoint="replay:recordings/x",
        replayed_from=ReplayedFrom(origin="anthropic", model="claude-test"),
    )
    assert problems(result) == []

    error = case(parse(junit_xml(result)), "acme", "1 s1").find("error")
    assert error is not None and error.attrib["type"] == "error:replay"
    assert error.attrib["message"].startswith("the replayed recording had no exchange for 1")
    md = markdown_summary(result)
    assert table_rows(md, "acme")[0][:2] == ["1 s1", "error:replay"]
    assert "**Replay diverged:** 1 request(s) in 1 stage(s)" in md
    assert "stub" not in md
    diverged.status = "passed"
    assert any("the replayed recording had no answer for 1" in p for p in problems(result))


def test_a_stage_with_endpoint_misses_edited_to_passed_is_inconsistent() -> None:
    from ci_evals.report.verify import problems  # noqa: PLC0415

    missed = stub_missed_stage(1)
    missed.status = "passed"
    missed.error = None
    found = problems(a_run(scenario("acme", missed)))
    assert any("the stub model had no answer for 3 of its requests" in p for p in found)
    assert markdown_summary(a_run(scenario("acme", missed))).startswith("## ci-evals: error")
