"""`ci-evals report` in GitHub Actions: annotations for stages that did not pass,
the stub model said to be a wiring check, the exit code.

Real results files written by the real `write_results`; the command runs in a
child process with an Actions-like environment (a step summary file), so the
workflow commands are read back from its real stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ci_evals.report.markdown import markdown_summary
from ci_evals.results.model import write_results
from tests.actions_runner import parse_outputs
from tests.report.test_report import a_run, failed_stage, passed_stage, scenario, stage


def report(tmp_path: Path, result: object) -> subprocess.CompletedProcess[str]:
    run_dir = tmp_path / "run"
    write_results(run_dir, result)  # type: ignore[arg-type]
    summary = tmp_path / "summary.md"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("GITHUB_") and k != "RUNNER_TEMP"
    }
    env |= {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_evals",
            "report",
            str(run_dir),
            "--markdown",
            str(tmp_path / "s.md"),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def annotations(stderr: str, level: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"::{level}")]


def test_a_failed_stage_is_an_error_annotation_and_exit_1(tmp_path: Path) -> None:
    result = a_run(scenario("acme", passed_stage(3), failed_stage(4), stage(5, "skipped")))
    done = report(tmp_path, result)
    assert done.returncode == 1
    (error,) = annotations(done.stderr, "error")
    assert error.startswith("::error title=ci-evals%3A acme stage 4 s4::failed: ")
    assert "checklist 1 of 2 failed" in error
    (warning,) = annotations(done.stderr, "warning")
    assert warning.startswith("::warning title=ci-evals%3A acme stage 5 s5::skipped")
    assert "### Not passed" in (tmp_path / "summary.md").read_text()


def test_a_passing_run_has_no_annotation_and_exits_0(tmp_path: Path) -> None:
    done = report(tmp_path, a_run(scenario("acme", passed_stage(1))))
    assert done.returncode == 0
    assert "::" not in done.stderr


def test_at_most_ten_per_level_the_rest_counted(tmp_path: Path) -> None:
    scenarios = [scenario(f"sc{n}", failed_stage(1), stage(2, "skipped")) for n in range(13)]
    done = report(tmp_path, a_run(*scenarios))
    assert done.returncode == 1
    assert len(annotations(done.stderr, "error")) == 10
    assert len(annotations(done.stderr, "warning")) == 10
    notices = annotations(done.stderr, "notice")
    assert notices == ["::notice::3 more not shown here; see the step summary"] * 2
    summary = (tmp_path / "summary.md").read_text()
    assert all(f"sc{n} stage 1 s1" in summary for n in range(13))  # every one listed there


def test_agent_text_cannot_inject_a_workflow_command(tmp_path: Path) -> None:
    evil = "boom\n::add-mask::x\r\n%0A::set-output name=verdict::passed"
    result = a_run(scenario("acme", stage(1, "error", error=evil)))
    done = report(tmp_path, result)
    (error,) = annotations(done.stderr, "error")
    assert "\n" not in error and "%0A" not in error.replace("%250A", "")
    assert not any(line.startswith("::add-mask") for line in done.stderr.splitlines())
    assert "%25" in error  # the literal `%` escaped


def test_a_stub_run_says_wiring_check_and_simulated(tmp_path: Path) -> None:
    result = a_run(
        scenario("acme", passed_stage(4), passed_stage(5)),
        model_endpoint="stub:examples/labsmith/stub/labsmith.yaml",
    )
    assert "(stub model: a wiring check, not a model verdict)" in markdown_summary(result)
    done = report(tmp_path, result)
    assert done.returncode == 0
    (warning,) = annotations(done.stderr, "warning")
    assert "wiring check" in warning and "not a verdict on any model" in warning
    summary = (tmp_path / "summary.md").read_text()
    cost = summary[summary.index("### Cost") :]  # report.costs: live, fixtures, simulated
    assert "simulated" in cost and "Served from fixtures" in cost


def test_the_runs_cost_and_tokens_are_step_outputs(tmp_path: Path) -> None:
    """Not metered (no `forwarded`): the stages' own counts, the total cost as written."""
    first = passed_stage(1).model_copy(update={"input_tokens": 1200, "output_tokens": 340})
    second = failed_stage(2).model_copy(update={"input_tokens": 800, "output_tokens": None})
    done = report(tmp_path, a_run(scenario("acme", first, second)))
    assert done.returncode == 1
    outputs = parse_outputs((tmp_path / "output").read_text())
    assert outputs == {"cost_usd": "0.6250", "input_tokens": "2000", "output_tokens": "340"}


def test_an_inconsistent_results_file_gives_no_cost_outputs(tmp_path: Path) -> None:
    edited = failed_stage(1).model_copy(update={"status": "passed"})  # its verdict: failed
    done = report(tmp_path, a_run(scenario("acme", edited)))
    assert done.returncode == 2
    output = tmp_path / "output"
    assert not output.exists() or parse_outputs(output.read_text()) == {}
