"""`ci-evals import plugin-eval`: a `claude plugin eval` document as a run folder that
`report` (Markdown, JUnit, --html), `--baseline` and `--plugin-eval-json` read.

Documents are built in the CLI's shape (`documents`, checked against what the
bundled CLI writes in `test_plugin_eval_cli.py`); the commands run through
`ci_evals.main.main`, as the console script does.
"""

from __future__ import annotations

import copy
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.report.verify import problems
from ci_evals.results.model import RESULTS_FILE, read_results
from tests.endpoints.test_replay_origin import _reports
from tests.github.test_comment import FakeGitHub, github
from tests.interop.documents import case, document, grader, run, write

__all__ = ["github"]  # the stand-in GitHub server fixture


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def imported(tmp_path: Path, doc: dict[str, object], name: str = "run") -> tuple[int, Path]:
    out = tmp_path / name
    code = main(
        ["import", "plugin-eval", str(write(tmp_path / f"{name}.json", doc)), "--out", str(out)]
    )
    return code, out


def markdown(tmp_path: Path, *argv: str) -> tuple[int, str]:
    out = tmp_path / "summary.md"
    code = main(["report", *argv, "--markdown", str(out)])
    return code, out.read_text() if out.exists() else ""


def summaries(run_dir: Path) -> dict[str, tuple[str, float | None]]:
    result = read_results(run_dir)
    return {s.scenario: (s.summary.verdict, s.summary.binary_score.mean) for s in result.summaries}


GREET = [run(grader("says-hello", True), grader("wrote-file", True, 2))] * 2
PARTLY = [
    run(grader("says-hello", True), grader("wrote-file", False, 3)),
    run(grader("says-hello", True), grader("wrote-file", True, 3)),
]


