"""The run folder under faults: a full disk, two runs in one folder.

A small tmpfs stands for a full disk (mounted as root, unmounted in teardown;
skipped where mounting is not permitted); the real CLI runs each stage on the
stub model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.results.model import read_results
from tests.run.test_run_command import base_env, ci_evals
from tests.run_helpers import make_suite

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(folder)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"optional: cannot mount a tmpfs here ({mounted.stderr.strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


BIG_WRITE = """  - match: {command: demo:s5}
    turns:
      - tools: [{write: {path: out5.md, content: "%s"}}]
      - text: "written"
"""


def test_a_full_disk_under_out_is_one_line_naming_the_folder_and_keeps_the_results(
    tmp_path: Path, small_disk: Path
) -> None:
    # The stage writes 100 KB: its trajectory and its copy in produced/ fill the
    # 160 KB disk. Before: exit 3, "this is a bug", a traceback.
    suite, _ = make_suite(tmp_path / "suite", rules=BIG_WRITE % ("x" * 100_000))
    stub = tmp_path / "suite" / "stub.yaml"
    out = small_disk / "run"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ci-evals: error: {out}: no space left"), proc.stderr
    assert "Traceback" not in proc.stderr and "bug" not in proc.stderr
    result = read_results(out)  # what was written before is kept, and valid
    assert [s.id for s in result.scenarios] == ["acme"]


def test_a_second_run_into_the_same_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    slow = """  - match: {command: demo:s5}
    turns:
      - text: "done"
        delay: 6
"""
    suite, stub = make_suite(tmp_path, rules=slow)
    out = tmp_path / "run"
    argv = [
        sys.executable, "-m", "ci_evals", "run", "--suite", str(suite), "--model",
        f"stub:{stub}", "--from-stage", "5", "--out", str(out),
    ]  # fmt: skip
    first = subprocess.Popen(argv, cwd=tmp_path, env=base_env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (out / "results.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = subprocess.run(argv, cwd=tmp_path, env=base_env(), capture_output=True,
                                text=True, timeout=120, check=False)  # fmt: skip
    finally:
        _, stderr = first.communicate(timeout=120)
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0], second.stderr
    assert "in use by another ci-evals run" in lines[0] or "already holds a run" in lines[0]
    assert first.returncode == 0, stderr
    result = json.loads((out / "results.json").read_text())
    assert [s["stages"][0]["status"] for s in result["scenarios"]] == ["completed"]


def test_two_runs_started_at_once_into_one_folder_one_is_refused(tmp_path: Path) -> None:
    # Both pass the check that the folder holds no run before either writes.
    suite, stub = make_suite(tmp_path)
    out = tmp_path / "run"
    argv = [
        sys.executable, "-m", "ci_evals", "run", "--suite", str(suite), "--model",
        f"stub:{stub}", "--from-stage", "5", "--out", str(out),
    ]  # fmt: skip
    runs = [
        subprocess.Popen(
            argv,
            cwd=tmp_path,
            env=base_env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    ended = [(run.wait(timeout=180), run.communicate()[1]) for run in runs]
    codes = sorted(code for code, _ in ended)
    assert codes == [0, 2], ended
    refused = next(stderr for code, stderr in ended if code == 2)
    assert len(refused.strip().splitlines()) == 1 and str(out) in refused
    assert read_results(out).scenarios[0].stages[0].status == "completed"


def test_a_full_tmpdir_is_a_one_line_stage_error_on_the_console(
    tmp_path: Path, small_disk: Path
) -> None:
    # The workspace (and the agent's HOME) cannot be laid down in a 160 KB $TMPDIR:
    # the plugin copy alone is more. Before: the console said nothing of it, and
    # the stage's error was a blob of every path being copied.
    suite, stub = make_suite(tmp_path / "suite", rules=BIG_WRITE % ("x" * 10))
    (tmp_path / "suite" / "plugin" / "big.bin").write_bytes(b"x" * 400_000)
    out = tmp_path / "run"
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--from-stage", "5",
        "--out", str(out), cwd=tmp_path, env=base_env(TMPDIR=str(small_disk)),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    stage = read_results(out).scenarios[0].stages[0]
    assert stage.status == "error"
    error = str(stage.error)
    assert error.startswith("ci-evals failed: UserError: cannot copy the plugin"), error
    assert "No space left on device" in error
    assert "\n" not in error and len(error) <= 500
    said = [line for line in proc.stderr.splitlines() if "acme stage 5" in line]
    assert any("No space left on device" in line for line in said), proc.stderr
