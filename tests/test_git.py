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


def test_ls_files_under_equals_filtering_the_whole_index(repo: Path) -> None:
    names = [
        "plugin/a b.md",
        "plugin/caf\u00e9/x.md",
        "plugin/new\nline.md",
        "pluginx/y.md",
        "z.md",
    ]
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x")
    git(repo, "add", ".")
    (repo / "plugin" / "untracked.md").write_text("x")
    expected = [p.removeprefix("plugin/") for p in gitmod.ls_files(repo) if p.startswith("plugin/")]
    assert gitmod.ls_files_under(repo, "plugin") == expected
    assert sorted(expected) == ["a b.md", "caf\u00e9/x.md", "new\nline.md"]
    assert gitmod.ls_files_under(repo, "") == gitmod.ls_files(repo)


def test_ls_files_under_a_symlinked_folder_lists_what_the_index_has_there(repo: Path) -> None:
    (repo / "real").mkdir()
    (repo / "real" / "a.md").write_text("x")
    (repo / "plugin").symlink_to("real")
    git(repo, "add", ".")
    # The index holds `plugin` as one symlink entry; nothing is under `plugin/`.
    assert gitmod.ls_files_under(repo, "plugin") == []
    assert gitmod.ls_files_under(repo, "real") == ["a.md"]
