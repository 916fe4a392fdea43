"""`run --base REV --base-run DIR` when only graders changed: the base's run re-graded.

Real git history, the real CLI on the stub model for the base's run, the real
`grade` on its saved states; nothing of ours faked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.results.model import read_results
from tests.conftest import git
from tests.run.test_run_command import ci_evals
from tests.run_helpers import make_suite

# A reviewer-free suite whose graders are checks: a grader-only change adds one
# that main's own outputs fail.
FAILING_CHECK = '    checks:\n      - { id: has-notes, files: "notes.md", count: 1 }\n'


def _repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo = tmp_path / "repo"
    suite, stub = make_suite(repo)
    suite.write_text(suite.read_text().replace("stage_map: null", "stage_map: stage_map.yaml"))
    entries = "".join(f'  - {{glob: "commands/s{k}.md", stage: s{k}}}\n' for k in range(1, 6))
    (repo / "stage_map.yaml").write_text(
        "version: 1\nroot: plugin\nstages: [s1, s2, s3, s4, s5]\nglobal: [/ci-evals.yaml]\n"
        'entries:\n  - {glob: ".claude-plugin/plugin.json", stage: s1}\n' + entries
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "suite")
    return repo, suite, stub


def _add_check(suite: Path) -> None:
    text = suite.read_text()
    suite.write_text(
        text.replace(
            'prompt: "/demo:s5 {company}"\n', 'prompt: "/demo:s5 {company}"\n' + FAILING_CHECK
        )
    )


def test_compute_stage_says_a_check_only_change_regrades(tmp_path: Path) -> None:
    repo, suite, _ = _repo(tmp_path)
    _add_check(suite)
    git(repo, "commit", "-q", "-am", "a check")
    proc = ci_evals("compute-stage", "HEAD~1", "--json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["regrade"]["reason"].startswith("only graders changed: ci-evals.yaml")

    # A prompt changed too: the agent is asked something else, so it runs.
    suite.write_text(suite.read_text().replace("/demo:s5 {company}", "/demo:s5 {company} now"))
    git(repo, "commit", "-q", "-am", "a prompt")
    proc = ci_evals("compute-stage", "HEAD~2", "--json", cwd=repo)
    assert "regrade" not in json.loads(proc.stdout), proc.stdout

    # A plugin file changed: no re-grade either (the plain form says nothing of it).
    (repo / "plugin" / "commands" / "s3.md").write_text("Do stage 3 differently.\n")
    git(repo, "commit", "-q", "-am", "a command")
    proc = ci_evals("compute-stage", "HEAD~1", cwd=repo)
    assert proc.stdout == "3\n" and "regrade" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_run_base_regrades_the_base_run_instead_of_running(tmp_path: Path) -> None:
    repo, suite, stub = _repo(tmp_path)
    base_run = tmp_path / "base-run"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", str(base_run), cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    _add_check(suite)
    git(repo, "commit", "-q", "-am", "a check main's outputs fail")
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--base", "HEAD~1",
        "--base-run", str(base_run), "--out", str(out), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the new check fails on main's own outputs
    assert "re-grading the base run" in proc.stderr
    base = read_results(base_run)
    regraded = read_results(out)
    assert regraded.regraded_at is not None and regraded.run_id == base.run_id
    assert (out / "results.base.json").is_file()
    stage5 = regraded.scenarios[0].stages[-1]
    assert stage5.status == "failed"
    assert stage5.grading is not None
    assert [c.id for c in stage5.grading.criteria if not c.passed] == ["has-notes"]
    # No agent ran: the stub served nothing new, the saved trajectories are the base's.
    assert [s.status for s in regraded.scenarios[0].stages[:4]] == [
        s.status for s in base.scenarios[0].stages[:4]
    ]

    # The report against main's run reads the delta as the graders', not the agent's.
    proc = ci_evals(
        "report", str(out), "--baseline", str(base_run / "results.json"),
        "--markdown", str(tmp_path / "report.md"), cwd=repo,
    )  # fmt: skip
    markdown = (tmp_path / "report.md").read_text()
    assert "**The graders changed:** 1 criteria now fail on the baseline's own outputs" in (
        markdown
    ), proc.stderr
    assert "The agent ran" not in markdown
    assert "Stale" not in markdown and "records no merge base" not in markdown  # main's run

    # A base run of another commit than the merge base: the agent runs (fail closed).
    suite.write_text(suite.read_text().replace("count: 1 }", "count: 2 }"))
    git(repo, "commit", "-q", "-am", "another check change")
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--base", "HEAD~1",
        "--base-run", str(base_run), "--out", str(tmp_path / "ran"), cwd=repo,
    )  # fmt: skip
    assert "the base run is not of the merge base" in proc.stderr, proc.stderr
    assert "the agent runs" in proc.stderr
    assert read_results(tmp_path / "ran").regraded_at is None
