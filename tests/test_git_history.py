"""`ci_evals.git`: revisions, merge bases, shallow clones and the merge-base diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals import git as gitmod
from tests.conftest import git
from tests.stage_repo import commit, sha, write


@pytest.fixture
def history(repo: Path) -> dict[str, str]:
    """base - main1 on main; base - side1 on side."""
    write(repo, "a.txt", "1\n")
    shas = {"base": commit(repo)}
    git(repo, "tag", "-a", "-m", "tagged", "v1")
    git(repo, "checkout", "-q", "-b", "side")
    write(repo, "side.txt")
    shas["side1"] = commit(repo)
    git(repo, "checkout", "-q", "main")
    write(repo, "a.txt", "2\n")
    shas["main1"] = commit(repo)
    return shas


def test_rev_parse(repo: Path, history: dict[str, str]) -> None:
    assert gitmod.rev_parse(repo, "main") == history["main1"]
    assert gitmod.rev_parse(repo, "v1") == history["base"]  # annotated tag peeled
    assert gitmod.rev_parse(repo, "HEAD^{tree}") is None  # a tree is not a commit
    assert gitmod.rev_parse(repo, "nope") is None
    assert gitmod.rev_parse(repo, "--all") is None  # never read as an option


def test_merge_base_and_parents(repo: Path, history: dict[str, str]) -> None:
    assert gitmod.merge_base(repo, "main", "side") == history["base"]
    assert gitmod.parents(repo, history["main1"]) == [history["base"]]
    git(repo, "checkout", "-q", "--orphan", "lonely")
    lonely = commit(repo)
    assert gitmod.merge_bases(repo, "main", lonely) == []
    assert gitmod.merge_base(repo, "main", lonely) is None
    assert gitmod.parse_parents(b"c p1 p2\n") == ["p1", "p2"]


def test_changed_paths_is_from_the_merge_base(repo: Path, history: dict[str, str]) -> None:
    base = gitmod.merge_base(repo, "main", "side")
    assert base is not None
    assert gitmod.changed_paths(repo, base, "side") == ["side.txt"]


def test_changed_paths_lists_both_sides_of_a_rename(repo: Path, history: dict[str, str]) -> None:
    git(repo, "mv", "a.txt", "b.txt")
    moved = commit(repo)
    assert gitmod.changed_paths(repo, history["main1"], moved) == ["a.txt", "b.txt"]


def test_changed_paths_ignores_diff_relative_config(repo: Path, history: dict[str, str]) -> None:
    git(repo, "config", "diff.relative", "true")
    write(repo, "sub/dir/x.txt")
    head = commit(repo)
    result = gitmod.changed_paths(repo / "sub", history["main1"], head)
    assert result == ["sub/dir/x.txt"]


def test_parse_changed_paths() -> None:
    assert gitmod.parse_changed_paths(b"a b\0caf\xc3\xa9\0new\nline\0") == [
        "a b",
        "café",
        "new\nline",
    ]


def test_shallow_clone(tmp_path: Path, repo: Path, history: dict[str, str]) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))

    assert gitmod.is_shallow(clone)
    assert not gitmod.is_shallow(repo)
    assert gitmod.shallow_commits(clone) == {history["main1"]}
    assert gitmod.shallow_commits(repo) == frozenset()
    assert gitmod.parents(clone, "HEAD") == []  # cut at the boundary

    result = gitmod.deepen(clone, 5)

    assert result.returncode == 0
    assert not gitmod.is_shallow(clone)  # the whole (short) history arrived
    assert gitmod.parents(clone, "HEAD") == [history["base"]]


def test_deepen_refuses_a_full_clone(repo: Path, history: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="not a shallow clone"):
        gitmod.deepen(repo, 5)
    assert not gitmod.is_shallow(repo)


def test_deepen_from_an_unreachable_remote_fails(
    tmp_path: Path, repo: Path, history: dict[str, str]
) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    git(clone, "remote", "set-url", "origin", f"file://{tmp_path}/gone")

    result = gitmod.deepen(clone, 5)

    assert result.returncode != 0
    assert result.stderr
    assert gitmod.is_shallow(clone)


def test_run_times_out(repo: Path) -> None:
    result = gitmod.run(repo, "-c", "alias.wait=!sleep 5", "wait", check=False, timeout=0.2)
    assert result.returncode == -1
    assert "timed out" in result.stderr
    with pytest.raises(gitmod.GitError, match="timed out"):
        gitmod.run(repo, "-c", "alias.wait=!sleep 5", "wait", timeout=0.2)


def test_sha_helper_matches(repo: Path, history: dict[str, str]) -> None:
    assert sha(repo, "side") == history["side1"]
