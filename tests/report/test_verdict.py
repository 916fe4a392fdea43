"""A run that did not pass never reports green (docs/report.md, *The verdict*).

`ci-evals report` writes JUnit for test reporters, which count `<failure>` and
`<error>` cases: a run whose every *recorded* stage passed but that did not
finish (what a SIGKILL after the last stage leaves: `running`), was
interrupted or ended in error, or a completed run whose second scenario was
skipped when the budget ran out, must still read red there, in the Markdown
and in the exit code — the same rule, `report.run_passed`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.report.annotations import run_notes
from ci_evals.results.model import RunResult, write_results
from tests.report.test_report import a_run, counts, failed_stage, passed_stage, scenario, stage

BUDGET = "the run budget (1.0 USD) is spent"


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def report(
    tmp_path: Path, result: RunResult, capsys: pytest.CaptureFixture[str]
) -> tuple[int, ET.Element, str, str]:
    """`ci-evals report RUN --junit FILE --markdown FILE`: (exit code, JUnit, Markdown, stderr)."""
    run_dir = tmp_path / "run"
    write_results(run_dir, result)
    junit, markdown = tmp_path / "junit.xml", tmp_path / "summary.md"
    code = main(["report", str(run_dir), "--junit", str(junit), "--markdown", str(markdown)])
    err = capsys.readouterr().err
    root = ET.fromstring(junit.read_bytes())
    return code, root, markdown.read_text(encoding="utf-8"), err


def red(root: ET.Element) -> bool:
    """What a test reporter counts: a failure or an error case anywhere."""
    cases = root.iter("testcase")
    return any(c.find("failure") is not None or c.find("error") is not None for c in cases)


def run_case(root: ET.Element) -> ET.Element:
    found = root.findall("./testsuite[@name='ci-evals.run']/testcase[@name='run']/error")
    assert len(found) == 1, ET.tostring(root, encoding="unicode")
    return found[0]


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("running", "the run never finished: results.json still says running"),
        ("interrupted", "the run was interrupted before it finished"),
        ("error", "the run ended in error before it finished"),
    ],
)
def test_an_unfinished_run_whose_stages_all_passed_is_red(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: str, said: str
) -> None:
    """What a SIGKILL after the last stage leaves: every recorded stage passed."""
    result = a_run(scenario("acme", passed_stage(1), passed_stage(2)), status=status)
    code, root, markdown, err = report(tmp_path, result, capsys)
    assert (code, err) == (1, "")  # consistent, and not a pass
    assert counts(root) == (3, 0, 1, 0)
    error = run_case(root)
    assert error.attrib["type"] == f"run:{status}"
    assert said in error.attrib["message"]
    assert red(root)
    assert markdown.startswith(f"## ci-evals: {status}\n")
    assert f"- **the run** ({status}): {said}" in markdown.split("### Not passed\n\n", 1)[1]
    assert [n.title for n in run_notes(result) if n.level == "error"] == [
        f"ci-evals: the run is {status}"
    ]


def test_a_scenario_skipped_when_the_budget_ran_out_is_an_error_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = a_run(
        scenario("acme", passed_stage(1), passed_stage(2)),
        scenario(
            "globex",
            stage(1, "skipped", error=BUDGET, graded=True),
            stage(2, "skipped", error=BUDGET, graded=True),
        ),
        budget_usd=1.0,
    )
    code, root, markdown, err = report(tmp_path, result, capsys)
    assert (code, err) == (1, "")
    assert counts(root) == (4, 0, 2, 0)
    for name in ("1 s1", "2 s2"):
        (error,) = root.findall(f"./testsuite[@name='globex']/testcase[@name='{name}']/error")
        assert error.attrib == {"message": BUDGET, "type": "skipped"}
    assert not root.findall(".//testsuite[@name='ci-evals.run']")  # the stages say why
    assert markdown.startswith("## ci-evals: failed\n")
    failing = markdown.split("### Not passed\n\n", 1)[1]
    assert f"- **globex stage 1 s1** (skipped): {BUDGET}" in failing
    assert f"- **globex stage 2 s2** (skipped): {BUDGET}" in failing


def test_a_stage_skipped_after_a_failure_stays_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its scenario's failure is already red and says why: the rest is grey, not noise."""
    result = a_run(scenario("acme", failed_stage(1), stage(2, "skipped", error="stage 1 failed")))
    code, root, markdown, _ = report(tmp_path, result, capsys)
    assert code == 1
    assert counts(root) == (2, 1, 0, 1)
    failing = markdown.split("### Not passed\n\n", 1)[1].split("\n### ", 1)[0]
    assert "**acme stage 1 s1** (failed)" in failing
    assert "s2" not in failing


def test_a_run_that_recorded_no_stage_is_red(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, root, markdown, _ = report(tmp_path, a_run(), capsys)
    assert code == 1
    assert run_case(root).attrib["message"] == "the run recorded no stage"
    assert "- **the run** (completed): the run recorded no stage" in markdown


def test_a_passing_run_has_no_run_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, root, markdown, _ = report(tmp_path, a_run(scenario("acme", passed_stage(1))), capsys)
    assert code == 0
    assert counts(root) == (1, 0, 0, 0)
    assert not red(root) and "Not passed" not in markdown
