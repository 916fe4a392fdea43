from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals import git as gitmod
from ci_evals.errors import UserError
from tests.conftest import git


def test_split_z_handles_odd_names() -> None:
    raw = b"a b.md\0caf\xc3\xa9.md\0new\nline\0bad\xff\0"
    assert gitmod.split_z(raw) == ["a b.md", "café.md", "new\nline", "bad\udcff"]
    assert gitmod.split_z(b"") == []


def test_ls_files_reads_the_index(repo: Path) -> None:
    (repo / "staged.md").write_text("x")
    (repo / "untracked.md").write_text("x")
    git(repo, "add", "staged.md")
    assert gitmod.ls_files(repo) == ["staged.md"]


def test_toplevel_outside_a_repo(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not inside a git repository"):
        gitmod.toplevel(tmp_path)
