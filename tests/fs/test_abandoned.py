"""A SIGKILLed run's temp folder (workspaces, the agent's HOME) is removed by `gc`
and by the next run, once its owner is gone; a live run's and anything not ours stay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci_evals.fs import abandoned
from tests.run.test_run_command import base_env, ci_evals
from tests.run_helpers import make_suite

SLOW = """  - match: {command: demo:s5}
    turns:
      - text: "done"
        delay: 60
"""


@pytest.mark.slow
def test_a_sigkilled_runs_temp_folder_is_removed_by_gc_and_by_the_next_run(
    tmp_path: Path,
) -> None:
    suite, stub = make_suite(tmp_path / "suite", rules=SLOW)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = base_env(TMPDIR=str(temp))
    argv = [
        sys.executable, "-m", "ci_evals", "run", "--suite", str(suite), "--model",
        f"stub:{stub}", "--from-stage", "5", "--out", str(tmp_path / "run1"),
    ]  # fmt: skip
    run = subprocess.Popen(argv, cwd=tmp_path, env=env, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(temp.glob("ci-evals-*/acme/agent")):
            time.sleep(0.05)
        live = abandoned.find(temp)
        assert live == []  # its owner is alive: not a leftover
        time.sleep(1)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    left = [p for p in temp.glob("ci-evals-*") if (p / abandoned.OWNER_FILE).exists()]
    assert len(left) == 1 and (left[0] / "acme" / "agent").is_dir()
    # Planted: a link named like ours, and a folder with no owner file: never touched.
    outside = tmp_path / "precious"
    outside.mkdir()
    (temp / "ci-evals-link").symlink_to(outside)
    (temp / "ci-evals-unclaimed").mkdir()

    dry = ci_evals("gc", "--dry-run", cwd=tmp_path, env=env)
    assert f"would remove {left[0]}: its run's process is gone" in dry.stdout, dry.stderr
    assert left[0].is_dir()

    # The next run removes it before it starts (gc would too).
    quick = make_suite(tmp_path / "quick")
    proc = ci_evals(
        "run", "--suite", str(quick[0]), "--model", f"stub:{quick[1]}", "--from-stage", "5",
        "--out", str(tmp_path / "run2"), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not left[0].exists()
    assert outside.is_dir() and (temp / "ci-evals-link").is_symlink()
    assert (temp / "ci-evals-unclaimed").is_dir()
