"""`fs.walk.walk`: every entry, links not followed, a stable order, errors by choice."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ci_evals.fs.walk import walk


def listing(top: Path, **options: object) -> list[tuple[str, str]]:
    return [(rel, kind) for rel, kind, _ in walk(top, **options)]  # type: ignore[arg-type]


def test_kinds_and_order_folders_first_by_name(tmp_path: Path) -> None:
    (tmp_path / "b" / "d").mkdir(parents=True)
    (tmp_path / "b" / "d" / "deep.txt").write_text("x")
    (tmp_path / "b" / "z.txt").write_text("z")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "in.txt").write_text("c")
    os.symlink("b", tmp_path / "link-to-b")
    os.symlink("nowhere", tmp_path / "dangling")
    assert listing(tmp_path) == [
        ("a.txt", "file"),
        ("b", "dir"),
        ("c", "dir"),
        ("dangling", "link"),
        ("link-to-b", "link"),  # never followed: nothing under it
        ("b/d", "dir"),
        ("b/z.txt", "file"),
        ("b/d/deep.txt", "file"),
        ("c/in.txt", "file"),
    ]


def test_entries_carry_path_and_lstat(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"12345")
    os.symlink("f", tmp_path / "l")
    found = {rel: entry for rel, _, entry in walk(tmp_path)}
    assert found["f"].path == str(tmp_path / "f")
    assert found["f"].stat(follow_symlinks=False).st_size == 5
    assert found["l"].stat(follow_symlinks=False).st_size == 1  # the link itself


def test_other_kinds_are_named_other(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        assert listing(tmp_path) == [("pipe", "other"), ("sock", "other")]


def test_exclude_leaves_out_files_and_folders(tmp_path: Path) -> None:
    (tmp_path / "skip").mkdir()
    (tmp_path / "skip" / "x").write_text("x")
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "x").write_text("x")
    (tmp_path / "keep" / "y").write_text("y")
    assert listing(tmp_path, exclude={"skip", "keep/y"}) == [("keep", "dir"), ("keep/x", "file")]


def test_a_missing_top_raises_unless_vanished_folders_are_skipped(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        listing(tmp_path / "gone")
    assert listing(tmp_path / "gone", skip_vanished=True) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_an_unreadable_folder_raises_unless_skipped(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "secret").write_text("s")
    closed.chmod(0)
    try:
        with pytest.raises(PermissionError):
            listing(tmp_path, skip_vanished=True)
        assert listing(tmp_path, skip_unreadable=True) == [("closed", "dir")]
    finally:
        closed.chmod(0o755)


def test_a_deep_tree_needs_no_recursion(tmp_path: Path) -> None:
    depth = 1100  # deeper than Python's recursion limit, within PATH_MAX
    folders = [str(tmp_path)]
    for _ in range(depth):
        folders.append(os.path.join(folders[-1], "d"))
        os.mkdir(folders[-1])
    try:
        found = [(rel, kind) for rel, kind, _ in walk(tmp_path)]
        assert len(found) == depth
        assert found[-1] == ("/".join(["d"] * depth), "dir")
    finally:  # bottom-up: pytest's own clean-up (shutil.rmtree) recurses
        for folder in reversed(folders[1:]):
            os.rmdir(folder)
