"""The git half of compute-stage: fallbacks, shallow clones, the chunked diff."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ci_evals import git as gitmod
from ci_evals.errors import UserError
from ci_evals.selection import diff as diff_range
from tests.conftest import git
from tests.stage_repo import branch, by_path, commit, compute, plugin_repo, sha, write

# --- Fallbacks -------------------------------------------------------------------


def test_base_that_does_not_resolve(repo: Path) -> None:
    plugin_repo(repo)
    for base in ("origin/nope", "1234567890abcdef1234567890abcdef12345678", "-n"):
        chosen = compute(repo, base)
        assert (chosen.from_stage, chosen.reason, chosen.changed) == (1, "base-missing", 0)


def test_base_that_is_a_tree_not_a_commit(repo: Path) -> None:
    plugin_repo(repo)
    assert compute(repo, "HEAD^{tree}").reason == "base-missing"


def test_zero_sha(repo: Path) -> None:
    plugin_repo(repo)
    chosen = compute(repo, "0" * 40)
    assert (chosen.from_stage, chosen.reason) == (1, "base-zero-sha")


def test_base_equals_head(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    chosen = compute(repo, "main")  # the new branch points where main does
    assert (chosen.from_stage, chosen.reason, chosen.changed) == (None, "base-equals-head", 0)


def test_unrelated_histories_have_no_merge_base(repo: Path) -> None:
    plugin_repo(repo)
    git(repo, "checkout", "-q", "--orphan", "other")
    write(repo, "plugin/commands/generate.md")
    commit(repo)

    chosen = compute(repo, "main", tries=3)

    assert (chosen.from_stage, chosen.reason) == (1, "no-merge-base")
    assert "share no history" in chosen.detail
    assert chosen.notes == ()  # a full clone is never fetched into
    assert not gitmod.is_shallow(repo)


def test_head_that_does_not_resolve_is_a_user_error(repo: Path) -> None:
    plugin_repo(repo)
    with pytest.raises(UserError, match="names no commit"):
        compute(repo, "main", "no-such-branch")


def test_criss_cross_merge_uses_every_merge_base(repo: Path) -> None:
    plugin_repo(repo)
    git(repo, "branch", "x")
    git(repo, "branch", "y")
    git(repo, "checkout", "-q", "x")
    write(repo, "plugin/skills/plan/SKILL.md")
    x1 = commit(repo, "x1")
    git(repo, "checkout", "-q", "y")
    write(repo, "plugin/commands/generate.md")
    y1 = commit(repo, "y1")
    git(repo, "merge", "-q", "--no-edit", x1)
    git(repo, "checkout", "-q", "x")
    git(repo, "merge", "-q", "--no-edit", y1)
    x2 = sha(repo, "HEAD")
    git(repo, "checkout", "-q", "y")
    write(repo, "plugin/agents/helper.txt")
    commit(repo, "y3")

    chosen = compute(repo, x2)

    assert sorted(chosen.merge_bases) == sorted([x1, y1])
    # From x1 the diff shows y1's change, from y1 it shows x1's: both counted.
    assert set(by_path(chosen)) == {
        "plugin/agents/helper.txt",
        "plugin/commands/generate.md",
        "plugin/skills/plan/SKILL.md",
    }


# --- Shallow clones ------------------------------------------------------------


@pytest.fixture
def origin(tmp_path: Path) -> dict[str, str]:
    """A repository to clone: main moved on (stage 1) after `feature` branched (stage 2).

        P0 - P - M1 - M2      main
              \\
               F1 - F2        feature
    """
    src = tmp_path / "origin"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    shas = {"P0": commit(src, "empty root"), "P": plugin_repo(src)}
    git(src, "checkout", "-q", "-b", "feature")
    write(src, "plugin/skills/plan/SKILL.md", "v2\n")
    shas["F1"] = commit(src)
    write(src, "plugin/skills/plan/SKILL.md", "v3\n")
    shas["F2"] = commit(src)
    git(src, "checkout", "-q", "main")
    write(src, "plugin/agents/researcher.md", "v2\n")
    shas["M1"] = commit(src)
    write(src, "README.md", "v2\n")
    shas["M2"] = commit(src)
    shas["url"] = f"file://{src}"
    return shas


def clone(tmp_path: Path, url: str, *args: str) -> Path:
    target = tmp_path / "clone"
    git(tmp_path, "clone", "-q", *args, url, str(target))
    return target


def test_shallow_without_merge_base_falls_back(tmp_path: Path, origin: dict[str, str]) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "1", "--no-single-branch", "-b", "feature")

    chosen = compute(work, "origin/main", tries=0)

    assert (chosen.from_stage, chosen.reason) == (1, "no-merge-base")
    assert "--deepen 0" in chosen.detail
    assert gitmod.shallow_commits(work) == {origin["M2"], origin["F2"]}


def test_shallow_deepens_until_the_merge_base_is_known(
    tmp_path: Path, origin: dict[str, str]
) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "1", "--no-single-branch", "-b", "feature")

    chosen = compute(work, "origin/main", tries=3)

    assert (chosen.from_stage, chosen.reason, chosen.changed) == (2, "matched", 1)
    assert chosen.merge_bases == (origin["P"],)
    assert chosen.notes == ("deepened the shallow clone by 50 commits",)


def test_deepening_an_unreachable_remote_falls_back(tmp_path: Path, origin: dict[str, str]) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "1", "--no-single-branch", "-b", "feature")
    git(work, "remote", "set-url", "origin", f"file://{tmp_path}/gone")

    chosen = compute(work, "origin/main", tries=3)

    assert (chosen.from_stage, chosen.reason) == (1, "no-merge-base")
    assert len(chosen.notes) == 1
    assert "git fetch --deepen=50 failed" in chosen.notes[0]
    assert gitmod.is_shallow(work)


def test_merge_base_on_the_shallow_boundary_is_unknown(
    tmp_path: Path, origin: dict[str, str]
) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "3", "--no-single-branch", "-b", "feature")
    # git itself answers P, but P's parent is cut off: that answer is a guess.
    assert gitmod.merge_base(work, "origin/main", "HEAD") == origin["P"]
    assert origin["P"] in gitmod.shallow_commits(work)

    unknown = compute(work, "origin/main", tries=0)
    known = compute(work, "origin/main", tries=1)

    assert (unknown.from_stage, unknown.reason) == (1, "no-merge-base")
    assert "shallow clone's boundary" in unknown.detail
    assert (known.from_stage, known.reason) == (2, "matched")


def test_shallow_base_missing_until_deepened(tmp_path: Path, origin: dict[str, str]) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "1", "-b", "feature")

    missing = compute(work, origin["P"], tries=0)
    found = compute(work, origin["P"], tries=2)

    assert (missing.from_stage, missing.reason) == (1, "base-missing")
    assert (found.from_stage, found.reason) == (2, "matched")


# --- The chunked diff ----------------------------------------------------------

ODD_NAMES = ["a b", "*", "[x]", ":colon", "-dash", "new\nline", "ü", "x?", "!bang"]


def wide_change(repo: Path, *, type_change: bool = False) -> None:
    """main, then a branch that changes many entries of plugin/ in many ways."""
    for name in [*ODD_NAMES, *(f"d{i:02}" for i in range(12))]:
        write(repo, f"plugin/{name}/f.md", "1\n")
    write(repo, "plugin/gone/f.md")
    write(repo, "plugin/to-folder", "a file\n")
    write(repo, "plugin/top.md")
    commit(repo, "wide base")
    branch(repo)
    for name in [*ODD_NAMES, *(f"d{i:02}" for i in range(0, 12, 2))]:
        write(repo, f"plugin/{name}/f.md", "2\n")
        write(repo, f"plugin/{name}/deeper/g.md", "new\n")
    git(repo, "rm", "-rq", "plugin/gone")
    if type_change:
        git(repo, "rm", "-q", "plugin/to-folder")
        write(repo, "plugin/to-folder/now.md")  # a file became a folder
    write(repo, "plugin/added/h.md")
    write(repo, "plugin/top.md", "2\n")
    commit(repo, "wide change")


def chunks(repo: Path, **limits: int) -> list[list[str]]:
    change = diff_range.resolve(repo, "main", "HEAD", deepen_tries=0)
    assert isinstance(change, diff_range.Range)
    return list(diff_range.diff_chunks(repo, change, **limits))


def test_chunked_diff_is_exactly_the_whole_diff(repo: Path) -> None:
    plugin_repo(repo)
    wide_change(repo)
    whole = gitmod.changed_paths(repo, sha(repo, "main"), sha(repo, "HEAD"))

    split = chunks(repo, min_entries=4)

    assert diff_range._plan(repo, sha(repo, "main"), sha(repo, "HEAD"), 4) is not None
    assert [path for chunk in split for path in chunk] == whole
    assert "plugin/new\nline/deeper/g.md" in whole
    assert "plugin/gone/f.md" in whole
    assert "plugin/added/h.md" in whole


def test_submodule_changes_are_listed_in_a_streamed_diff(repo: Path) -> None:
    plugin_repo(repo)
    gitlinks = ("plugin/d03/sub", "plugin/vendored")  # inside a folder, and at the split
    for path in gitlinks:  # as submodules that are not checked out: empty folders
        (repo / path).mkdir(parents=True)
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'a' * 40},{path}")
    write(repo, ".gitmodules", '[submodule "s"]\n\tpath = plugin/d03/sub\n\tignore = all\n')
    commit(repo, "submodules")
    wide_change(repo)
    for path in gitlinks:
        git(repo, "update-index", "--cacheinfo", f"160000,{'b' * 40},{path}")
    git(repo, "commit", "-qm", "bump both")
    git(repo, "config", "diff.ignoreSubmodules", "all")
    whole = gitmod.changed_paths(repo, sha(repo, "main"), sha(repo, "HEAD"))

    split = chunks(repo, min_entries=4)

    assert diff_range._plan(repo, sha(repo, "main"), sha(repo, "HEAD"), 4) is not None
    assert set(gitlinks) <= set(whole)
    assert [path for chunk in split for path in chunk] == whole


def test_a_file_that_became_a_folder_is_listed_where_git_lists_it(repo: Path) -> None:
    plugin_repo(repo)
    wide_change(repo, type_change=True)
    write(repo, "plugin/to-folder-2", "sorts between the file and the folder\n")
    commit(repo)
    whole = gitmod.changed_paths(repo, sha(repo, "main"), sha(repo, "HEAD"))

    split = chunks(repo, min_entries=4)

    # The tree lists `to-folder` twice: the file gone, the folder new (an empty old side).
    assert [path for chunk in split for path in chunk] == whole
    assert whole.index("plugin/to-folder") < whole.index("plugin/to-folder-2")
    assert whole.index("plugin/to-folder-2") < whole.index("plugin/to-folder/now.md")


def test_chunks_split_at_the_top_when_more_than_the_plugin_changed(repo: Path) -> None:
    plugin_repo(repo)
    wide_change(repo)
    for i in range(6):
        write(repo, f"other{i}/x.txt")
    write(repo, "0-first.txt")
    commit(repo)
    whole = gitmod.changed_paths(repo, sha(repo, "main"), sha(repo, "HEAD"))

    split = chunks(repo, min_entries=4)

    assert [path for chunk in split for path in chunk] == whole
    assert split[0] == ["0-first.txt"]  # a file before the first folder comes at once


def test_small_change_is_one_diff(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    for name in ("agents/a.md", "skills/plan/b.md", "commands/c.md"):
        write(repo, f"plugin/{name}")
    commit(repo)
    assert len(chunks(repo)) == 1  # 3 changed entries: under the default threshold


def diff_tree_entries(repo: Path, folder: str) -> list[tuple[str, ...]]:
    """git's own answer: `git diff-tree -z` (raw) of main and HEAD at `folder`."""
    trees = [f"{rev}:{folder}" if folder else f"{rev}^{{tree}}" for rev in ("main", "HEAD")]
    parts = git(repo, "diff-tree", "-z", "--no-renames", *trees).split("\0")[:-1]
    metas = [meta[1:].split() for meta in parts[::2]]  # `:MODE MODE OID OID STATUS`
    return [
        (meta[0], meta[2], meta[1], meta[3], name)
        for meta, name in zip(metas, parts[1::2], strict=True)
    ]


