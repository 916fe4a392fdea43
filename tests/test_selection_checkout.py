"""Selection sees what the run will read: files git applies at checkout, links
followed as the runner's copies follow them, history a force-push rewrote.

Each test builds a real repository; each case gave `none` (or too late a stage)
before the rule existed (issue 19, "Selection: judge what the run will read").
"""

from __future__ import annotations

import json
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