def test_a_document_imports_as_case_units_that_report_reads_as_any_run(tmp_path: Path) -> None:
    code, out = imported(tmp_path, document(case("greet", GREET), case("write it", PARTLY)))

    assert code == 1  # "write it" failed one of its two runs
    result = read_results(out)
    assert problems(result) == []  # every verdict re-evaluates to what was imported
    assert [(s.id, s.repeat, s.repeats, s.unit) for s in result.scenarios] == [
        ("greet", 0, 2, "case"),
        ("greet", 1, 2, "case"),
        ("write-it", 0, 2, "case"),
        ("write-it", 1, 2, "case"),
    ]
    assert summaries(out) == {"greet": ("passed", 100.0), "write-it": ("failed", 62.5)}
    stage = result.scenarios[2].stages[0]
    assert (stage.number, stage.name, stage.status) == (1, "write-it", "failed")
    weights = {c.id: c.weight for c in stage.grading.criteria}  # type: ignore[union-attr]
    assert weights == {"says-hello": 1.0, "wrote-file": 3.0}
    # The CLI's costs: the agent's part, and its judges' as the grading cost.
    assert (stage.cost_usd, stage.grading_cost_usd) == (pytest.approx(0.2), 0.05)
    assert result.total_cost_usd == pytest.approx(4 * 0.25)
    imported_from = result.imported_from
    assert imported_from is not None
    assert (imported_from.claude_version, imported_from.cost_usd) == ("2.1.337", 1.5)
    assert [(c.scenario, c.name, c.score) for c in imported_from.cases] == [
        ("greet", "greet", 1.0),
        ("write-it", "write it", 0.625),
    ]
    # The document itself is kept beside results.json, as read.
    assert json.loads((out / "aggregate-result.json").read_text())["claudeVersion"] == "2.1.337"
    # Written through a temporary folder beside it, renamed in whole: none is left.
    assert sorted(p.name for p in out.iterdir()) == ["aggregate-result.json", "results.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]

    code, summary = markdown(tmp_path, str(out), "--junit", str(tmp_path / "j.xml"))
    assert code == 1
    assert "imported from claude plugin eval 2.1.337" in summary
    assert "read by ci-evals" in summary
    junit = ET.parse(tmp_path / "j.xml").getroot()
    assert "imported from claude plugin eval" in ET.tostring(junit, encoding="unicode")
    assert main(["report", str(out), "--html", str(tmp_path / "site")]) == 1
    assert "imported from claude plugin eval" in (tmp_path / "site" / "index.html").read_text()


def test_a_run_that_errored_is_an_error_though_the_cli_graded_it_a_pass(tmp_path: Path) -> None:
    """F2: the CLI grades a run that ended on an error; negative graders then pass and
    the case scores 1.00 (exit 0). Imported, it is an error, and the run fails."""
    quiet = run(grader("no-file", True), grader("no-sorry", True), error="timed out after 2s")
    code, out = imported(tmp_path, document(case("quiet", [quiet]), case("greet", GREET)))

    assert code == 1
    assert summaries(out)["quiet"] == ("error", None)
    stage = read_results(out).scenarios[0].stages[0]
    assert stage.status == "error"
    assert stage.error == (
        "claude plugin eval: the run failed: timed out after 2s (the CLI graded it anyway: "
        "score 1.00)"
    )
    # The CLI's grading is kept to be read, under the error.
    assert stage.grading is not None and stage.grading.verdict == "error"
    assert problems(read_results(out)) == []
    code, summary = markdown(tmp_path, str(out))
    assert code == 1 and "timed out after 2s" in summary
    # Both readings side by side: the CLI's pass, ci-evals' error.
    assert "| quiet | 1.00 | error | - |" in summary
    assert "| greet | 1.00 | passed | 1.00 |" in summary


def test_skipped_paid_graders_are_an_error_and_no_baseline(tmp_path: Path) -> None:
    """The cost ceiling skipped the judges (the CLI counts them failed): not judged."""
    skipped = run(grader("says-hello", True), grader("polite", False), skipped_paid=True)
    doc = document(case("greet", GREET), case("judged", [skipped]))
    code, base = imported(tmp_path, doc, "base")

    assert code == 1
    assert summaries(base)["judged"] == ("error", None)
    assert read_results(base).imported_from.skipped_paid_graders == 1  # type: ignore[union-attr]

    code, current = imported(tmp_path, document(case("greet", GREET)), "current")
    assert code == 0
    code, summary = markdown(tmp_path, str(current), "--baseline", str(base))
    assert code == 0  # a refused baseline never changes the run's exit code
    assert "**No baseline:** the baseline is not usable" in summary
    assert "1 run(s) skipped their paid graders" in summary


def test_a_partial_document_is_interrupted_its_missing_runs_skipped_and_no_baseline(
    tmp_path: Path,
) -> None:
    """`partial: true` (the cost ceiling, an interrupt): the runs never started are
    `skipped`, the run is `interrupted` (never exit 0, even where every run passed)."""
    doc = document(
        case("greet", GREET[:1], runsPerCase=2),
        case("later", [], runsPerCase=3),
        partial=True,
        partialReason="cost_ceiling",
    )
    code, base = imported(tmp_path, doc, "base")

    assert code == 1
    result = read_results(base)
    assert result.status == "interrupted"
    assert problems(result) == []
    statuses = [(s.id, s.repeat, s.stages[0].status) for s in result.scenarios]
    assert statuses == [
        ("greet", 0, "passed"),
        ("greet", 1, "skipped"),
        ("later", 0, "skipped"),
        ("later", 1, "skipped"),
        ("later", 2, "skipped"),
    ]
    assert summaries(base)["greet"][0] == "error"  # 1 of 2 runs: not every run passed

    _, current = imported(tmp_path, document(case("greet", GREET)), "current")
    code, summary = markdown(tmp_path, str(current), "--baseline", str(base))
    assert code == 0
    assert "**No baseline:** the baseline is not usable: it was imported from a partial" in summary


def test_two_imports_of_one_plugin_compare_as_baseline_and_change(tmp_path: Path) -> None:
    _, base = imported(tmp_path, document(case("greet", GREET), case("write it", GREET)), "base")
    _, current = imported(tmp_path, document(case("greet", GREET), case("write it", PARTLY)), "now")

    code, summary = markdown(tmp_path, str(current), "--baseline", str(base))

    assert code == 1
    assert "Against the baseline" in summary
    assert "write-it" in summary and "wrote-file" in summary


def test_the_without_plugin_arm_is_kept_out_of_the_verdict(tmp_path: Path) -> None:
    """`--ablation with-without`: the without-arm's runs are kept (with the CLI's delta),
    never counted in a verdict or the run's cost; a with-only grader is advisory."""
    with_runs = [run(grader("said", True), grader("skill", True, with_only=True))] * 2
    without = [run(grader("said", False))] * 2
    code, out = imported(
        tmp_path, document(case("hi", with_runs, without), ablation="with-without")
    )

    assert code == 0
    _, summary = markdown(tmp_path, str(out))
    assert "| hi | 1.00 | passed | 1.00 | 0.00 | +1.00 |" in summary
    result = read_results(out)
    assert problems(result) == []
    (kept,) = result.imported_from.cases  # type: ignore[union-attr]
    assert (kept.score, kept.score_without, kept.delta) == (1.0, 0.0, 1.0)
    assert [s.status for s in kept.without] == ["failed", "failed"]
    assert result.total_cost_usd == pytest.approx(0.5)  # the with-arm's two runs
    criteria = {c.id: c.advisory for c in result.scenarios[0].stages[0].grading.criteria}  # type: ignore[union-attr]
    assert criteria == {"said": False, "skill": True}


def test_names_that_read_alike_become_distinct_ids(tmp_path: Path) -> None:
    """The CLI allows case names `a b` and `a-b`, grader names `A_b` and `a-b`; ci-evals
    compares ids normalised (case, `_`, spaces) and makes folders of case names."""
    graders = run(grader("A_b", True), grader("a-b", False, 2), grader("x/y.md", True))
    doc = document(
        case("a b", [graders]),
        case("a-b", [graders]),
        case("../..", [graders]),
        case("_-x", [graders]),
        case("é" * 10 + "y" * 100, [graders]),
    )
    _, out = imported(tmp_path, doc)

    result = read_results(out)
    assert [s.id for s in result.scenarios] == ["a-b", "a-b-2", "case", "x", "y" * 64]
    ids = [c.id for c in result.scenarios[0].stages[0].grading.criteria]  # type: ignore[union-attr]
    assert ids == ["A_b", "a-b (2)", "x/y.md"]
    assert problems(result) == []
    assert summaries(out)["a-b"] == ("failed", pytest.approx(100 * 2 / 4))


def test_a_trace_path_is_never_read(tmp_path: Path) -> None:
    """The document may name any file on this machine, and the run folder is uploaded."""
    secret = tmp_path / "id_rsa"
    secret.write_text("SECRET-KEY-MATERIAL")
    doc = document(case("greet", [run(grader("a", True), tracePath=str(secret))]))
    _, out = imported(tmp_path, doc)

    for path in out.rglob("*"):
        if path.is_file() and path.name != "aggregate-result.json":
            assert "SECRET-KEY-MATERIAL" not in path.read_text(), path
    assert read_results(out).scenarios[0].stages[0].trajectory is None


# ------------------------------------------------------------------ refused, in one line


def _edit(doc: dict[str, object], path: str, value: object) -> dict[str, object]:
    """A copy of `doc` with the value at `path` (`cases.0.arms.with.1.score`) replaced
    (or removed)."""
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: object = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]  # type: ignore[index]
    if value is _REMOVE:
        del node[last]  # type: ignore[attr-defined]
    else:
        node[int(last) if isinstance(node, list) else last] = value  # type: ignore[index]
    return doc


