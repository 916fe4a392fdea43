"""`ci-evals report --baseline`: deltas against a baseline run, and the cost saved.

The slow tests compare real runs of the labsmith example on the stub model
(the good script against `broken-plan.yaml`, with repeats on both sides) and a
real version 2 full run (`tests/data/results-v2-full.json`); the fast ones
build results with the test_report helpers, or read the v1 file, to reach the
cases a deterministic stub cannot (noise within the intervals, another suite,
a stale commit).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.main import main
from ci_evals.report.baseline import stage_cost, stage_costs
from ci_evals.report.costs import cost_summary
from ci_evals.results.model import (
    RESULTS_FILE,
    Revision,
    RunResult,
    StageResult,
    SuiteIdentity,
    read_results,
    write_results,
)
from tests.conftest import EXAMPLE, git
from tests.paths import DATA
from tests.report.test_report import a_run, criterion, scenario, stage, verdict
from tests.run.test_run_command import _repo_with_stage_map, ci_evals

SUITE = SuiteIdentity(path="ci-evals.yaml", plugin="demo")


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def report(*argv: str, tmp_path: Path) -> tuple[int, str]:
    """`ci-evals report ARGV --markdown FILE`: (exit code, the Markdown)."""
    out = tmp_path / "summary.md"
    code = main(["report", *argv, "--markdown", str(out)])
    return code, out.read_text(encoding="utf-8") if out.exists() else ""


def section(markdown: str, title: str) -> str:
    """The text of `#### TITLE (N)` up to the next heading ('' when absent)."""
    match = re.search(rf"^#### {title} \(\d+\)\n(.*?)(?=^#|\Z)", markdown, re.M | re.S)
    return match.group(1) if match else ""


def save(tmp_path: Path, name: str, result: RunResult) -> Path:
    return write_results(tmp_path / name, result).parent


# ------------------------------------------------------------------ real runs (slow)


def labsmith_run(out: Path, script: str, *extra: str) -> Path:
    argv = [sys.executable, "-m", "ci_evals", "run", "--suite", str(EXAMPLE.suite)]
    argv += ["--model", EXAMPLE.model(script), "--out", str(out)]
    argv += ["--isolation", "none", "--scenario", "acme-arm", *extra]
    subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert (out / RESULTS_FILE).is_file()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real runs from stage 3, two repeats each: the good plan and the broken one."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "good": labsmith_run(root / "good", "labsmith.yaml", "--from-stage", "3", "--repeat", "2"),
        "broken": labsmith_run(
            root / "broken", "broken-plan.yaml", "--from-stage", "3", "--repeat", "2"
        ),
    }


@pytest.mark.slow
def test_a_broken_plan_against_a_good_baseline_lists_the_regressions_first(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    code, markdown = report(str(runs["broken"]), "--baseline", str(runs["good"]), tmp_path=tmp_path)
    assert code == 1  # the run's own verdict: the baseline never changes it
    against = markdown[markdown.index("### Against the baseline") :]
    regressions = section(against, "Regressions")
    # With two repeats a side, each a point interval: a change beyond the noise.
    assert "**acme-arm 3 plan-lab** verdict: passed 2/2 → failed 0/2 (beyond the noise" in (
        regressions
    )
    assert "criterion plan-chapter-count (checklist): passed 2/2 → passed 0/2" in regressions
    assert section(against, "Improvements") == ""
    assert against.index("#### Regressions") < against.index("#### Other changes")
    # The stages after it were skipped: said, their criteria not counted as gone.
    changes = section(against, "Other changes")
    assert "4 plan-chapter** verdict: passed 2/2 → not run (skipped)" in changes
    assert "gone" not in changes
    # Both runs are version 3: the suite matched, the commit is known, no --base.
    good = read_results(runs["good"])
    assert good.suite == SuiteIdentity(path="ci-evals.yaml", plugin="labsmith")
    assert good.revision is not None and good.revision.commit is not None
    assert "staleness not checked (pass --base REV)" in against


@pytest.mark.slow
def test_a_fixed_plan_against_a_broken_baseline_lists_improvements(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    code, markdown = report(str(runs["good"]), "--baseline", str(runs["broken"]), tmp_path=tmp_path)
    assert code == 0
    assert section(markdown, "Regressions") == ""
    improvements = section(markdown, "Improvements")
    assert "3 plan-lab** verdict: failed 0/2 → passed 2/2 (beyond the noise" in improvements
    assert "| acme-arm | 3 plan-lab | failed 0/2 | passed 2/2 |" in markdown
    # Labelled against the run's own table (criteria, the agent's cost alone).
    assert (
        "Runs passed of the runs (repeats) on each side — the run's table counts criteria; "
        "cost per run is the agent's and its reviewer's — the run's table shows the agent's "
        "alone.\n\n| scenario | stage | baseline: runs passed | now: runs passed | analytic mean "
        "| cost per run (agent + reviewer) |\n"
    ) in markdown


@pytest.mark.slow
def test_a_version_2_full_run_baseline_prices_the_fixture_stages(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    baseline = DATA / "results-v2-full.json"
    code, markdown = report(str(runs["good"]), "--baseline", str(baseline), tmp_path=tmp_path)
    assert code == 0
    assert "the baseline does not record its suite" in markdown
    assert "the baseline records no commit" in markdown
    # Stages 1 and 2 came from fixtures; the full run says what they cost there.
    data = json.loads(baseline.read_text())
    acme = next(s for s in data["scenarios"] if s["id"] == "acme-arm")
    per_run = sum(s["cost_usd"] + (s["grading_cost_usd"] or 0) for s in acme["stages"][:2])
    assert "- Served from fixtures (not run): 1 research-company, 2 research-product" in markdown
    assert (
        f"- Estimated saving against a full run: ${2 * per_run:.4f} (simulated), from the "
        f"per-stage costs of the baseline's full run {data['run_id']}"
    ) in markdown
    assert "(simulated: stub-model prices, nothing was paid)" in markdown


@pytest.mark.slow
def test_a_baseline_that_is_not_a_full_run_gives_no_estimate(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    _, markdown = report(str(runs["good"]), "--baseline", str(runs["broken"]), tmp_path=tmp_path)
    assert (
        "- Estimated saving against a full run: no estimate: the baseline is not a full run "
        "(it started at stage 3)"
    ) in markdown


@pytest.mark.slow
def test_run_with_base_records_the_merge_base(tmp_path: Path) -> None:
    repo, suite, stub = _repo_with_stage_map(tmp_path)
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "plugin" / "commands" / "s4.md").write_text("Do stage 4 better for $ARGUMENTS.\n")
    git(repo, "commit", "-q", "-am", "change stage 4")
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--base", "main",
        "--out", str(out), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = read_results(out)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert result.revision == Revision(commit=head, dirty=False, base=base, merge_base=base)
    assert result.suite == SUITE


# ------------------------------------------------------------------ built results (fast)


def graded(number: int, passed: bool, score: float) -> StageResult:
    """A stage with one checklist and one analytic criterion (`score`)."""
    analytic = criterion("b", score >= 3, "analytic").model_copy(update={"score": score})
    crit = (criterion("a", passed), analytic)
    kind = "passed" if passed and score >= 3 else "failed"
    return stage(number, kind, cost_usd=0.25, grading=verdict(kind, kind, *crit))


def repeated(*runs: tuple[bool, float], **kw: object) -> RunResult:
    """One scenario `acme`, stage 3, one repeat per (checklist passed, analytic score)."""
    scenarios = [scenario("acme", graded(3, p, s), repeat=i) for i, (p, s) in enumerate(runs)]
    kw.setdefault("suite", SUITE)
    return a_run(*scenarios, repeat=len(runs), pass_at_least=1, **kw)  # type: ignore[arg-type]


def test_a_change_inside_both_intervals_is_within_the_noise(tmp_path: Path) -> None:
    before = save(tmp_path, "before", repeated((True, 4), (True, 5), (True, 3)))
    after = save(tmp_path, "after", repeated((True, 3), (True, 4), (True, 3)))
    code, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert code == 0
    regressions = section(markdown, "Regressions")
    assert "analytic mean: 4.00 → 3.33 (within the noise, 95% intervals" in regressions
    assert "**2 regression(s)** (0 beyond the noise)" in markdown  # the mean and criterion b


def test_one_run_a_side_says_the_noise_is_unknown(tmp_path: Path) -> None:
    before = save(tmp_path, "before", repeated((True, 4)))
    after = save(tmp_path, "after", repeated((False, 4)))
    _, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert "criterion a (checklist): passed 1/1 → passed 0/1 (noise unknown" in section(
        markdown, "Regressions"
    )


def test_a_baseline_of_another_suite_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = SuiteIdentity(path="other/ci-evals.yaml", plugin="other")
    before = save(tmp_path, "before", repeated((True, 4), suite=other))
    after = save(tmp_path, "after", repeated((True, 4)))
    code, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert (code, markdown) == (2, "")  # refused before anything is written
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "the baseline is a run of another suite: other/ci-evals.yaml (plugin other)" in err
    assert "results.json says its suite in `suite`" in err


def test_an_old_baseline_with_no_stage_in_common_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The v1 file (suite unknown) has stages 1 plan, 2 write; this run s3.
    after = save(tmp_path, "after", repeated((True, 4)))
    code, _ = report(str(after), "--baseline", str(DATA / "results-v1.json"), tmp_path=tmp_path)
    assert code == 2
    assert "shares no stage (number and name) with this run" in capsys.readouterr().err


def test_a_missing_baseline_is_said_and_the_exit_code_is_the_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    after = save(tmp_path, "after", repeated((True, 4)))
    code, markdown = report(str(after), "--baseline", str(tmp_path / "none"), tmp_path=tmp_path)
    assert code == 0
    # The path is escaped like all text (`_` as `\\_`).
    assert re.search(r"\*\*No baseline:\*\* \S+/none does not exist", markdown)
    assert "no estimate: no baseline to take the stages' costs from" in markdown
    assert "--baseline: no baseline:" in capsys.readouterr().err


def test_an_inconsistent_baseline_is_not_compared(tmp_path: Path) -> None:
    broken = repeated((True, 4))
    broken.scenarios[0].stages[0].status = "failed"  # its verdict says passed
    before = save(tmp_path, "before", broken)
    after = save(tmp_path, "after", repeated((True, 4)))
    code, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert code == 0
    assert "**No baseline:** the baseline's results file is inconsistent (1 problem(s))" in markdown


def _history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """main: A - B; feature (from B): C. Returns the repo and the three commits."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = {}
    for name in ("A", "B"):
        (repo / "f.txt").write_text(name)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", name)
        commits[name] = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "g.txt").write_text("C")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "C")
    commits["C"] = git(repo, "rev-parse", "HEAD").strip()
    return repo, commits


