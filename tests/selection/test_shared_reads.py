"""One change decided for many maps (`git.shared_reads`, what the public-history
replay uses): the same answers as deciding each map alone, with the marketplace
file read once per commit and the tree's links listed once, not once per map.
A real repository; git's invocations counted by a logging `git` on PATH (the
process boundary), never by patching our functions."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ci_evals import git as ci_git
from ci_evals.selection import decide as selection
from ci_evals.selection import diff as diff_range
from ci_evals.selection.stage_map import StageMap, load_stage_map
from tests.conftest import git
from tests.stage_repo import commit, write

PLUGINS = ("alpha", "beta", "gamma")


def _map(name: str) -> str:
    return f"""\
version: 1
root: plugins/{name}
stages: [plan, build]
entries:
  - {{ glob: /commands/plan.md, stage: plan }}
  - {{ glob: /commands/build.md, stage: build }}
  - {{ glob: /shared/**, stage: build }}
  - {{ glob: /.claude-plugin/plugin.json, stage: plan }}
global: []
marketplace: {{ file: /.claude-plugin/marketplace.json, plugin: {name} }}
ignore_metadata: [version, description]
"""


def _market(**beta: object) -> str:
    entries = [{"name": n, "source": f"./plugins/{n}", "version": "1.0.0"} for n in PLUGINS]
    entries[1].update(beta)
    return json.dumps({"name": "m", "owner": {"name": "o"}, "plugins": entries}, indent=2)


@pytest.fixture
def market(repo: Path) -> tuple[Path, dict[str, StageMap]]:
    for name in PLUGINS:
        write(repo, f"stage_map_{name}.yaml", _map(name))
        write(repo, f"plugins/{name}/commands/plan.md", "plan\n")
        write(repo, f"plugins/{name}/commands/build.md", "build\n")
        write(repo, f"plugins/{name}/.claude-plugin/plugin.json", json.dumps({"name": name}))
    write(repo, "shared/tool.md", "tool\n")
    os.symlink("../../shared", repo / "plugins" / "alpha" / "shared")  # alpha reads shared/
    write(repo, ".claude-plugin/marketplace.json", _market())
    commit(repo, "marketplace")
    maps = {name: load_stage_map(repo / f"stage_map_{name}.yaml") for name in PLUGINS}
    return repo, maps


@pytest.fixture
def git_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every git command run from here on, one line each."""
    real = shutil.which("git")
    assert real is not None
    shim, log = tmp_path / "shim", tmp_path / "git.log"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    return log


def _decide_all(repo: Path, maps: dict[str, StageMap], head: str) -> dict[str, object]:
    change = diff_range.resolve(repo, f"{head}^1", head, deepen_tries=0)
    assert isinstance(change, diff_range.Range)
    changed = [path for chunk in diff_range.diff_chunks(repo, change) for path in chunk]
    out: dict[str, object] = {}
    for name, stage_map in maps.items():
        chosen = diff_range.decide_change(repo, stage_map, change, [changed])
        out[name] = (chosen.from_stage, chosen.reason, chosen.detail, chosen.matches)
    return out


def _taken(log: Path) -> list[str]:
    """The git commands logged since the last call."""
    lines = log.read_text().splitlines() if log.exists() else []
    log.write_text("")
    return lines


def _count(lines: list[str], words: str) -> int:
    return sum(words in line for line in lines)


def test_shared_reads_decide_as_each_map_alone_with_one_read_per_commit(
    market: tuple[Path, dict[str, StageMap]], git_log: Path
) -> None:
    repo, maps = market
    # beta's loading key changes (beta runs everything), alpha's and gamma's
    # entries only their version: nothing; shared/ changes, which alpha reads
    # through its link (alpha runs build).
    write(repo, ".claude-plugin/marketplace.json", _market(strict=False, version="1.1.0"))
    write(repo, "shared/tool.md", "tool, changed\n")
    head = commit(repo, "beta strict, shared tool")

    _taken(git_log)
    alone = _decide_all(repo, maps, head)
    taken = _taken(git_log)
    blobs_alone, trees_alone = _count(taken, "cat-file blob"), _count(taken, "ls-tree")
    with ci_git.shared_reads():
        shared = _decide_all(repo, maps, head)
    taken = _taken(git_log)
    blobs_shared, trees_shared = _count(taken, "cat-file blob"), _count(taken, "ls-tree")

    assert shared == alone
    assert alone["alpha"][:2] == (2, selection.LINK_TARGET_CHANGED)  # type: ignore[index]
    assert alone["beta"][0] == 1  # type: ignore[index]
    assert alone["gamma"][0] is None  # type: ignore[index]
    # The marketplace file at both commits: once per map alone, once in all shared.
    assert blobs_alone == 2 * len(PLUGINS)
    assert blobs_shared == 2
    # The links: each map lists its own folder alone; shared, the tree once
    # (the modes, then the paths as a link is there).
    assert trees_alone >= len(PLUGINS)
    assert trees_shared == 2


def test_shared_reads_keep_nothing_named_by_a_moving_name_or_after_they_close(
    market: tuple[Path, dict[str, StageMap]], git_log: Path
) -> None:
    repo, _ = market
    path = ".claude-plugin/marketplace.json"
    head = git(repo, "rev-parse", "HEAD").strip()
    _taken(git_log)
    with ci_git.shared_reads():
        first = ci_git.blob_at(repo, "HEAD", path)
        write(repo, path, _market(strict=False))
        commit(repo, "beta strict")
        assert ci_git.blob_at(repo, "HEAD", path) != first  # HEAD moved: read again
        assert ci_git.blob_at(repo, head, path) == first
        assert ci_git.blob_at(repo, head, path) == first
    # HEAD twice (it moved), `head` once although asked twice; the commit between
    # ran git too (not a read).
    assert _count(_taken(git_log), "cat-file blob") == 3
    ci_git.blob_at(repo, head, path)
    assert _count(_taken(git_log), "cat-file blob") == 1
