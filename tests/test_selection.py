"""The selection rules and every fallback, on real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals import git as gitmod
from ci_evals import selection
from ci_evals.errors import UserError
from ci_evals.stage_map import load_stage_map
from tests.conftest import git
from tests.stage_repo import commit, plugin_repo, sha, write


def compute(repo: Path, base: str, head: str = "HEAD", tries: int = 0) -> selection.Selection:
    stage_map = load_stage_map(repo / "stage_map.yaml")
    return selection.compute(repo, stage_map, base, head, deepen_tries=tries)


def by_path(chosen: selection.Selection) -> dict[str, tuple[int | None, str | None, str]]:
    return {m.path: (m.stage, m.entry, m.rule) for m in chosen.matches}


def branch(repo: Path, name: str = "feature") -> None:
    git(repo, "checkout", "-q", "-b", name)


# --- The rules -----------------------------------------------------------------


def test_merge_base_diff_ignores_what_main_did_after_branching(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/skills/plan/SKILL.md")
    feature = commit(repo)
    git(repo, "checkout", "-q", "main")
    write(repo, "plugin/agents/researcher.md")  # stage 1, but only on main
    commit(repo)

    chosen = compute(repo, "main", feature)

    assert (chosen.from_stage, chosen.reason, chosen.changed) == (2, "matched", 1)
    assert by_path(chosen) == {"plugin/skills/plan/SKILL.md": (2, "skills/plan/**", "matched")}
    # A two-dot diff would have reported main's stage-1 change.
    assert "plugin/agents/researcher.md" in git(repo, "diff", "--name-only", "main", feature)


def test_lowest_stage_over_every_matching_entry_not_the_last(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/skills/plan/notes.md")  # skills/plan/** (2) and *.md (3)
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason) == (2, "matched")
    assert chosen.decided_by is not None
    assert chosen.decided_by.entry == "skills/plan/**"
    assert "stage_map.yaml:7" in chosen.detail


def test_minimum_over_files(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/commands/generate.md")  # 3
    write(repo, "plugin/skills/plan/SKILL.md")  # 2
    commit(repo)

    chosen = compute(repo, "main")

    assert chosen.from_stage == 2
    assert by_path(chosen)["plugin/commands/generate.md"] == (3, "commands/*.md", "matched")


def test_rename_out_of_root_counts_the_old_path(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    (repo / "docs").mkdir()
    git(repo, "mv", "plugin/agents/researcher.md", "docs/researcher.md")
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason, chosen.changed) == (1, "matched", 2)
    assert by_path(chosen) == {
        "docs/researcher.md": (None, None, "ignored"),
        "plugin/agents/researcher.md": (1, "agents/researcher.md", "matched"),
    }


def test_deletion_counts(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    git(repo, "rm", "-q", "plugin/skills/plan/SKILL.md")
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.changed) == (2, 1)
    assert not (repo / "plugin/skills/plan/SKILL.md").exists()


def test_changed_submodule_gitlink_counts(repo: Path, tmp_path: Path) -> None:
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    write(library, "lib.py", "v1\n")
    commit(library)
    plugin_repo(repo)
    git(
        repo,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(library),
        "plugin/vendor/lib",
    )
    commit(repo, "add submodule")
    branch(repo)
    write(repo / "plugin/vendor/lib", "lib.py", "v2\n")
    commit(repo / "plugin/vendor/lib", "library v2")
    commit(repo, "bump submodule")
    # Config that would hide submodule changes from a plain `git diff`.
    git(repo, "config", "diff.ignoreSubmodules", "all")

    chosen = compute(repo, "main")

    assert by_path(chosen) == {"plugin/vendor/lib": (1, None, "unmatched-file")}
    assert (chosen.from_stage, chosen.reason) == (1, "unmatched-file")


def test_names_with_spaces_non_ascii_and_newlines(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/commands/with space.md")
    write(repo, "plugin/agents/résumé.md")
    write(repo, "plugin/skills/plan/new\nline.md")
    commit(repo)

    chosen = compute(repo, "main")

    assert by_path(chosen) == {
        "plugin/agents/résumé.md": (1, "agents/résumé.md", "matched"),
        "plugin/commands/with space.md": (3, "commands/*.md", "matched"),
        "plugin/skills/plan/new\nline.md": (2, "skills/plan/**", "matched"),
    }
    assert chosen.from_stage == 1


def test_unmatched_file_under_root_runs_stage_one(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/agents/helper.py")
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason) == (1, "unmatched-file")
    assert chosen.matches[0].entry is None
    assert "no entry covers it" in chosen.detail


def test_global_file_runs_stage_one_and_wins_ties(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/agents/researcher.md")  # stage 1 by an entry
    write(repo, "ci-evals.yaml", "suite: y\n")  # stage 1 as a global file
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason) == (1, "global-file")
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == "ci-evals.yaml"


def test_the_map_itself_is_global(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    text = (repo / "stage_map.yaml").read_text(encoding="utf-8")
    write(repo, "stage_map.yaml", text + "# comment\n")
    commit(repo)

    assert compute(repo, "main").reason == "global-file"


@pytest.mark.parametrize(
    ("path", "stage", "why"),
    [
        ("fixtures/1-research-output/notes.md", 2, "fixture 1 is what stage 2 starts from"),
        ("fixtures/2-plan-output/plan.md", 3, "fixture 2 is what stage 3 starts from"),
        ("fixtures/0-inputs/brief.md", 1, "fixture 0 is what stage 1 starts from"),
        # The last stage's output feeds no stage: unknown, so fail closed.
        ("fixtures/3-generate-output/x.md", 1, "the map has 3 stages"),
        ("fixtures/README.md", 1, "not inside a fixtures/<k>-<stage>/ folder"),
        ("fixtures/plan-output/x.md", 1, "not inside a fixtures/<k>-<stage>/ folder"),
    ],
)
def test_fixture_change(repo: Path, path: str, stage: int, why: str) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, path)
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason) == (stage, "fixture-changed")
    assert why in chosen.detail


def test_nothing_relevant(repo: Path) -> None:
    plugin_repo(repo)
    branch(repo)
    write(repo, "README.md")
    write(repo, "src/app.py")
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason, chosen.changed) == (None, "no-relevant-change", 2)
    assert [m.stage for m in chosen.matches] == [None, None]


def test_pure_select_ties_pick_the_first_path(repo: Path) -> None:
    plugin_repo(repo)
    stage_map = load_stage_map(repo / "stage_map.yaml")
    matcher = selection.GlobMatcher(stage_map.globs)

    chosen = selection.select(
        stage_map,
        matcher,
        ["plugin/skills/plan/b.md", "plugin/skills/plan/a.md", "outside.txt"],
    )

    assert chosen.decided_by is not None
    assert chosen.decided_by.path == "plugin/skills/plan/a.md"
    assert chosen.changed == 3


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
