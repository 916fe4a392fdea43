"""`ci-evals run` with graders: verdicts in results, progress and summary; repeats (k-of-n)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.results.model import read_results
from tests.grading.review_suite import make_review_suite

GOOD = '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 4}]'
LOW = '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 1}]'


def run(suite: Path, stub: Path, out: Path, *args: str) -> int:
    return main(["run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", str(out), *args])


@pytest.mark.slow
def test_verdicts_set_statuses_progress_summary_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    suite, stub = make_review_suite(tmp_path / "suite", {"good": GOOD, "low": LOW})

    assert run(suite, stub, tmp_path / "run", "--jobs", "2") == 1

    result = read_results(tmp_path / "run")
    good, low = ([s.status for s in sc.stages] for sc in result.scenarios)
    assert (good, low) == (["passed", "completed"], ["failed", "skipped"])
    assert result.summaries[0].summary.verdict == "passed"
    assert result.summaries[2].summary.verdict == "failed"
    captured = capsys.readouterr()
    # Progress lines (plain: not a terminal) carry the verdict...
    assert "good stage 1 s1: pass" in captured.err
    assert "criteria 3/3 mean 4.00" in captured.err
    assert "low stage 1 s1: FAIL" in captured.err
    # ...and so does the summary table.
    table = captured.out.splitlines()
    assert table[0].split()[:4] == ["scenario", "stage", "status", "criteria"]
    assert table[2].split()[:7] == ["good", "1", "s1", "pass", "3/3", "4.00", "2"]
    assert table[4].split()[:6] == ["low", "1", "s1", "FAIL", "2/3", "1.00"]
    # The reviewer's cost is part of the run's.
    s1 = result.scenarios[0].stages[0]
    assert s1.grading_cost_usd is not None
    assert result.total_cost_usd == pytest.approx(
        sum(
            (s.cost_usd or 0) + (s.grading_cost_usd or 0)
            for sc in result.scenarios
            for s in sc.stages
        )
    )


VARIANTS = """  - name: review-varies
    match: {prompt_contains: "case <acme>"}
    variants:
      - [{text: '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 5}]'}]
      - [{text: '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 4}]'}]
      - [{text: '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 2}]'}]
"""


@pytest.mark.slow
def test_repeats_give_statistics_and_a_k_of_n_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    suite, stub = make_review_suite(
        tmp_path / "suite",
        {"acme": GOOD},
        extra_rules=VARIANTS,
        repeat="pass_at_least: 2\nrepeat: 3\n",
    )
    out = tmp_path / "run"

    assert run(suite, stub, out, "--jobs", "3") == 0  # 2 of 3 passed: enough

    result = read_results(out)
    assert (result.repeat, result.pass_at_least) == (3, 2)
    assert sorted(sc.repeat for sc in result.scenarios) == [0, 1, 2]
    means = sorted(sc.stages[0].grading.analytic_mean for sc in result.scenarios)  # type: ignore[union-attr]
    assert means == [2.0, 4.0, 5.0]
    # Each repeat has its own folders.
    assert sorted(p.name for p in (out / "acme").iterdir()) == ["r1", "r2", "r3"]
    assert (out / "acme" / "r2" / "1-s1" / "after" / "out1.md").is_file()

    s1 = next(s for s in result.summaries if s.stage == 1).summary
    assert (s1.verdict, s1.passed, s1.runs, s1.pass_at_least) == ("passed", 2, 3, 2)
    assert s1.analytic_mean.mean == pytest.approx(11 / 3)
    assert s1.analytic_mean.stdev == pytest.approx(1.5275, abs=1e-4)
    assert s1.analytic_mean.ci95_low == pytest.approx(11 / 3 - 4.3027 * 1.5275 / 3**0.5, abs=1e-3)
    quality = next(c for c in s1.criteria if c.id == "quality")
    assert (quality.passed, quality.runs, quality.flaky) == (2, 3, True)
    # Stage 2 ran only after the two passing repeats: it is one short of all 3, but 2 of 3 pass.
    s2 = next(s for s in result.summaries if s.stage == 2).summary
    assert (s2.verdict, s2.passed, s2.errors) == ("passed", 2, 1)

    printed = capsys.readouterr().out
    assert "2/3 (need 2)" in printed
    assert "quality (analytic): mean 3.67 stdev 1.53 passed 2/3  flaky" in printed

    # Asking for all three (re-grading: no stage runs) fails the same run.
    text = suite.read_text().replace("pass_at_least: 2\n", "pass_at_least: 3\n")
    suite.write_text(text)
    assert main(["grade", str(out), "--output", str(tmp_path / "strict.json")]) == 1
    strict = json.loads((tmp_path / "strict.json").read_text())
    assert strict["summaries"][0]["summary"]["verdict"] == "failed"


def test_pass_at_least_above_repeat_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, stub = make_review_suite(
        tmp_path / "suite", {"acme": GOOD}, repeat="pass_at_least: 2\nrepeat: 3\n"
    )
    assert run(suite, stub, tmp_path / "run", "--repeat", "1") == 2
    assert "pass_at_least is 2 but --repeat is 1" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_variants_note_is_said_when_scores_change_not_on_every_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    suite, stub = make_review_suite(tmp_path / "suite", {"acme": GOOD}, extra_rules=VARIANTS)
    runs = tmp_path / "runs"
    note = "stub: the rule 'review-varies' (3) rotates its variants"

    run(suite, stub, runs / "1")  # the first run of the suite: said
    assert note in capsys.readouterr().out
    run(suite, stub, runs / "2")  # each run starts at the first variant: the same scores
    assert note not in capsys.readouterr().out
    run(suite, stub, runs / "3", "--repeat", "2")  # its repeats score differently: said
    assert note in capsys.readouterr().out
    run(suite, stub, runs / "4")  # the last run (3) had other scores: said
    assert note in capsys.readouterr().out
    # Another suite's run beside them is no comparison: this one matches run 4.
    other, other_stub = make_review_suite(tmp_path / "other", {"acme": LOW})
    run(other, other_stub, runs / "5")
    capsys.readouterr()
    run(suite, stub, runs / "6")
    assert note not in capsys.readouterr().out