_REMOVE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("schemaVersion", 2, "$.schemaVersion: schemaVersion 2: this ci-evals reads"),
        ("cases.1.arms.with.1.score", "1", "$.cases[1].arms.with[1].score: expected a number"),
        ("cases.1.arms.with.0.score", 1.0, "$.cases[1].arms.with[0].score: 1 but its scored"),
        ("cases.1.arms.with.0.passed", True, "$.cases[1].arms.with[0].passed: True but"),
        ("cases.0.aggregates.score", 0.5, "$.cases[0].aggregates.score: 0.5 but the mean"),
        ("cases.0.runsPerCase", 3, "$.cases[0].arms.with: 2 run(s) but runsPerCase is 3"),
        ("cases.0.arms.with.0.error", _REMOVE, "$.cases[0].arms.with[0]: missing required key"),
        ("cases.0.arms.with.0.skippedPaidGraders", None, "skippedPaidGraders: expected true"),
        ("cases.0.arms.with.0.graders.0.weight", -1, "graders[0].weight: -1 is out of range"),
        ("cases.0.arms.with.0.startedAt", "yesterday", "'yesterday' is not an ISO 8601"),
        ("suite.ablation", "both", "$.suite.ablation: unknown ablation 'both'"),
        ("suite.threshold", 2, "$.suite.threshold: 2 is out of range (0..1)"),
        ("aggregates.casesTotal", 5, "$.aggregates.casesTotal: 5 but the document holds 2"),
        ("cases", {}, "$.cases: expected an array, got an object"),
        ("cases.0.name", "  ", "$.cases[0].name: must not be empty"),
        ("suite.modelOverride", "x y", "$.suite.modelOverride: not a model id"),
    ],
)
def test_a_broken_document_is_refused_in_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, value: object, message: str
) -> None:
    doc = _edit(document(case("greet", GREET), case("w", PARTLY)), path, value)
    code, out = imported(tmp_path, doc)

    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "run.json: " in err and message in err, err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b'{"schemaVersion": NaN}', "NaN is not a JSON number"),
        (b"[" * 100 + b"]" * 100, "nested deeper than 16 levels"),
        (b'{"schemaVersion": 1', "not valid JSON"),
        (b"[]", "expected an object, got an array"),
    ],
)
def test_a_file_that_is_no_document_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    (tmp_path / "doc.json").write_bytes(content)
    code = main(["import", "plugin-eval", str(tmp_path / "doc.json"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_a_link_a_fifo_and_a_folder_are_refused_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "real.json", document(case("greet", GREET)))
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "folder.json").mkdir()
    for name, why in (
        ("link", "a symbolic link"),
        ("fifo", "not a regular file"),
        ("folder", "not a regular file"),
    ):
        code = main(
            ["import", "plugin-eval", str(tmp_path / f"{name}.json"), "--out", str(tmp_path / name)]
        )
        err = capsys.readouterr().err
        assert code == 2 and why in err, err


def test_an_import_never_writes_into_a_folder_that_is_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / RESULTS_FILE).write_text("{}")
    doc = write(tmp_path / "doc.json", document(case("greet", GREET)))
    assert main(["import", "plugin-eval", str(doc), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / RESULTS_FILE).read_text() == "{}"


def test_a_commit_is_recorded_only_as_a_full_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = write(tmp_path / "doc.json", document(case("greet", GREET)))
    assert (
        main(["import", "plugin-eval", str(doc), "--out", str(tmp_path / "a"), "--commit", "HEAD"])
        == 2
    )
    assert "--commit: 'HEAD' is not a full commit id" in capsys.readouterr().err
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert (
        main(["import", "plugin-eval", str(doc), "--out", str(tmp_path / "b"), "--commit", sha])
        == 0
    )
    assert read_results(tmp_path / "b").revision.commit == sha  # type: ignore[union-attr]


def test_text_from_the_document_is_never_a_workflow_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = run(grader("a", True), error="x\n::error::forged\n::add-mask::y")
    code, _ = imported(tmp_path, document(case("greet", [hostile])))
    assert code == 1
    printed = capsys.readouterr().out
    assert not any(line.startswith("::") for line in printed.splitlines()), printed


def test_an_imported_run_is_neither_re_graded_nor_a_fixture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It holds the CLI's verdicts and no saved stage state: one line, exit 2."""
    _, out = imported(tmp_path, document(case("greet", GREET)))
    capsys.readouterr()
    assert main(["grade", str(out)]) == 2
    assert "cannot re-grade a run imported from claude plugin eval" in capsys.readouterr().err
    update = ["fixtures", "update", "--from", str(out), "--stage", "1"]
    assert main(update) == 2
    err = capsys.readouterr().err
    assert "cannot promote a fixture from a run imported from claude plugin eval" in err


def test_every_report_of_an_imported_run_says_so_and_the_sticky_comment_is_posted(
    tmp_path: Path,
    github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On a pull request (a stand-in GitHub): the headline, the JUnit properties, the
    site, an annotation and the comment as GitHub received it all name the import."""
    quiet = run(grader("no-file", True), error="timed out after 2s")
    _, out = imported(tmp_path, document(case("quiet", [quiet]), case("greet", GREET)))

    reports = _reports(tmp_path, out, github, monkeypatch, capsys)

    assert reports.code == 1
    note = "imported from claude plugin eval 2.1.337"
    assert note in reports.headline and note in reports.html
    assert reports.junit["origin_note"].startswith(note)
    assert any("title=ci-evals%3A imported run::" in w for w in reports.warnings), reports.warnings
    assert "| quiet | 1.00 | error | - |" in reports.comment
