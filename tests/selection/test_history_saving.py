"""The drafted maps on a marketplace's history (`benchmarks/bench_history.py`, small):
never fewer stage runs than the ideal on any commit, at most 1.1x `on.paths`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO


@pytest.mark.slow
def test_drafted_maps_save_on_a_generated_history(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_history.py"), "--plugins", "3",
         "--commits", "40", "--seed", "3", "--repo", str(tmp_path / "history")],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "met: drafted <= 1.1x on.paths, never below the ideal" in proc.stdout, proc.stdout
    drafted = next(line for line in proc.stdout.splitlines() if "drafted:" in line)
    assert "below the ideal on 0 answer(s)" in drafted, proc.stdout


@pytest.mark.slow
def test_case_units_save_on_a_ten_case_history(tmp_path: Path) -> None:
    """`benchmarks/bench_case_units.py`, small: the drafted case map runs exactly the
    ideal — never a case fewer — and far less than everything."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_case_units.py"), "--commits", "30",
         "--seed", "3", "--repo", str(tmp_path / "history")],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MISSED" not in proc.stdout
    assert "units / ideal: 1.00x" in proc.stdout, proc.stdout