def test_changed_entries_are_diff_trees_entries(repo: Path) -> None:
    plugin_repo(repo)
    wide_change(repo, type_change=True)  # a file became a folder: listed twice
    git(repo, "rm", "-rq", "plugin/d01")
    write(repo, "plugin/d01", "a folder became a file\n")
    write(repo, "plugin/top.md", "exec\n")
    (repo / "plugin/top.md").chmod(0o755)  # a mode change alone
    (repo / "plugin/link").symlink_to("top.md")
    write(repo, "plugin/a-b", "sorts between 'a' and 'a/'\n")
    write(repo, "plugin/a/x.md")
    commit(repo, "more kinds of change")
    main, head = sha(repo, "main"), sha(repo, "HEAD")

    for folder in ("", "plugin"):
        expected = diff_tree_entries(repo, folder)
        got = gitmod.changed_entries(repo, main, head, f"{folder}/" if folder else "")
        assert got == expected
    kinds = {(e.old_mode, e.new_mode) for e in got if e.name == "to-folder"}  # type: ignore[union-attr]
    assert kinds == {("100644", "000000"), ("000000", "040000")}
    assert gitmod.changed_entries(repo, main, head, "no-such-folder/") is None


_NAME = st.text(alphabet="ab*?[]:! -é\n", min_size=1, max_size=3).filter(
    lambda n: n not in (".", "..") and not n.startswith(" ") and not n.endswith(" ")
)
_PATH = st.lists(_NAME, min_size=1, max_size=3).map("/".join)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    before=st.sets(_PATH, min_size=1, max_size=25),
    after=st.sets(_PATH, min_size=1, max_size=25),
    prefix=st.sampled_from(["", "plugin/", "plugin/deep/"]),
)
def test_chunks_always_concatenate_to_the_whole_diff(
    tmp_path_factory: pytest.TempPathFactory, before: set[str], after: set[str], prefix: str
) -> None:
    """Property: for any two trees, the chunks are exactly git's own diff, in order."""
    repo = tmp_path_factory.mktemp("prop")
    git(repo, "init", "-q", "-b", "main")
    files = _consistent({prefix + p for p in before})
    for path in files:
        write(repo, path, "v1\n")
    commit(repo, "before")
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "rm", "-rq", "--ignore-unmatch", ".")
    for path in _consistent({prefix + p for p in after}):
        write(repo, path, "v2\n" if path in files else "v1\n")
    commit(repo, "after")
    whole = gitmod.changed_paths(repo, sha(repo, "main"), sha(repo, "HEAD"))

    split = chunks(repo, min_entries=2)

    event(f"chunks: {min(len(split), 3)}")
    assert [path for chunk in split for path in chunk] == whole
    # The folder of `prefix` holds files in both commits, so both trees exist.
    got = gitmod.changed_entries(repo, sha(repo, "main"), sha(repo, "HEAD"), prefix)
    assert got == diff_tree_entries(repo, prefix.rstrip("/"))


def _consistent(paths: set[str]) -> list[str]:
    """Drop paths that would need a file and a folder of the same name."""
    kept: list[str] = []
    taken: set[str] = set()
    folders: set[str] = set()
    for path in sorted(paths, key=len):
        parts = path.split("/")
        ancestors = {"/".join(parts[:i]) for i in range(1, len(parts))}
        if path in folders or ancestors & taken:
            continue
        kept.append(path)
        taken.add(path)
        folders |= ancestors
    return kept
