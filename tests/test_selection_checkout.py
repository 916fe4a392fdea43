"""Selection sees what the run will read: files git applies at checkout, links
followed as the runner's copies follow them, history a force-push rewrote.

Each test builds a real repository; each case gave `none` (or too late a stage)
before the rule existed (issue 19, "Selection: judge what the run will read").
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