def test_a_baseline_not_at_the_merge_base_is_stale(tmp_path: Path) -> None:
    _, commits = _history(tmp_path)
    now = Revision(commit=commits["C"], base=commits["B"], merge_base=commits["B"])
    after = save(tmp_path, "after", repeated((True, 4), revision=now))
    old = save(tmp_path, "old", repeated((True, 4), revision=Revision(commit=commits["A"])))
    fresh = save(tmp_path, "fresh", repeated((True, 4), revision=Revision(commit=commits["B"])))
    _, markdown = report(str(after), "--baseline", str(old), tmp_path=tmp_path)
    assert (
        f"- **Stale baseline:** it ran at `{commits['A'][:12]}`, not at the merge base "
        f"`{commits['B'][:12]}` of this change"
    ) in markdown
    _, markdown = report(str(after), "--baseline", str(fresh), tmp_path=tmp_path)
    assert "Stale" not in markdown
    assert f"Baseline: run 20260304T050607Z-abcdef at {commits['B'][:12]}" in markdown


def test_report_base_computes_the_merge_base_in_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, commits = _history(tmp_path)
    after = save(tmp_path, "after", repeated((True, 4), revision=Revision(commit=commits["C"])))
    old = save(tmp_path, "old", repeated((True, 4), revision=Revision(commit=commits["A"])))
    monkeypatch.chdir(repo)
    _, markdown = report(str(after), "--baseline", str(old), "--base", "main", tmp_path=tmp_path)
    assert f"not at the merge base `{commits['B'][:12]}`" in markdown
    _, markdown = report(str(after), "--baseline", str(old), "--base", "nope", tmp_path=tmp_path)
    assert "no merge base of" in markdown and "staleness not checked" in markdown


