"""`ci-evals run --resume RUN_DIR` on the stub model: real runs, broken for real (a
stub rule that errors, a SIGINT mid-stage), then resumed; and every refusal.

The stub script stands for the model endpoint: an outage is a script whose rule
for stage 4 answers HTTP 400; the endpoint "recovers" when the test writes the
script back without it (the script is no part of the suite's digest)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals.fs import owned
from ci_evals.report.evidence import problems as evidence_problems
from ci_evals.report.verify import problems
from ci_evals.results.model import RunResult, read_results
from tests.paths import REPO
from tests.run_helpers import default_rules, make_suite

pytestmark = pytest.mark.slow

CI_EVALS = Path(sys.executable).parent / "ci-evals"
USAGE = "usage: {input_tokens: 1000, output_tokens: 500}\n"  # each turn costs something
HANG = "python3 -c 'import time; time.sleep(300)'"


def _rules(stage4: str) -> str:
    """The default script, less its stage 4 rule, plus `stage4` instead."""
    kept = default_rules().split("  - name: ")
    return "".join(("  - name: " + r) for r in kept[1:] if not r.startswith("s4\n")) + stage4


ERRS = _rules("  - name: s4\n    match: {command: demo:s4}\n    turns:\n"
              "      - fault: {http_status: 400}\n")  # fmt: skip
HANGS = _rules("  - name: s4\n    match: {command: demo:s4}\n    turns:\n"
               f"      - tools: [{{bash: {json.dumps(HANG)}}}]\n")  # fmt: skip


def _env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env.update(PYTHONPATH=str(REPO), CLAUDE_CODE_MAX_RETRIES="0", TMPDIR=str(temp))
    return env


def _setup(tmp_path: Path, rules: str) -> tuple[Path, Path]:
    suite, stub = make_suite(tmp_path, rules=rules)
    stub.write_text(USAGE + stub.read_text())
    return suite, stub


def _first_run(tmp_path: Path, suite: Path, stub: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(CI_EVALS), "run", "--suite", str(suite), "--model", f"stub:{stub}",
         "--from-stage", "3", "--out", str(tmp_path / "out"), "--isolation", "none"],
        cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip


def _resume(tmp_path: Path, out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CI_EVALS), "run", "--resume", str(out), "--isolation", "none", *more],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _statuses(result: RunResult) -> list[tuple[int, str, str | None]]:
    return [(s.number, s.status, s.resumed) for s in result.scenarios[0].stages]


def _trusted(result: RunResult, out: Path) -> None:
    """What `report` believes of a run folder holds of the resumed one."""
    assert problems(result) == []
    assert evidence_problems(result, out) == []


def _heal(stub: Path) -> None:
    """The endpoint recovered: the script answers stage 4 as the default does."""
    stub.write_text(USAGE + "rules:\n" + default_rules())


def test_a_partly_errored_run_resumes_keeping_what_passed(tmp_path: Path) -> None:
    suite, stub = _setup(tmp_path, ERRS)
    out = tmp_path / "out"
    proc = _first_run(tmp_path, suite, stub)
    _, stderr = _finish(proc)
    assert proc.returncode == 1, stderr
    before = read_results(out)
    assert _statuses(before) == [(3, "completed", None), (4, "error", None), (5, "skipped", None)]
    kept_stage = before.scenarios[0].stages[0]
    trajectory = (out / "acme" / "3-s3" / "trajectory.jsonl").read_bytes()

    # Refused while another ci-evals holds the folder, and while the suite differs.
    fd = owned.own(out)
    try:
        locked = _resume(tmp_path, out)
    finally:
        owned.release(fd)
    assert locked.returncode == 2 and "in use by another ci-evals run" in locked.stderr
    text = suite.read_text()
    suite.write_text(text + "# an edit\n")
    changed = _resume(tmp_path, out)
    suite.write_text(text)
    assert changed.returncode == 2, changed.stderr
    assert "another suite or commit: the suite file" in changed.stderr
    given = _resume(tmp_path, out, "--scenario", "acme")
    assert given.returncode == 2 and "--scenario cannot change a resumed run" in given.stderr
    assert "Traceback" not in locked.stderr + changed.stderr + given.stderr
    assert read_results(out) == before  # nothing written by a refusal

    _heal(stub)
    done = _resume(tmp_path, out)

    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr and "1 stage(s) kept, 2 to run again" in done.stderr
    assert "resumed once (run --resume): 1 stage(s) kept with their evidence, 2 run again" in (
        done.stdout
    )
    after = read_results(out)
    assert _statuses(after) == [(3, "completed", "kept"), (4, "completed", "rerun"),
                                (5, "completed", "rerun")]  # fmt: skip
    assert after.run_id == before.run_id and after.status == "completed"
    # The kept stage is the earlier session's, evidence and all; not asked again.
    assert after.scenarios[0].stages[0] == kept_stage.model_copy(update={"resumed": "kept"})
    assert (out / "acme" / "3-s3" / "trajectory.jsonl").read_bytes() == trajectory
    # The stages after it started from the files it left (its saved state).
    saved = out / "acme" / "5-s5" / "after"
    assert sorted(p.name for p in saved.glob("out*.md")) == [f"out{k}.md" for k in range(1, 6)]
    assert (saved / "out3.md").read_text() == "stage 3 for Acme Corp\n"
    # The cost is the whole run's: what was spent before, and what this session spent.
    new = sum(s.cost_usd or 0.0 for s in after.scenarios[0].stages[1:])
    assert new > 0
    assert math.isclose(after.total_cost_usd, before.total_cost_usd + new, abs_tol=1e-9)
    assert len(after.resumed) == 1 and after.resumed[0].kept == 1
    assert after.resumed[0].rerun == 2
    _trusted(after, out)
    report = subprocess.run(
        [str(CI_EVALS), "report", str(out), "--markdown", str(tmp_path / "summary.md")],
        cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert (
        "**Resumed:** resumed once (run --resume): 1 stage(s) kept"
        in (tmp_path / "summary.md").read_text()
    )

    again = _resume(tmp_path, out)
    assert again.returncode == 2 and "the run passed: nothing to resume" in again.stderr


def test_an_interrupted_run_resumes_and_a_tampered_stage_is_not_kept(tmp_path: Path) -> None:
    suite, stub = _setup(tmp_path, HANGS)
    out = tmp_path / "out"
    proc = _first_run(tmp_path, suite, stub)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # until stage 4 runs: its trajectory is written
            if (out / "acme" / "4-s4" / "trajectory.jsonl").exists():
                break
            time.sleep(0.2)
        else:
            pytest.fail("stage 4 never started")
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)
    finally:
        _, stderr = _finish(proc)
    assert proc.returncode == 130, stderr
    before = read_results(out)
    assert before.status == "interrupted"
    assert _statuses(before) == [(3, "completed", None), (4, "error", None), (5, "skipped", None)]
    _heal(stub)
    # A copy of the run folder whose kept stage's saved state was changed since.
    tampered = tmp_path / "tampered"
    shutil.copytree(out, tampered, symlinks=True)
    (tampered / "acme" / "3-s3" / "after" / "out3.md").write_text("not what stage 3 wrote\n")

    done = _resume(tmp_path, out)

    assert done.returncode == 0, done.stderr
    after = read_results(out)
    assert _statuses(after) == [(3, "completed", "kept"), (4, "completed", "rerun"),
                                (5, "completed", "rerun")]  # fmt: skip
    assert after.status == "completed" and after.finished_at is not None
    _trusted(after, out)

    redone = _resume(tmp_path, tampered)

    assert redone.returncode == 0, redone.stderr
    assert "acme stage 3 (s3) is not kept" in redone.stderr
    assert "does not hold 'out3.md' as it wrote it" in redone.stderr
    result = read_results(tampered)
    assert [s.resumed for s in result.scenarios[0].stages] == ["rerun", "rerun", "rerun"]
    assert (tampered / "acme" / "3-s3" / "after" / "out3.md").read_text() == (
        "stage 3 for Acme Corp\n"
    )
    _trusted(result, tampered)


def test_the_budget_counts_what_the_earlier_session_spent(tmp_path: Path) -> None:
    """$0.04 for the run: stage 3 spent $0.028 before the outage, so stage 4 gets what
    is left ($0.012, less than its $0.028), not a fresh $0.04."""
    suite, stub = make_suite(tmp_path, rules=ERRS, budget_usd=0.04)
    stub.write_text(USAGE + stub.read_text())
    out = tmp_path / "out"
    proc = _first_run(tmp_path, suite, stub)
    _, stderr = _finish(proc)
    assert proc.returncode == 1, stderr
    spent = read_results(out).total_cost_usd
    assert 0 < spent < 0.04
    _heal(stub)

    done = _resume(tmp_path, out)

    assert done.returncode == 1, done.stderr
    after = read_results(out)
    assert _statuses(after) == [(3, "completed", "kept"), (4, "limit", "rerun"),
                                (5, "skipped", None)]  # fmt: skip
    stage4 = after.scenarios[0].stages[1]
    assert stage4.limit_hit == "budget"
    assert f"reached max_budget_usd ({0.04 - spent:.3f})" in (stage4.error or "")
    _trusted(after, out)


def test_a_stage_killed_while_graded_is_not_kept(tmp_path: Path) -> None:
    """SIGKILL (a CI job's hard timeout, the OOM killer) while stage 3's grader runs:
    results.json last said `completed` for a stage with graders, i.e. never graded.
    That is no pass: the resume runs it again instead of keeping it."""
    suite, stub = _setup(tmp_path, default_rules())
    hold = tmp_path / "hold"
    hold.write_text("")
    wait = f"import os, time\nwhile os.path.exists({str(hold)!r}): time.sleep(0.1)\n"
    grader = json.dumps({"id": "hold", "command": ["python3", "-c", wait], "timeout_s": 600})
    text = suite.read_text()
    stage3 = '  - name: s3\n    prompt: "/demo:s3 {company}"\n'
    assert stage3 in text
    suite.write_text(text.replace(stage3, f"{stage3}    graders:\n      - {grader}\n"))
    out = tmp_path / "out"
    proc = _first_run(tmp_path, suite, stub)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # until results.json records stage 3 completed
            try:
                saved = read_results(out)
            except Exception:  # not written yet
                saved = None
            if saved is not None and saved.scenarios[0].stages[0].status == "completed":
                break
            time.sleep(0.2)
        else:
            pytest.fail("stage 3 never completed")
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        _finish(proc)
        hold.unlink()  # the grader (its own process group) ends
    before = read_results(out)
    assert before.scenarios[0].stages[0].graded and before.scenarios[0].stages[0].grading is None

    done = _resume(tmp_path, out)

    assert done.returncode == 0, done.stderr
    after = read_results(out)
    assert _statuses(after) == [(3, "passed", "rerun"), (4, "completed", "rerun"),
                                (5, "completed", "rerun")]  # fmt: skip
    _trusted(after, out)


def test_a_git_scenario_resumes_from_its_first_stage(tmp_path: Path) -> None:
    """`git: true`: stage 3 commits its work; no saved state holds the workspace's
    `.git`, so keeping stage 3 would start stage 4 in a repository without that
    commit. The unit runs again from its first stage, and stage 4 sees the commit."""
    commit = "git add -A && git -c user.name=a -c user.email=a@b commit -qm stage-3-commit"
    stage3 = (
        "  - name: s3\n    match: {command: demo:s3}\n    turns:\n"
        f"      - tools: [{{bash: {json.dumps(commit)}}}]\n"
        '      - text: "stage 3 done"\n'
    )
    rules = default_rules().split("  - name: ")
    rest = "".join("  - name: " + r for r in rules[1:] if not r.startswith(("s3\n", "s4\n")))
    fault = "  - name: s4\n    match: {command: demo:s4}\n    turns:\n"
    suite, stub = _setup(tmp_path, stage3 + rest + fault + "      - fault: {http_status: 400}\n")
    text = suite.read_text()
    assert "  - id: acme\n" in text
    suite.write_text(text.replace("  - id: acme\n", "  - id: acme\n    git: true\n"))
    out = tmp_path / "out"
    proc = _first_run(tmp_path, suite, stub)
    _, stderr = _finish(proc)
    assert proc.returncode == 1, stderr
    assert _statuses(read_results(out))[:2] == [(3, "completed", None), (4, "error", None)]
    log = "git log --format=%s > log4.txt"
    stage4 = (
        "  - name: s4\n    match: {command: demo:s4}\n    turns:\n"
        f"      - tools: [{{bash: {json.dumps(log)}}}]\n"
        '      - text: "stage 4 done"\n'
    )
    stub.write_text(USAGE + "rules:\n" + stage3 + rest + stage4)

    done = _resume(tmp_path, out)

    assert done.returncode == 0, done.stderr
    seen = (out / "acme" / "4-s4" / "after" / "log4.txt").read_text()
    assert "stage-3-commit" in seen.splitlines()
    assert "acme: no stage is kept (its workspace is a git repository" in done.stderr
    after = read_results(out)
    assert [s.resumed for s in after.scenarios[0].stages] == ["rerun", "rerun", "rerun"]
    _trusted(after, out)


def test_a_stage_whose_recorded_name_is_not_the_suites_is_refused(tmp_path: Path) -> None:
    """The kept stage's folder is found by its recorded name: a results file naming
    stage 3 `../../elsewhere` would lay the next stage's workspace from outside the
    run folder. The evidence check refuses it before anything is kept."""
    suite, stub = _setup(tmp_path, ERRS)
    out = tmp_path / "out"
    proc = _first_run(tmp_path, suite, stub)
    _, stderr = _finish(proc)
    assert proc.returncode == 1, stderr
    elsewhere = tmp_path / "elsewhere"
    (out / "acme" / "3-s3").rename(elsewhere)
    (out / "acme" / "3-x").mkdir()
    os.symlink(elsewhere.parent, out / "acme" / "3-x" / "up")  # 3-x/up -> tmp_path
    data = json.loads((out / "results.json").read_text())
    stage = data["scenarios"][0]["stages"][0]
    stage["name"] = "x/up/elsewhere"
    for key in ("trajectory", "stderr", "produced_dir"):
        if stage.get(key):
            stage[key] = stage[key].replace("3-s3", "3-x/up/elsewhere")
    (out / "results.json").write_text(json.dumps(data))
    _heal(stub)

    done = _resume(tmp_path, out)

    assert done.returncode == 2, done.stderr
    assert "its folder acme/3-x/up/elsewhere leads out of the run folder" in done.stderr
    assert "Traceback" not in done.stderr
