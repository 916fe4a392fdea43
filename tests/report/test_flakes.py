"""The flake ledger: main's recent runs (real runs on the stub model) beside a regression.

History: two runs of main with `repeat: 3` whose stage 5 writes `notes.md` in
some repeats only (stub variants rotate by the repeat's place), so the
`notes` criterion fails 2 of 6 on main. The pull request's run fails it once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.report.flakes import Rate, parse_bounds
from tests.run.test_run_command import ci_evals
from tests.run_helpers import default_rules, make_suite

CHECK = '    checks:\n      - { id: notes, files: "notes.md", count: 1 }\n'
WITH_NOTES = (
    "[{tools: [{write: {path: out5.md, content: x}}, {write: {path: notes.md, content: n}}]},"
    " {text: done}]"
)
WITHOUT = "[{tools: [{write: {path: out5.md, content: x}}]}, {text: done}]"


def _stage5(first: str, second: str) -> str:
    return (
        "  - name: s5\n    match: {command: demo:s5}\n    variants:\n"
        f"      - {first}\n      - {second}\n" + default_rules(4)
    )


def test_a_rate_is_flaky_strictly_between_the_bounds() -> None:
    assert Rate(4, 6).flaky(0.0, 1.0) and not Rate(6, 6).flaky(0.0, 1.0)
    assert not Rate(0, 6).flaky(0.0, 1.0) and not Rate(1, 10).flaky(0.2, 0.9)
    assert Rate(4, 6).text(0.0, 1.0) == "fails 2 of 6 on main (flaky)"
    assert parse_bounds("0.1,0.9") == (0.1, 0.9)
    with pytest.raises(ValueError, match="LOW < HIGH"):
        parse_bounds("0.9,0.1")


def _history_and_pr(tmp_path: Path, suite_keys: str = "") -> tuple[Path, list[Path], Path]:
    """The repository, main's two runs (notes fails 2 of 6) and the PR's run (fails
    it once); `suite_keys`: more suite-level keys."""
    repo = tmp_path / "repo"
    suite, stub = make_suite(repo)
    text = suite.read_text().replace(
        'prompt: "/demo:s5 {company}"\n', 'prompt: "/demo:s5 {company}"\n' + CHECK
    )
    suite.write_text(text + suite_keys)
    stub.write_text("rules:\n" + _stage5(WITH_NOTES, WITHOUT))
    history = []
    for n in (1, 2):
        out = tmp_path / f"main-{n}"
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
            "--repeat", "3", "--out", str(out), cwd=repo,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr  # 2 of 3 passed: all must
        history.append(out)
    stub.write_text("rules:\n" + _stage5(WITHOUT, WITH_NOTES))  # the PR's run fails it
    pr = tmp_path / "pr"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(pr), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    return repo, history, pr


@pytest.mark.slow
def test_a_regression_on_a_flaky_criterion_says_how_often_main_fails_it(tmp_path: Path) -> None:
    repo, history, pr = _history_and_pr(tmp_path)
    argv = ["report", str(pr), "--baseline", str(history[0])]
    argv += [a for h in history for a in ("--history", str(h))]
    plain = ci_evals(*argv, "--markdown", str(tmp_path / "plain.md"), cwd=repo)
    markdown = (tmp_path / "plain.md").read_text()
    assert "criterion notes (checklist)" in markdown
    assert "fails 2 of 6 on main (flaky)" in markdown, markdown
    assert plain.returncode == 1  # gating on every criterion: the failure fails

    gated = ci_evals(*argv, "--gate", "stable", "--markdown", str(tmp_path / "g.md"), cwd=repo)
    markdown = (tmp_path / "g.md").read_text()
    assert gated.returncode == 0, gated.stderr  # only a flaky criterion failed
    assert "### Not gated (flaky on main)" in markdown
    assert "acme stage 5 (s5): notes (checklist) — fails 2 of 6 on main (flaky)" in markdown

    # Bounds that call 2 of 6 stable: the failure gates again, nothing hidden.
    strict = ci_evals(*argv, "--gate", "stable", "--flaky-bounds", "0.1,0.5", cwd=repo)
    assert strict.returncode == 1
    assert "Not gated" not in strict.stdout


@pytest.mark.slow
def test_a_flaky_failure_that_skipped_the_stages_after_it_is_gated(tmp_path: Path) -> None:
    """Stage 4 fails on a flaky criterion, so stage 5 never runs: `--gate stable` cannot
    let that pass, nothing says stage 5 would have."""
    repo = tmp_path / "repo"
    suite, stub = make_suite(repo)
    suite.write_text(
        suite.read_text().replace(
            'prompt: "/demo:s4 {company}"\n', 'prompt: "/demo:s4 {company}"\n' + CHECK
        )
    )
    with_notes, without = (
        v.replace("out5.md", "out4.md") for v in (WITH_NOTES, WITHOUT)
    )  # fmt: skip
    stage5 = "  - name: " + default_rules().split("  - name: ")[-1]

    def rules(first: str, second: str) -> str:
        return (
            "rules:\n  - name: s4\n    match: {command: demo:s4}\n    variants:\n"
            f"      - {first}\n      - {second}\n" + default_rules(3) + stage5
        )

    stub.write_text(rules(with_notes, without))
    history = []
    for n in (1, 2):
        out = tmp_path / f"main-{n}"
        ci_evals(
            "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "4",
            "--repeat", "3", "--out", str(out), cwd=repo,
        )  # fmt: skip
        history.append(out)
    stub.write_text(rules(without, with_notes))  # the PR's run fails stage 4's notes
    pr = tmp_path / "pr"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "4",
        "--out", str(pr), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    argv = ["report", str(pr), *(a for h in history for a in ("--history", str(h)))]
    gated = ci_evals(*argv, "--gate", "stable", "--markdown", str(tmp_path / "g.md"), cwd=repo)
    assert "fails 2 of 6 on main (flaky)" in (tmp_path / "g.md").read_text()
    assert gated.returncode == 1, gated.stderr  # stage 5 was skipped: no pass seen


@pytest.mark.slow
def test_a_suite_with_gate_stable_gates_on_stable_criteria_and_fails_closed(
    tmp_path: Path,
) -> None:
    repo, history, pr = _history_and_pr(tmp_path, "gate: stable\nflaky_bounds: [0, 1]\n")
    data = json.loads((pr / "results.json").read_text())
    assert (data["gate"], data["flaky_bounds"]) == ("stable", [0.0, 1.0])  # recorded
    argv = ["report", str(pr), "--baseline", str(history[0])]
    argv += [a for h in history for a in ("--history", str(h))]

    # No --gate: the suite's, as the run recorded it; the flaky criterion reports.
    gated = ci_evals(*argv, "--markdown", str(tmp_path / "g.md"), cwd=repo)
    markdown = (tmp_path / "g.md").read_text()
    assert gated.returncode == 0, gated.stderr
    assert "acme stage 5 (s5): notes (checklist) — fails 2 of 6 on main (flaky)" in markdown

    # --gate all overrides the suite: the failure fails.
    assert ci_evals(*argv, "--gate", "all", cwd=repo).returncode == 1

    # Without main's history nothing is known flaky: every criterion gates, said so.
    alone = ci_evals("report", str(pr), "--markdown", str(tmp_path / "a.md"), cwd=repo)
    markdown = (tmp_path / "a.md").read_text()
    assert alone.returncode == 1, alone.stderr
    assert "**Gated on every criterion:** the suite's `gate: stable` needs main's" in markdown
    assert "Not gated" not in markdown


def test_a_bad_gate_key_is_one_line_naming_the_field(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    suite, _ = make_suite(repo)
    suite.write_text(suite.read_text() + "gate: sometimes\nflaky_bounds: [0.9, 0.1]\n")
    proc = ci_evals("check", "--suite", str(suite), cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "gate" in proc.stderr and "gate: all (the default) or stable" in proc.stderr
    assert "Traceback" not in proc.stderr
    suite.write_text(suite.read_text().replace("gate: sometimes\n", ""))
    proc = ci_evals("check", "--suite", str(suite), cwd=repo)
    assert proc.returncode == 2 and "flaky_bounds" in proc.stderr, proc.stderr
    assert "0 <= LOW < HIGH <= 1" in proc.stderr
