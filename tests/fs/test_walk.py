"""`fs.walk.walk`: every entry, links not followed, a stable order, errors by choice."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.fs.walk import walk
from tests.paths import REPO


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


# As root a mode-0 folder is still readable (CAP_DAC_OVERRIDE): the walk runs in a
# child without capabilities (setpriv, util-linux), so the test means the same as
# root (CI) and as a user.
_WALK_WITHOUT_CAPS = """
import json, sys
from ci_evals.fs.walk import walk
options = json.loads(sys.argv[2])
try:
    print(json.dumps([[rel, kind] for rel, kind, _ in walk(sys.argv[1], **options)]))
except PermissionError:
    print("PermissionError")
"""


def _listing_without_capabilities(top: Path, **options: bool) -> object:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "needs setpriv (util-linux): apt-get install util-linux"
    done = subprocess.run(
        [setpriv, "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c",
         _WALK_WITHOUT_CAPS, str(top), json.dumps(options)],
        capture_output=True, text=True, check=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    out = done.stdout.strip()
    return out if out == "PermissionError" else [tuple(item) for item in json.loads(out)]


def test_an_unreadable_folder_raises_unless_skipped(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir()
    (closed / "secret").write_text("s")
    closed.chmod(0)
    try:
        assert _listing_without_capabilities(tmp_path, skip_vanished=True) == "PermissionError"
        assert _listing_without_capabilities(tmp_path, skip_unreadable=True) == [("closed", "dir")]
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


# -- follow_links: the view of a link-following copy (digest, copyable) -----------


def test_following_links_enters_linked_folders_in_and_out_of_the_tree(tmp_path: Path) -> None:
    outside = tmp_path / "shared"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "x.md").write_text("x")
    top = tmp_path / "plugin"
    (top / "real").mkdir(parents=True)
    (top / "real" / "a.md").write_text("a")
    (top / "out").symlink_to(outside)  # out of the tree
    (top / "in").symlink_to("real")  # within it
    (top / "file-link").symlink_to("real/a.md")
    assert sorted(listing(top, follow_links=True)) == [
        ("file-link", "file"),
        ("in", "dir"),
        ("in/a.md", "file"),
        ("out", "dir"),
        ("out/deep", "dir"),
        ("out/deep/x.md", "file"),
        ("real", "dir"),
        ("real/a.md", "file"),
    ]
    # Not following, the same tree is three links and one folder.
    assert [k for r, k in sorted(listing(top)) if "/" not in r] == ["link", "link", "link", "dir"]


def test_following_links_ends_on_loops_and_names_them(tmp_path: Path) -> None:
    top = tmp_path / "plugin"
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "up").symlink_to("../..")  # back to the top
    (top / "a" / "self").symlink_to(".")
    (top / "one").symlink_to("two")  # a loop of links: cannot be followed at all
    (top / "two").symlink_to("one")
    (top / "gone").symlink_to("missing")
    assert sorted(listing(top, follow_links=True)) == [
        ("a", "dir"),
        ("a/b", "dir"),
        ("a/b/up", "loop"),
        ("a/self", "loop"),
        ("gone", "link"),
        ("one", "link"),
        ("two", "link"),
    ]


def test_a_sibling_link_to_a_folder_is_not_a_loop(tmp_path: Path) -> None:
    top = tmp_path / "plugin"
    (top / "skills" / "s").mkdir(parents=True)
    (top / "skills" / "s" / "SKILL.md").write_text("s")
    (top / "agents").mkdir()
    (top / "agents" / "s").symlink_to("../skills/s")  # the same folder twice, no cycle
    assert ("agents/s/SKILL.md", "file") in listing(top, follow_links=True)
