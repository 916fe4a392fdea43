"""`report --plugin-eval-json`: any ci-evals run as a `claude plugin eval` document.

Runs built with the real models (`tests.report.test_report`); the document is
read back by the import's own strict reader, which checks it agrees with itself
as the CLI computes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.interop.plugin_eval_doc import parse_document
from ci_evals.interop.plugin_eval_export import export_document
from ci_evals.interop.plugin_eval_import import imported_run
from ci_evals.main import main
from ci_evals.results.model import write_results
from tests.report.test_report import a_run, failed_stage, passed_stage, scenario, stage


def test_a_phased_run_exports_a_case_per_stage_and_an_error_as_the_cli_writes_one() -> None:
    result = a_run(
        scenario("acme", passed_stage(3), failed_stage(4), stage(5, "skipped")),
        scenario(
            "zeta", passed_stage(3), stage(4, "error", error="CLI exited 1"), stage(5, "skipped")
        ),
    )

    document = export_document(result)

    assert document["schemaVersion"] == 1 and document["partial"] is False
    names = [c["name"] for c in document["cases"]]
    assert names == ["acme/3-s3", "acme/4-s4", "acme/5-s5", "zeta/3-s3", "zeta/4-s4", "zeta/5-s5"]
    runs = {c["name"]: c["arms"]["with"][0] for c in document["cases"]}
    assert (runs["acme/3-s3"]["score"], runs["acme/3-s3"]["error"]) == (1.0, None)
    # 1 of 2 deciding criteria passed; the advisory one is reported, not scored.
    assert runs["acme/4-s4"]["score"] == 0.5
    assert [(g["name"], g["scored"]) for g in runs["acme/4-s4"]["graders"]] == [
        ("a", True),
        ("b", True),
        ("c", False),
    ]
    # No verdict: an error with score 0 and no graders, never a graded pass.
    assert runs["zeta/4-s4"] == {
        **runs["zeta/4-s4"],
        "score": 0.0,
        "error": "CLI exited 1",
        "graders": [],
    }
    assert runs["acme/5-s5"]["error"] == "skipped: no verdict"
    assert document["aggregates"]["casesPassed"] == 2

    # The import's reader accepts it: scores, shares and means agree as the CLI's do.
    again = imported_run(parse_document(json.loads(json.dumps(document)), Path("x.json")))
    verdicts = {s.scenario: s.summary.verdict for s in again.summaries}
    assert verdicts == {
        "acme-3-s3": "passed",
        "acme-4-s4": "failed",
        "acme-5-s5": "error",
        "zeta-3-s3": "passed",
        "zeta-4-s4": "error",
        "zeta-5-s5": "error",
    }


def test_an_unfinished_run_is_a_partial_document(tmp_path: Path) -> None:
    result = a_run(scenario("acme", passed_stage(3), stage(4, "pending")), status="interrupted")
    document = export_document(result)
    assert (document["partial"], document["partialReason"]) == (True, "interrupted")


def test_an_inconsistent_results_file_is_not_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    result = a_run(scenario("acme", passed_stage(3)))
    result.total_cost_usd = 99.0  # edited after the run
    run_dir = write_results(tmp_path / "run", result).parent
    out = tmp_path / "doc.json"
    code = main(
        [
            "report",
            str(run_dir),
            "--markdown",
            str(tmp_path / "s.md"),
            "--plugin-eval-json",
            str(out),
        ]
    )
    assert code == 2
    assert (
        "--plugin-eval-json: not written: the results file is inconsistent"
        in capsys.readouterr().err
    )
    assert not out.exists()


def test_a_run_with_and_without_the_plugin_exports_both_arms_apart() -> None:
    """A run of ci-evals with `ablation: with-without`: the without-arm's runs are
    `arms.without` (never more runs of the with-arm), a single-arm stage has none."""
    from tests.results.test_arms import _result  # noqa: PLC0415 - the two-arm run built there

    document = export_document(_result())

    assert document["suite"]["ablation"] == "with-without"
    first, second = document["cases"]
    assert [len(first["arms"]["with"]), len(first["arms"]["without"])] == [1, 1]
    assert first["aggregates"]["score"] == 1.0
    assert first["aggregates"]["scoreWithout"] == 0.5 and first["aggregates"]["delta"] == 0.5
    assert list(second["arms"]) == ["with"]  # ran single-arm: nothing to compare
    assert "delta" not in second["aggregates"]
    assert document["aggregates"]["meanDelta"] == 0.5