def test_a_dirty_baseline_and_an_unfinished_one_are_said(tmp_path: Path) -> None:
    dirty = repeated(
        (True, 4), revision=Revision(commit="a" * 40, dirty=True), status="interrupted"
    )
    before = save(tmp_path, "before", dirty)
    after = save(tmp_path, "after", repeated((True, 4)))
    _, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert "the baseline ran with uncommitted changes" in markdown
    assert "the baseline run did not finish (status interrupted)" in markdown


def test_an_inconsistent_run_is_not_compared_nor_priced(tmp_path: Path) -> None:
    broken = repeated((True, 4))
    broken.scenarios[0].stages[0].status = "failed"
    after = save(tmp_path, "after", broken)
    before = save(tmp_path, "before", repeated((True, 4)))
    code, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert code == 2
    assert "Not compared: this run's results file is inconsistent." in markdown
    assert "### Cost" not in markdown


def test_a_version_1_baseline_is_read_and_compared(tmp_path: Path) -> None:
    v1 = DATA / "results-v1.json"
    code, markdown = report(str(v1), "--baseline", str(v1), tmp_path=tmp_path)
    assert code == 0
    assert "**0 regression(s)** (0 beyond the noise), 0 improvement(s), 0 other change(s); " in (
        markdown
    )
    assert "2 stage(s) compared, 2 unchanged." in markdown
    assert "the baseline does not record its suite" in markdown


