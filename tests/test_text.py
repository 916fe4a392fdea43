"""`text.one_line`: whitespace folded, long lines cut with the caller's ellipsis;
`text.display_path`: paths in messages relative to the current folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ci_evals.text import display_path, one_line


def test_whitespace_runs_become_one_space() -> None:
    assert one_line("  a\n\tb \r\n c  ") == "a b c"
    assert one_line("") == ""


def test_a_line_within_the_limit_is_kept_whole() -> None:
    assert one_line("abc", 3) == "abc"


def test_a_longer_line_is_cut_to_the_limit_with_the_ellipsis() -> None:
    assert one_line("abcdefgh", 6) == "abc..."
    assert one_line("abcdefgh", 6, ellipsis="…") == "abcde…"
    assert len(one_line("x " * 400, 300)) == 300


def test_a_path_below_the_current_folder_is_relative(tmp_path: Path) -> None:
    here = str(tmp_path / "repo")
    assert display_path(tmp_path / "repo" / "evals" / "ci-evals.yaml", here) == (
        "evals/ci-evals.yaml"
    )
    assert display_path(tmp_path / "repo", here) == "."


def test_a_path_beside_it_in_the_same_work_tree_climbs_as_git_does(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    here = str(tmp_path / "repo" / "plugin")
    assert display_path(tmp_path / "repo" / "stage_map.yaml", here) == "../stage_map.yaml"


def test_a_path_outside_the_work_tree_stays_absolute_wherever_it_was_cloned(
    tmp_path: Path,
) -> None:
    """A clone under /tmp and pytest's temp folders share /tmp: the message still
    names the temp file absolutely, as it does from a clone anywhere else."""
    (tmp_path / "clone" / ".git").mkdir(parents=True)
    here = str(tmp_path / "clone")
    elsewhere = tmp_path / "pytest-of-root" / "suite" / "ci-evals.yaml"
    assert display_path(elsewhere, here) == str(elsewhere)
    assert display_path(tmp_path / "clone" / "a.md", here) == "a.md"


def test_a_path_sharing_only_the_root_stays_absolute() -> None:
    assert display_path("/tmp/ci-evals-x/workspace", "/work/repo") == "/tmp/ci-evals-x/workspace"
    assert display_path("/tmp/x", "/") == "tmp/x"


def test_relative_input_is_read_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert display_path("a/../b/./c.md") == "b/c.md"
    assert display_path(Path("ci-evals.yaml")) == "ci-evals.yaml"
    assert display_path(tmp_path / "x") == "x"
    assert display_path(os.fspath(tmp_path.parent)) == os.fspath(tmp_path.parent)  # no repo
