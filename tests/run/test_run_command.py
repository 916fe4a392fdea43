"""`ci-evals run` as a user runs it: a subprocess, real CLI, stub model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals.results.model import read_results
from tests.conftest import git
from tests.paths import REPO
from tests.run_helpers import default_rules, make_suite, processes_mentioning


def ci_evals(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        cwd=cwd,
        env=env if env is not None else base_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def base_env(**extra: str) -> dict[str, str]:
    """Our environment without a model key (tests never use the real API)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)
    env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    env.update(extra)
    return env


# -- validation: one line, exit 2, nothing started ---------------------------------


def test_no_key_and_no_stub_is_refused(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path)
    proc = ci_evals("run", "--suite", str(suite), "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "ci-evals: error: ci-evals run needs a model: set ANTHROPIC_API_KEY, "
        "or run offline with --model stub:PATH"
    ]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-stage", "9"], "unknown stage"),
        (["--from-stage", "nope"], "unknown stage"),
        (["--scenario", "zeta"], "acme"),
    ],
)
def test_unknown_stage_or_scenario_is_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    suite, stub = make_suite(tmp_path)
    proc = ci_evals("run", "--suite", str(suite), "--model", f"stub:{stub}", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert message in proc.stderr


def test_missing_fixture_is_refused(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path, fixtures=False)
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "3", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "missing fixture folder for stage 1 (s1)" in proc.stderr
    assert not (tmp_path / ".ci-evals").exists()


def test_fixture_with_an_escaping_link_is_refused(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path)
    (tmp_path / "secret.txt").write_text("not for the agent")
    (tmp_path / "fixtures" / "1-s1-output" / "leak.txt").symlink_to("../../secret.txt")
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "2", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "leak.txt" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_plugin_without_manifest_is_named_after_its_folder(tmp_path: Path) -> None:
    """As Claude Code names it: then the suite's `/demo:` prompts name another plugin."""
    suite, stub = make_suite(tmp_path)
    (tmp_path / "plugin" / ".claude-plugin" / "plugin.json").unlink()
    proc = ci_evals("run", "--suite", str(suite), "--model", f"stub:{stub}", cwd=tmp_path)
    assert proc.returncode == 2
    assert "names plugin 'demo', but the suite's plugin is 'plugin'" in proc.stderr


# -- runs ---------------------------------------------------------------------------


@pytest.mark.slow
def test_keep_workspace_prints_where_each_workspace_is(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path, scenarios=("acme", "globex"))
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--keep-workspace", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    kept = [line for line in proc.stdout.splitlines() if line.startswith("workspace kept: ")]
    assert [line.rsplit(" ", 1)[1] for line in kept] == ["(acme)", "(globex)"]
    for line in kept:
        folder = Path(line.removeprefix("workspace kept: ").rsplit(" ", 1)[0])
        assert (folder / "workspace").is_dir(), line


@pytest.mark.slow
def test_two_scenarios_in_parallel_then_summary(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path, scenarios=("acme", "globex"))
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "4", "--jobs", "2",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (folder,) = [line for line in proc.stdout.splitlines() if line.startswith("run folder: ")]
    run_dir = Path(folder.removeprefix("run folder: "))
    # The run ends with the next useful command, as a new user would type it.
    assert proc.stdout.strip().splitlines()[-1] == (
        f"next: ci-evals report {run_dir.relative_to(tmp_path)} --html "
        f"{run_dir.relative_to(tmp_path)}/site"
    )
    assert run_dir.parent == tmp_path / ".ci-evals" / "runs"
    result = read_results(run_dir)
    assert [sc.id for sc in result.scenarios] == ["acme", "globex"]
    assert result.model_endpoint == f"stub:{stub}"
    assert all(s.status == "completed" for sc in result.scenarios for s in sc.stages)
    assert (run_dir / "globex" / "5-s5" / "produced" / "out5.md").read_text() == (
        "stage 5 for Globex Corp\n"
    )
    # Both scenarios ran at the same time: their stage-4 runs overlap.
    stage4 = [sc.stages[0] for sc in result.scenarios]
    starts = [s.started_at.timestamp() for s in stage4 if s.started_at]
    ends = [t + (s.duration_s or 0) for t, s in zip(starts, stage4, strict=True)]
    assert max(starts) < min(ends)
    # Not a terminal: plain timestamped lines, then the summary table on stdout.
    assert "] acme stage 4 s4: started" in proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert [row[:4] for row in rows if row[:1] == ["globex"]][-1] == ["globex", "5", "s5", "ok"]
    assert "total cost" in proc.stdout


@pytest.mark.slow
def test_a_failed_stage_exits_1(tmp_path: Path) -> None:
    rules = "  - match: {command: demo:s5}\n    turns:\n      - fault: {malformed_sse: true}\n"
    suite, stub = make_suite(tmp_path, rules=rules + default_rules())
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "s5",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert read_results(out).scenarios[0].stages[0].status == "error"
    assert "ERROR" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_ends_everything_and_writes_partial_results(
    tmp_path: Path, signum: signal.Signals
) -> None:
    hang = "python3 -c 'import time; time.sleep(300)'"
    rules = (
        "  - match: {command: demo:s4}\n    turns:\n"
        f"      - tools: [{{bash: {json.dumps(hang)}}}]\n"
    )
    suite, stub = make_suite(tmp_path, rules=rules, scenarios=("acme", "globex"))
    out = tmp_path / "out"
    temp = tmp_path / "tmp"  # the workspaces' temp folder, checked empty at the end
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ci_evals", "run", "--suite", str(suite), "--model", f"stub:{stub}",
         "--from-stage", "4", "--jobs", "2", "--out", str(out)],
        cwd=tmp_path, env=base_env(TMPDIR=str(temp)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            procs = processes_mentioning(str(temp))
            if sum("time.sleep" in cmd for _, cmd in procs) >= 2:
                cli_pids = [pid for pid, cmd in procs if "_bundled/claude" in cmd]
                break
            time.sleep(0.2)
        else:
            pytest.fail("the stages never started their commands")
        os.kill(proc.pid, signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    result = read_results(out)
    assert result.status == "interrupted" and result.finished_at is not None
    for scenario in result.scenarios:
        assert [s.status for s in scenario.stages] == ["error", "skipped"]
        assert scenario.stages[0].error == "the run was interrupted"
    assert f"run folder: {out}" in stdout
    # Nothing left behind: no process, no temp folder, no temp results file.
    time.sleep(0.5)
    assert processes_mentioning(str(out)) == []
    assert processes_mentioning(str(tmp_path)) == []
    assert list(temp.iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == ["acme", "globex", "results.json"]
    # A killed CLI can leave its messaging socket in /tmp when XDG_RUNTIME_DIR is too long.
    assert len(cli_pids) == 2
    for pid in cli_pids:
        assert not Path(f"/tmp/cc-socks-{os.getuid()}/{pid}.sock").exists()


def _repo_with_stage_map(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A git repo holding the demo suite with a stage map; one commit."""
    repo = tmp_path / "repo"
    suite, stub = make_suite(repo)
    suite.write_text(suite.read_text().replace("stage_map: null", "stage_map: stage_map.yaml"))
    entries = "".join(f'  - {{glob: "commands/s{k}.md", stage: s{k}}}\n' for k in range(1, 6))
    (repo / "stage_map.yaml").write_text(
        "version: 1\nroot: plugin\nstages: [s1, s2, s3, s4, s5]\nentries:\n"
        '  - {glob: ".claude-plugin/plugin.json", stage: s1}\n' + entries
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "suite")
    return repo, suite, stub


def test_base_with_nothing_to_run_exits_0(tmp_path: Path) -> None:
    repo, suite, stub = _repo_with_stage_map(tmp_path)
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--base", "HEAD", cwd=repo
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("nothing to run")
    assert not (repo / ".ci-evals").exists()


@pytest.mark.slow
def test_base_runs_from_the_lowest_affected_stage(tmp_path: Path) -> None:
    repo, suite, stub = _repo_with_stage_map(tmp_path)
    (repo / "plugin" / "commands" / "s4.md").write_text("Do stage 4 better for $ARGUMENTS.\n")
    git(repo, "commit", "-q", "-am", "change stage 4")
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--base", "HEAD~1",
        "--out", str(out), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("from stage 4: matched")
    assert [s.number for s in read_results(out).scenarios[0].stages] == [4, 5]


@pytest.mark.slow
def test_a_transient_endpoint_error_is_retried(tmp_path: Path) -> None:
    rules = (
        "  - match: {command: demo:s5}\n    turns:\n"
        "      - fault: {http_status: 529, times: 1, scope: server}\n"
        "        tools: [{write: {path: out5.md, content: retried}}]\n"
        "      - text: done\n"
    )
    suite, stub = make_suite(tmp_path, rules=rules)
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "the model endpoint failed (HTTP 529) in 5-s5; attempt 2" in proc.stderr
    assert read_results(out).scenarios[0].stages[0].status == "completed"
    assert (out / "acme" / "5-s5" / "trajectory.attempt1.jsonl").exists()


@pytest.mark.slow
def test_secrets_in_our_environment_never_reach_the_agent(tmp_path: Path) -> None:
    rules = (
        "  - match: {command: demo:s5}\n    turns:\n"
        '      - tools: [{bash: "env > env.txt"}]\n      - text: done\n'
    )
    suite, stub = make_suite(tmp_path, rules=rules)
    out = tmp_path / "out"
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = base_env(
        GITHUB_TOKEN="ghp_from_ci",
        NPM_TOKEN="npm_from_ci",
        ANTHROPIC_API_KEY="sk-real",
        TMPDIR=str(temp),
    )
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(out), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    dumped = (out / "acme" / "5-s5" / "produced" / "env.txt").read_text()
    for secret in ("ghp_from_ci", "npm_from_ci", "sk-real", "GITHUB_TOKEN", "NPM_TOKEN"):
        assert secret not in dumped
    assert "ANTHROPIC_API_KEY=stub-model-key" in dumped
    # The agent's HOME is private, inside the run's temp folder, not the real one.
    assert re.search(rf"^HOME={re.escape(str(temp))}/ci-evals-[^/]+/acme/agent/home$", dumped, re.M)


# -- the stage-1 seed: fixtures/0-<name>/ is in the workspace before stage 1 -------------


def _seeded(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The demo suite in a git repo, its map knowing the fixtures, with a seed that
    stage 1 copies into what it writes (a real Bash call by the real CLI)."""
    repo, suite, stub = _repo_with_stage_map(tmp_path)
    stage_map = repo / "stage_map.yaml"
    stage_map.write_text(stage_map.read_text().replace("entries:", "fixtures: fixtures\nentries:"))
    seed = repo / "fixtures" / "0-codebase"
    (seed / "src").mkdir(parents=True)
    (seed / "src" / "app.py").write_text("print('seeded')\n")
    seen = (
        "  - name: s1-reads-the-seed\n    match: {command: demo:s1}\n    turns:\n"
        "      - tools: [{bash: 'cat src/app.py > out1.md'}]\n"
        "      - text: stage 1 done\n"
    )
    stub.write_text("rules:\n" + seen + default_rules())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "seed")
    return repo, suite, stub


@pytest.mark.slow
def test_stage_one_starts_from_the_seed(tmp_path: Path) -> None:
    repo, suite, stub = _seeded(tmp_path)
    (repo / "fixtures" / "0-codebase" / "src" / "app.py").write_text("print('changed')\n")
    git(repo, "commit", "-q", "-am", "change the seed")
    out = tmp_path / "out"

    # compute-stage and run agree: a change to the seed runs from stage 1 ...
    answer = ci_evals("compute-stage", "HEAD~1", cwd=repo)
    assert answer.stdout == "1\n", answer.stderr
    assert "fixture 0 is what stage 1 starts from" in answer.stderr
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--base", "HEAD~1",
        "--out", str(out), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("from stage 1: fixture-changed")

    # ... and stage 1's agent found the seed's file in its workspace.
    stage1 = out / "acme" / "1-s1"
    assert (stage1 / "produced" / "out1.md").read_text() == "print('changed')\n"
    # The seed is input, not output: not in what stage 1 produced, but in its after/.
    result = read_results(out)
    assert [c.path for c in result.scenarios[0].stages[0].produced] == ["out1.md"]
    assert (stage1 / "after" / "src" / "app.py").read_text() == "print('changed')\n"


@pytest.mark.slow
def test_a_later_start_lays_the_seed_under_the_fixtures(tmp_path: Path) -> None:
    repo, suite, stub = _seeded(tmp_path)
    stub.write_text(
        "rules:\n  - name: s3-lists\n    match: {command: demo:s3}\n    turns:\n"
        "      - tools: [{bash: 'cat src/app.py out1.md out2.md > out3.md'}]\n"
        "      - text: stage 3 done\n" + default_rules()
    )
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "3",
        "--out", str(out), cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (out / "acme" / "3-s3" / "produced" / "out3.md").read_text() == (
        "print('seeded')\nfixture 1\nfixture 2\n"
    )


# -- stub mismatches: recorded per stage, shown, and an error (not a failure) ------------


def _rules_without(*stages: int) -> str:
    """The default stub rules less those of `stages` (their requests match nothing)."""
    blocks = default_rules().split("  - name: ")[1:]
    return "".join(
        "  - name: " + block for block in blocks if int(block.split("\n")[0][1:]) not in stages
    )


@pytest.mark.slow
def test_an_unmatched_request_makes_the_stage_an_error_shown_everywhere(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path, rules=_rules_without(4))
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "3",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    s3, s4, s5 = read_results(out).scenarios[0].stages
    assert (s3.status, s3.endpoint_misses) == ("completed", [])
    assert s4.status == "error"  # the wiring is broken: not a failure of the plugin
    assert [(m.outcome, m.rule, m.subagent) for m in s4.endpoint_misses] == [
        ("unmatched", None, False)
    ]
    assert s4.endpoint_misses[0].text.startswith(
        "stub: no rule matched this request (command='demo:s4'"
    )
    assert s4.error is not None
    assert s4.error.startswith("the stub model had no scripted answer for 1 request(s) (1 no rule")
    assert s5.status == "skipped"

    # The summary says which stage and what the stub answered.
    assert "ERROR:stub" in proc.stdout
    assert "the stub script had no answer for these requests" in proc.stdout
    assert "  acme stage 4 s4: stub: no rule matched this request (command='demo:s4'" in proc.stdout

    # The reports (and so the sticky comment, which is the Markdown) say it too.
    md, xml = tmp_path / "summary.md", tmp_path / "junit.xml"
    report = ci_evals("report", str(out), "--markdown", str(md), "--junit", str(xml), cwd=tmp_path)
    assert report.returncode == 1, report.stderr  # a consistent file, a run that did not pass
    markdown = md.read_text()
    assert "**Stub script mismatch:** 1 request(s) in 1 stage(s) had no scripted answer" in markdown
    assert "| 4 s4 | error:stub |" in markdown
    assert (
        "- **acme stage 4 s4** (error:stub): the stub model had no scripted answer for 1 "
        "request(s) (1 no rule matched): stub: no rule matched this request (command='demo:s4'"
    ) in markdown
    junit = xml.read_text()
    assert 'type="error:stub"' in junit
    assert "stub: no rule matched this request (command='demo:s4'" in junit.replace("&apos;", "'")


@pytest.mark.slow
def test_a_rule_out_of_turns_is_an_error_naming_the_rule(tmp_path: Path) -> None:
    # s5's rule writes a file, then has nothing left for the turn after the tool result.
    short = (
        "  - name: s5-short\n    match: {command: demo:s5}\n    turns:\n"
        "      - tools: [{write: {path: out5.md, content: x}}]\n"
    )
    suite, stub = make_suite(tmp_path, rules=short + _rules_without(5))
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    (s5,) = read_results(out).scenarios[0].stages
    assert s5.status == "error"
    assert [(m.outcome, m.rule, m.turn) for m in s5.endpoint_misses] == [
        ("exhausted", "s5-short", 2)
    ]
    assert "past a rule's last turn" in (s5.error or "")
    assert "stub: rule 's5-short' has no turn 2 (it scripts 1)" in proc.stdout


@pytest.mark.slow
def test_misses_are_counted_per_stage_across_parallel_scenarios(tmp_path: Path) -> None:
    # Only globex's stage 5 goes unanswered; acme's stages run at the same time.
    rules = (
        "  - name: s5-acme\n    match: {command: demo:s5, prompt_contains: Acme}\n    turns:\n"
        "      - tools: [{write: {path: out5.md, content: x}}]\n      - text: done\n"
    )
    suite, stub = make_suite(
        tmp_path, scenarios=("acme", "globex"), rules=rules + _rules_without(5)
    )
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "4",
        "--jobs", "2", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    acme, globex = read_results(out).scenarios
    assert [(s.status, len(s.endpoint_misses)) for s in acme.stages] == [
        ("completed", 0), ("completed", 0),
    ]  # fmt: skip
    assert [(s.status, len(s.endpoint_misses)) for s in globex.stages] == [
        ("completed", 0), ("error", 1),
    ]  # fmt: skip


@pytest.mark.slow
def test_a_reviewer_the_script_does_not_answer_counts_with_its_stage(tmp_path: Path) -> None:
    from tests.grading.review_suite import make_review_suite  # noqa: PLC0415

    suite, stub = make_review_suite(tmp_path / "suite", {"valid": "[]"})
    text = stub.read_text()
    start = text.index("  - name: review-valid")
    stub.write_text(text[:start] + text[text.index("  - name: s1\n") :])  # no reviewer rule
    out = tmp_path / "out"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    s1, s2 = read_results(out).scenarios[0].stages
    assert s1.status == "error"
    assert s1.endpoint_misses and {m.outcome for m in s1.endpoint_misses} == {"unmatched"}
    assert s1.grading is not None  # the graders ran; their verdict is not the stage's
    assert s2.status == "skipped"

    # Re-grading cannot make it a result: what was graded was never scripted.
    regraded = tmp_path / "regraded.json"
    again = ci_evals(
        "grade", str(out), "--reviewer", "skip", "--output", str(regraded), cwd=tmp_path
    )
    assert again.returncode == 1, again.stderr
    assert "request(s); not re-graded" in again.stdout
    assert read_results(regraded).scenarios[0].stages[0].status == "error"