def test_base_without_a_baseline_is_a_usage_error(tmp_path: Path) -> None:
    after = save(tmp_path, "after", repeated((True, 4)))
    assert report(str(after), "--base", "main", tmp_path=tmp_path) == (2, "")


def test_the_recorded_revision_is_dirty_only_for_the_suites_own_files(tmp_path: Path) -> None:
    from ci_evals.run.provenance import revision, suite_identity  # noqa: PLC0415
    from ci_evals.suite.load import load_suite  # noqa: PLC0415

    repo, suite_file, _ = _repo_with_stage_map(tmp_path)
    suite = load_suite(suite_file)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert revision(suite) == Revision(commit=head, dirty=False)
    assert suite_identity(suite) == SUITE
    (repo / "notes.txt").write_text("not the suite's\n")
    (repo / ".ci-evals" / "runs").mkdir(parents=True)  # a run folder at the top
    (repo / ".ci-evals" / "runs" / "results.json").write_text("{}")
    assert revision(suite) == Revision(commit=head, dirty=False)
    (repo / "plugin" / "commands" / "new.md").write_text("untracked\n")
    assert revision(suite) == Revision(commit=head, dirty=True)


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            '{"found": false, "repository": "o/r", "workflow": "evals.yml", "branch": "main", '
            '"artifact": "ci-evals-run", "reason": "refused: entry \'../x\' would be written '
            'outside the folder"}',
            "refused: entry",
        ),
        ("[1, 2", "baseline-source.json is unreadable"),
    ],
)
def test_a_fetch_that_found_no_baseline_is_believed_over_a_results_file_beside_it(
    tmp_path: Path, source: str, said: str
) -> None:
    """What `baseline fetch` wrote says there is no baseline (or cannot be read): a
    results.json in the same folder (left there, put there) is not compared with."""
    after = save(tmp_path, "after", repeated((True, 4)))
    fetched = save(tmp_path, "fetched", repeated((True, 4)))
    (fetched / "baseline-source.json").write_text(source, encoding="utf-8")
    code, markdown = report(str(after), "--baseline", str(fetched), tmp_path=tmp_path)
    assert code == 0
    assert "**No baseline:**" in markdown
    assert said in markdown.replace("\\", "")


def test_a_stage_that_never_reached_the_model_is_no_live_run_and_prices_nothing() -> None:
    never = StageResult(number=1, name="commit", status="error", cost_usd=0.0, model_ran=False)
    ran = StageResult(number=1, name="commit", status="passed", cost_usd=0.25)
    assert stage_cost(never) is None and stage_cost(ran) == 0.25
    result = RunResult.model_validate(
        {
            "run_id": "r",
            "tool_version": "0",
            "started_at": "2026-01-01T00:00:00Z",
            "from_stage": 1,
            "suite_file": "ci-evals.yaml",
            "scenarios": [
                {"id": "a", "stages": [never.model_dump()]},
                {"id": "b", "stages": [ran.model_dump()]},
            ],
        }
    )
    assert stage_costs(result) == {("b", 1): 0.25}  # a baseline's estimate leaves it out
    costs = cost_summary(result, None)
    assert (costs.stage_runs, costs.never_ran) == (1, 1)


def test_a_passed_stage_now_an_error_is_counted_and_its_criteria_are_not_gone(
    tmp_path: Path,
) -> None:
    passed = verdict("passed", "all passed", criterion("a", True))
    before = save(tmp_path, "before", a_run(scenario("acme", stage(3, "passed", grading=passed)),
                                            suite=SUITE))  # fmt: skip
    # The grader ran and failed criterion a, then a reviewer errored: the stage is an error.
    errored = verdict("error", "reviewer: no scorecard", criterion("a", False), error="no card")
    after = save(tmp_path, "after", a_run(scenario("acme", stage(3, "error", grading=errored)),
                                          suite=SUITE))  # fmt: skip
    _, markdown = report(str(after), "--baseline", str(before), tmp_path=tmp_path)
    assert "gone" not in markdown
    assert (
        "**acme 3 s3** criterion a (checklist): passed 1/1 → not judged (the stage was an error)\n"
    ) in section(markdown, "Other changes")
    assert "**1 regression(s)** (0 beyond the noise, 1 now an error), " in markdown
