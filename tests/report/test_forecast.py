"""`ci-evals forecast`: a run priced from a recorded history of real stub runs, and
the gate that holds a run above `max_forecast_usd` until a maintainer approves it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.report.forecast import Planned, forecast
from ci_evals.results.model import read_results
from tests.paths import REPO
from tests.run_helpers import make_suite

CI_EVALS = Path(sys.executable).parent / "ci-evals"


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env.update(PYTHONPATH=str(REPO), CLAUDE_CODE_MAX_RETRIES="0", TMPDIR=str(temp), **more)
    return env


def _ci_evals(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CI_EVALS), *args], cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A suite and two real runs of it on the stub model, most recent first: a run of
    stages 4..5 whose turns cost twice as much, and a full run before it."""
    root = tmp_path_factory.mktemp("forecast")
    suite, stub = make_suite(root)
    script = stub.read_text()
    runs = []
    for name, tokens, first in (("full", 1000, "1"), ("later", 2000, "4")):
        stub.write_text(f"usage: {{input_tokens: {tokens}, output_tokens: 500}}\n" + script)
        done = _ci_evals(
            root, "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage",
            first, "--out", str(root / name), "--isolation", "none",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append(root / name)
    return suite, runs[1], runs[0]


@pytest.mark.slow
def test_a_forecast_prices_the_selected_stages_from_the_runs_and_their_spread(
    history: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    suite, later, full = history
    recent, old = read_results(later), read_results(full)
    done = _ci_evals(
        tmp_path, "forecast", "--suite", str(suite), "--from-stage", "4", "--repeat", "2",
        "--history", str(later), "--history", str(full),
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    costs = {  # (stage) -> [cost in the recent run, in the full run]
        n: [s.cost_usd for r in (recent, old) for s in r.scenarios[0].stages if s.number == n]
        for n in (4, 5)
    }
    assert all(a and b and a > b for a, b in costs.values())  # the later run cost more
    expected = 2 * sum(math.fsum(c) / 2 for c in costs.values())  # mean of the two, x2 repeats
    low = 2 * sum(min(c) for c in costs.values())
    high = 2 * sum(max(c) for c in costs.values())
    line = done.stdout.strip()
    assert line.startswith("this run will run 2 of 5 stages x 1 of 1 scenarios x 2 repeats: ")
    assert (
        f"~${expected:,.2f} (simulated: stub model) (${low:,.2f} to ${high:,.2f} over 2 run(s))"
        in (line)
    )
    assert f"the base's last full run: ${old.total_cost_usd:,.2f}" in line


@pytest.mark.slow
def test_the_gate_holds_a_run_above_it_until_a_label_or_a_dispatch_approves_it(
    history: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    suite, later, _ = history
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    event = tmp_path / "event.json"
    actions = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
               "GITHUB_OUTPUT": str(output), "GITHUB_EVENT_PATH": str(event)}  # fmt: skip
    event.write_text(json.dumps({"pull_request": {"number": 7, "labels": [{"name": "bug"}]}}))
    # Stage 3 never ran in `later`: its price is unknown, and unknown is not below a gate.
    args = ("forecast", "--suite", str(suite), "--from-stage", "3", "--history", str(later),
            "--max-usd", "100")  # fmt: skip

    held = _ci_evals(tmp_path, *args, GITHUB_EVENT_NAME="pull_request", **actions)

    assert held.returncode == 1, held.stderr
    assert "unknown (1 stage run(s) with no history)" in held.stdout
    assert "Waiting for approval: part of it has no history" in held.stderr
    assert "the label `ci-evals:approve-spend`" in held.stderr and "Traceback" not in held.stderr
    assert "gate=waiting" in output.read_text() and "unknown=1" in output.read_text()
    said = summary.read_text()
    assert said.startswith("## ci-evals: forecast") and "| acme | 3 s3 | 1 | unknown |" in said

    event.write_text(json.dumps({"pull_request": {"number": 7, "labels": [
        {"name": "ci-evals:approve-spend"}]}}))  # fmt: skip
    labelled = _ci_evals(tmp_path, *args, GITHUB_EVENT_NAME="pull_request", **actions)
    dispatched = _ci_evals(tmp_path, *args, GITHUB_EVENT_NAME="workflow_dispatch", **actions)

    assert labelled.returncode == 0, labelled.stderr
    assert "Approved: part of it has no history" in labelled.stdout
    assert "the pull request has the label 'ci-evals:approve-spend'" in labelled.stdout
    assert dispatched.returncode == 0 and "started by workflow_dispatch" in dispatched.stdout
    assert output.read_text().count("gate=approved") == 2

    # Priced in full, against the suite's own gate; --max-usd overrides it.
    suite.write_text(suite.read_text() + "max_forecast_usd: 0.001\n")
    try:
        gated = ("forecast", "--suite", str(suite), "--from-stage", "4", "--history", str(later))
        over = _ci_evals(tmp_path, *gated)
        under = _ci_evals(tmp_path, *gated, "--max-usd", "100")
    finally:
        suite.write_text(suite.read_text().replace("max_forecast_usd: 0.001\n", ""))
    assert over.returncode == 1 and "is above max_forecast_usd $0.00" in over.stderr
    assert under.returncode == 0 and "Waiting" not in under.stdout + under.stderr


def test_with_no_history_every_price_is_unknown_never_guessed() -> None:
    priced = forecast([Planned("acme", 2, "plan", 3)], [], stages_total=4, scenarios_total=1)

    assert priced.unknown_runs == 3 and priced.cost == 0.0 and priced.over(1000.0)
    assert priced.headline() == (
        "this run will run 1 of 4 stages x 1 of 1 scenarios x 3 repeats: cost unknown "
        "(no history: no earlier run to price it from)"
    )


def test_forecast_has_its_own_history_and_comment_none_of_the_flake_options(
    tmp_path: Path,
) -> None:
    # The report's flake options once came with `--comment-key`: forecast's own
    # `--history` then clashed and every `ci-evals forecast` was a traceback.
    done = _ci_evals(tmp_path, "forecast", "--help")
    assert done.returncode == 0 and "--history" in done.stdout, done.stderr
    done = _ci_evals(tmp_path, "comment", "--help")
    assert done.returncode == 0 and "--gate" not in done.stdout, done.stderr
    done = _ci_evals(tmp_path, "report", "--help")
    assert "--flaky-bounds" in done.stdout and "--comment-key" in done.stdout
