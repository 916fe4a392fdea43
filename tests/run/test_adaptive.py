"""Adaptive repeats: a decided k-of-K verdict is the verdict all K runs would give.

Exhaustive over every sequence of run outcomes (K up to 5, every k), against
the real summary (`results.summary`), and a real run on the stub model.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ci_evals.results.criteria import Verdict
from ci_evals.results.model import read_results
from ci_evals.results.summary import _summarize
from ci_evals.run.adaptive import decided
from tests.results.verdicts import scored
from tests.run.test_run_command import ci_evals
from tests.run_helpers import make_suite

OUTCOMES: tuple[Verdict, ...] = ("passed", "failed", "error")


def _verdict(runs: tuple[Verdict, ...], k: int | None) -> str:
    return _summarize([scored(v, None) for v in runs], k, None).verdict


@pytest.mark.parametrize("total", [1, 2, 3, 4, 5])
def test_a_decided_prefix_gives_the_full_verdict(total: int) -> None:
    stopped = 0
    for k in (None, *range(1, total + 1)):
        for runs in itertools.product(OUTCOMES, repeat=total):
            for length in range(1, total + 1):
                if decided(runs[:length], total, k):
                    assert _verdict(runs[:length], k) == _verdict(runs, k), (runs, length, k)
                    stopped += total - length
                    break
    assert stopped > 0 or total == 1  # the rule does stop early somewhere


def test_nothing_is_decided_while_it_could_still_go_either_way() -> None:
    assert not decided(["passed"], 3, None)  # all 3 must pass: two more to see
    assert decided(["failed"], 3, None)  # one failure: all 3 can no longer pass
    assert not decided(["failed"], 3, 2)  # 2 of 3: the other two may pass
    assert decided(["failed", "failed"], 3, 2)
    assert decided(["passed", "passed"], 4, 2)
    assert not decided(["error", "failed"], 3, 2)  # the last may pass: an error then decides


CHECKS = {
    "fails": '    checks:\n      - { id: notes, files: "notes.md", count: 1 }\n',
    "passes": '    checks:\n      - { id: out, files: "out5.md", count: 1 }\n',
}


@pytest.mark.slow
@pytest.mark.parametrize(("check", "pass_at_least", "runs"), [("fails", None, 1), ("passes", 2, 2)])
def test_a_run_stops_a_scenarios_repeats_once_decided(
    tmp_path: Path, check: str, pass_at_least: int | None, runs: int
) -> None:
    repo = tmp_path / "repo"
    suite, stub = make_suite(repo)
    text = suite.read_text().replace(
        'prompt: "/demo:s5 {company}"\n', 'prompt: "/demo:s5 {company}"\n' + CHECKS[check]
    )
    rule = f"pass_at_least: {pass_at_least}\n" if pass_at_least else ""
    suite.write_text(text + f"repeat: 4\n{rule}stop_repeats_early: true\n")
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(out), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == (1 if check == "fails" else 0), proc.stderr
    result = read_results(out)
    assert len(result.scenarios) == runs
    assert result.repeats_stopped == {"acme": 4 - runs}
    assert result.summaries[0].summary.verdict == ("failed" if check == "fails" else "passed")
    assert f"{4 - runs} repeat(s) not run" in proc.stdout + proc.stderr
    report = ci_evals("report", str(out), "--markdown", str(tmp_path / "r.md"), cwd=repo)
    assert "inconsistent" not in report.stderr, report.stderr
