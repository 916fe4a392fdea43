"""Selection sees what the run will read: files git applies at checkout, links
followed as the runner's copies follow them, history a force-push rewrote.

Each test builds a real repository; each case gave `none` (or too late a stage)
before the rule existed (issue 19, "Selection: judge what the run will read").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ci_evals.main import main
from tests.conftest import git
from tests.stage_repo import branch, commit, compute, plugin_repo, write


@pytest.mark.parametrize(
    "path",
    [
        ".gitattributes",
        "plugin/.gitattributes",
        "plugin/skills/.gitattributes",
        ".gitmodules",
        ".lfsconfig",
        "fixtures/.gitattributes",
    ],
)
def test_a_file_git_applies_at_checkout_runs_everything(repo: Path, path: str) -> None:
    base = plugin_repo(repo)
    branch(repo)
    write(repo, path, "*.json working-tree-encoding=UTF-16LE-BOM\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (1, "global-file")
    assert chosen.decided_by is not None and chosen.decided_by.path == path
    assert "checking files out" in chosen.detail


def test_a_gitattributes_beside_the_plugin_is_not_global(repo: Path) -> None:
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "docs/.gitattributes", "*.md text\n")
    commit(repo)
    assert compute(repo, base).from_stage is None


def _force_pushed(repo: Path) -> tuple[str, str]:
    """`old` changed a stage-1 file; the force-pushed `new` drops that commit and
    changes a stage-3 file instead. The merge base diff sees only the stage-3 file,
    but the tree CI last ran (old) differs from new in the stage-1 file too."""
    plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/agents/researcher.md", "tried\n")
    old = commit(repo, "old tip")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    write(repo, "plugin/commands/generate.md", "v2\n")
    return old, commit(repo, "new tip")


@pytest.mark.parametrize("forced", [True, False])
def test_a_force_push_also_diffs_the_two_tips(
    repo: Path,
    forced: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`forced` in the payload, or (without it) `before` not an ancestor of `after`."""
    old, new = _force_pushed(repo)
    event = repo.parent / "event.json"
    payload: dict[str, object] = {"before": old, "after": new}
    if forced:
        payload["forced"] = True
    event.write_text(json.dumps(payload), encoding="utf-8")
    monkeypatch.chdir(repo)
    for name, value in (
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_EVENT_NAME", "push"),
        ("GITHUB_EVENT_PATH", str(event)),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)

    assert main(["compute-stage", "--explain", "--deepen", "0"]) == 0

    out = capsys.readouterr().out
    assert "answer:   run from stage 1" in out
    assert "history rewritten" in out
    assert "plugin/agents/researcher.md" in out


def test_a_pull_request_base_that_moved_on_is_not_a_rewrite(repo: Path) -> None:
    """BASE not an ancestor of HEAD is the usual pull request: merge base only."""
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "plugin/commands/generate.md", "v2\n")
    commit(repo)
    git(repo, "checkout", "-q", "main")
    write(repo, "plugin/agents/researcher.md", "v2\n")
    main_tip = commit(repo)
    git(repo, "checkout", "-q", "feature")
    assert main_tip != base
    chosen = compute(repo, main_tip)
    assert chosen.from_stage == 3
    assert not any("rewritten" in note for note in chosen.notes)


def _link(repo: Path, path: str, target: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, repo / path)


