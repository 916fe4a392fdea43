"""`tree_sha256` and `copy_problem` see a plugin through `fs.walk(follow_links=True)`."""

from __future__ import annotations

import os
from pathlib import Path

from ci_evals.fs.copyable import copy_problem
from ci_evals.fs.digest import tree_sha256


def _plugin(tmp_path: Path) -> Path:
    top = tmp_path / "plugin"
    (top / "commands").mkdir(parents=True)
    (top / "commands" / "a.md").write_text("a")
    return top


def test_the_digest_follows_links_in_and_out_of_the_tree(tmp_path: Path) -> None:
    top = _plugin(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "b.md").write_text("b")
    before = tree_sha256(top)
    (top / "skills").symlink_to(shared)
    linked = tree_sha256(top)
    assert linked != before
    (shared / "b.md").write_text("changed")  # content behind a link counts
    changed = tree_sha256(top)
    assert changed != linked
    # The same files as real folders digest the same as through the link.
    os.unlink(top / "skills")
    (top / "skills").mkdir()
    (top / "skills" / "b.md").write_text("changed")
    assert tree_sha256(top) == changed


def test_the_digest_ends_on_a_loop_and_counts_it(tmp_path: Path) -> None:
    top = _plugin(tmp_path)
    before = tree_sha256(top)
    (top / "commands" / "up").symlink_to("..")
    up = tree_sha256(top)  # ends: the loop is not entered
    assert up != before  # but a plugin with a loop is not the plugin without it
    os.unlink(top / "commands" / "up")
    (top / "commands" / "up").symlink_to("../..")
    assert tree_sha256(top) not in (before, up)  # nor one with another loop
    os.unlink(top / "commands" / "up")
    assert tree_sha256(top) == before


def test_copy_problem_names_a_loop_a_dangling_link_and_a_pipe(tmp_path: Path) -> None:
    top = _plugin(tmp_path)
    assert copy_problem(top) is None
    (top / "commands" / "up").symlink_to("..")
    path, problem = copy_problem(top) or ("", "")
    assert path.endswith("commands/up") and "a folder it is inside" in problem
    os.unlink(top / "commands" / "up")
    (top / "gone").symlink_to("missing")
    path, problem = copy_problem(top) or ("", "")
    assert path.endswith("gone") and "missing" in problem
    os.unlink(top / "gone")
    os.mkfifo(top / "pipe")
    path, problem = copy_problem(top) or ("", "")
    assert path.endswith("pipe") and "only files, folders and links" in problem


def test_copy_problem_accepts_links_out_of_the_tree(tmp_path: Path) -> None:
    top = _plugin(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "x.md").write_text("x")
    (top / "skills").symlink_to(shared)
    (top / "again").symlink_to("skills")
    assert copy_problem(top) is None
