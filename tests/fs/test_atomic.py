"""`fs.atomic.write_atomic`: whole or not at all, nothing left behind."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.fs.atomic import DEFAULT_MODE, write_atomic


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_default_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_atomic(target, b"{}\n")
    assert target.read_bytes() == b"{}\n"
    assert mode(target) == DEFAULT_MODE == 0o644
    assert os.listdir(tmp_path) == ["out.json"]


def test_a_replaced_file_keeps_its_mode_unless_one_is_given(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_bytes(b"old")
    target.chmod(0o600)
    write_atomic(target, b"new")
    assert (target.read_bytes(), mode(target)) == (b"new", 0o600)
    write_atomic(target, b"newer", mode=0o640)
    assert (target.read_bytes(), mode(target)) == (b"newer", 0o640)


def test_a_failed_write_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # os.replace cannot put a file over a folder
    (target / "inside").write_bytes(b"kept")
    with pytest.raises(OSError):
        write_atomic(target, b"data")
    assert sorted(os.listdir(tmp_path)) == ["taken"]
    assert (target / "inside").read_bytes() == b"kept"


def test_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "nope" / "out", b"x")


def test_importing_it_loads_only_os_level_modules() -> None:
    code = (
        "import sys; before = set(sys.modules); import ci_evals.fs.atomic; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    heavy = [name for name in out if name.split(".")[0] in ("pydantic", "json", "yaml", "pathlib")]
    assert heavy == [], out