def test_a_plugin_file_linking_out_of_root_changes_with_its_target(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin copy follows the link: editing only the target is a stage-3 change."""
    write(repo, "shared/generate.md", "v1\n")
    _link(repo, "plugin/commands/linked.md", "../../shared/generate.md")
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "shared/generate.md", "v2\n")
    commit(repo)
    monkeypatch.chdir(repo)

    assert main(["compute-stage", base]) == 0

    out, err = capsys.readouterr()
    assert out == "3\n"
    assert "(link-target-changed): plugin/commands/linked.md: " in err
    assert "'shared/generate.md' changed" in err


def test_a_fixture_folder_that_is_a_link_changes_with_what_is_under_its_target(
    repo: Path,
) -> None:
    write(repo, "shared/plan/outline.md", "v1\n")
    _link(repo, "fixtures/2-plan-output", "../shared/plan")
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "shared/plan/outline.md", "v2\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (3, "link-target-changed")
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == "fixtures/2-plan-output/outline.md"


def test_a_link_inside_root_takes_the_stage_of_the_link(repo: Path) -> None:
    """researcher.md (stage 1) reads commands/generate.md (stage 3): editing it runs 1."""
    base = plugin_repo(repo)
    (repo / "plugin/agents/researcher.md").unlink()
    _link(repo, "plugin/agents/researcher.md", "../commands/generate.md")
    base = commit(repo)
    branch(repo)
    write(repo, "plugin/commands/generate.md", "v2\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (1, "link-target-changed")


def test_folder_links_are_followed_through_the_links_inside_them(repo: Path) -> None:
    """plugin/skills/plan -> ../../vendor/plan, whose SKILL.md -> ../../docs/plan.md."""
    write(repo, "docs/plan.md", "v1\n")
    _link(repo, "vendor/plan/SKILL.md", "../../docs/plan.md")
    plugin_repo(repo)
    (repo / "plugin/skills/plan/SKILL.md").unlink()
    (repo / "plugin/skills/plan").rmdir()
    _link(repo, "plugin/skills/plan", "../../vendor/plan")
    base = commit(repo)
    branch(repo)
    write(repo, "docs/plan.md", "v2\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (2, "link-target-changed")
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == "plugin/skills/plan/SKILL.md"


def test_a_link_out_of_the_repository_always_counts_as_changed(repo: Path) -> None:
    """Its content is not in any commit: any change runs its stage, and says why."""
    _link(repo, "plugin/commands/system.md", "/etc/hostname")
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "src/app.py", "print()\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (3, "link-target-changed")
    assert "outside the repository" in chosen.detail


def test_an_unrelated_change_with_links_present_stays_none(repo: Path) -> None:
    write(repo, "shared/generate.md", "v1\n")
    _link(repo, "plugin/commands/linked.md", "../../shared/generate.md")
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "src/app.py", "print()\n")
    commit(repo)
    assert compute(repo, base).from_stage is None


@pytest.mark.parametrize("root", ["plugin", "evals/plugin"])
def test_a_root_that_is_or_lies_in_a_linked_folder_is_read_through_it(
    repo: Path, root: str
) -> None:
    """`plugin -> vendor/plugin` (or `evals -> vendor` above `evals/plugin`): git names
    the vendor paths, the run reads them as the plugin."""
    plugin_repo(repo)
    (repo / "vendor").mkdir()
    os.rename(repo / "plugin", repo / "vendor/plugin")
    if root == "plugin":
        _link(repo, "plugin", "vendor/plugin")
    else:
        _link(repo, "evals", "vendor")
        text = (repo / "stage_map.yaml").read_text(encoding="utf-8")
        (repo / "stage_map.yaml").write_text(text.replace("root: plugin", f"root: {root}"))
    base = commit(repo)
    branch(repo)
    write(repo, "vendor/plugin/skills/plan/SKILL.md", "v2\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (2, "link-target-changed")
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == f"{root}/skills/plan/SKILL.md"


def test_actions_outputs_name_the_stages_whose_fixture_changed(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stage 1's fixture changed: the run starts at 2 and, on the stub model, never
    grades fixture 1 — the step output says which fixtures CI must grade."""
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "fixtures/1-research-output/notes.md", "broken\n")
    write(repo, "fixtures/scenario-b/3-generate-output/chapter.md", "new\n")
    commit(repo)
    output = repo.parent / "output"
    monkeypatch.chdir(repo)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))

    assert main(["compute-stage", "--explain", base]) == 0

    lines = output.read_text(encoding="utf-8").splitlines()
    assert "from_stage=1" in lines  # fixture 3 of a 3-stage map feeds no stage: all
    assert "fixture_stages=1 3" in lines
    assert "ci-evals check-fixtures --stage 1; ci-evals check-fixtures --stage 3" in (
        capsys.readouterr().out
    )


def test_links_and_targets_with_odd_names_are_followed(repo: Path) -> None:
    """Spaces, non-ASCII and a line break in the folders git is asked about."""
    write(repo, "shared files/é\nx/generate.md", "v1\n")
    _link(repo, "plugin/commands/odd name.md", "../../shared files/é\nx/generate.md")
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "shared files/é\nx/generate.md", "v2\n")
    commit(repo)
    chosen = compute(repo, base)
    # The folder with a line break cannot be asked of `cat-file --batch`: the link
    # cannot be followed, so it counts as changed (fail closed) — stage 3 either way.
    assert (chosen.from_stage, chosen.reason) == (3, "link-target-changed")
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == "plugin/commands/odd name.md"


def test_a_link_target_with_spaces_is_followed_exactly(repo: Path) -> None:
    write(repo, "shared files/a b.md", "v1\n")
    _link(repo, "plugin/commands/odd name.md", "../../shared files/a b.md")
    base = plugin_repo(repo)
    branch(repo)
    write(repo, "shared files/other.md", "unrelated\n")
    commit(repo)
    assert compute(repo, base).from_stage is None  # followed, and its target did not change
