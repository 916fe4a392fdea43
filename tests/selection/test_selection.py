"""The selection rules, end to end on real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.selection import decide as selection
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git
from tests.stage_repo import branch, by_path, commit, compute, plugin_repo, write

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
    ("globals_", "path"),
    [
        # issue 10: `stub/**` was taken as a literal path and this gave `none`.
        ("[ci-evals.yaml, stub/**]", "stub/feature-dev.yaml"),
        ('["*.lock"]', "deps/uv.lock"),  # a name without a slash: at any depth
        ('["*.lock"]', "plugin/agents/uv.lock"),  # ... also under root (an entry's file)
        ('["plugin/agents/*.md"]', "plugin/agents/researcher.md"),  # under root, anchored
        ('["*/agents/**"]', "plugin/agents/researcher.md"),  # no rewrite for root: per path
        ("[plugin]", "plugin/agents/new.md"),  # the whole root
    ],
)
def test_global_globs_mean_what_entries_globs_mean(repo: Path, globals_: str, path: str) -> None:
    plugin_repo(repo)
    text = (repo / "stage_map.yaml").read_text(encoding="utf-8")
    write(repo, "stage_map.yaml", text.replace("global: [ci-evals.yaml]", f"global: {globals_}"))
    commit(repo)
    branch(repo)
    write(repo, path)
    write(repo, "plugin/commands/generate.md")  # stage 3: not what decides
    commit(repo)

    chosen = compute(repo, "main")

    assert (chosen.from_stage, chosen.reason) == (1, "global-file")
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == path
    assert by_path(chosen)[path] == (1, None, "global-file")


def test_a_global_name_without_a_slash_is_no_longer_only_beside_the_map(repo: Path) -> None:
    """`ci-evals.yaml` matches that name at any depth, as an entry's `README.md` does;
    `/ci-evals.yaml` only the one beside the map."""
    plugin_repo(repo)
    text = (repo / "stage_map.yaml").read_text(encoding="utf-8")
    write(repo, "stage_map.yaml", text.replace("[ci-evals.yaml]", "[/ci-evals.yaml]"))
    commit(repo)
    branch(repo)
    write(repo, "docs/ci-evals.yaml")
    commit(repo)

    assert compute(repo, "main").reason == "no-relevant-change"
    write(repo, "ci-evals.yaml", "suite: z\n")
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
        ("fixtures/README.md", 1, "not inside a fixtures/<k>-<stage>/ (or"),
        ("fixtures/plan-output/x.md", 1, "not inside a fixtures/<k>-<stage>/ (or"),
        # A scenario's own fixtures: fixtures/<scenario>/<k>-<stage>-output/.
        ("fixtures/globex/2-plan-output/plan.md", 3, "fixture 2 is what stage 3 starts from"),
        ("fixtures/globex/3-generate-output/x.md", 1, "the map has 3 stages"),
        ("fixtures/globex/notes.md", 1, "not inside a fixtures/<k>-<stage>/ (or"),
        ("fixtures/globex/drafts/2-plan-output/x.md", 1, "not inside a fixtures/<k>-<stage>/ (or"),
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
    matcher = GlobMatcher(stage_map.globs)

    chosen = selection.select(
        stage_map,
        matcher,
        ["plugin/skills/plan/b.md", "plugin/skills/plan/a.md", "outside.txt"],
    )

    assert chosen.decided_by is not None
    assert chosen.decided_by.path == "plugin/skills/plan/a.md"
    assert chosen.changed == 3
