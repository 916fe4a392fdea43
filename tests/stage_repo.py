"""Helpers for tests that need a plugin repository with a stage map and history."""

from __future__ import annotations

from pathlib import Path

from ci_evals.selection import decide as selection
from ci_evals.selection import diff as diff_range
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git

# Three stages; entries chosen so that each rule is easy to hit on purpose.
MAP = """\
version: 1
root: plugin
stages: [research, plan, generate]
entries:
  - { glob: "agents/researcher.md", stage: 1 }
  - { glob: "agents/résumé.md", stage: 1 }
  - { glob: "skills/plan/**", stage: plan }
  - { glob: "commands/*.md", stage: 3 }
  - { glob: "*.md", stage: 3 }
global: [ci-evals.yaml]
fixtures: fixtures
"""

BASE_FILES = {
    "stage_map.yaml": MAP,
    "ci-evals.yaml": "suite: x\n",
    "README.md": "readme\n",
    "plugin/agents/researcher.md": "research\n",
    "plugin/skills/plan/SKILL.md": "plan\n",
    "plugin/commands/generate.md": "generate\n",
    "fixtures/1-research-output/notes.md": "notes\n",
}


def write(repo: Path, path: str, text: str = "changed\n") -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def commit(repo: Path, message: str = "change") -> str:
    """Commit everything in the work tree; return the new HEAD SHA."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return sha(repo, "HEAD")


def sha(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", rev).strip()


def plugin_repo(repo: Path) -> str:
    """Fill the empty `repo` (branch main) with the plugin and its map; return the commit."""
    for path, text in BASE_FILES.items():
        write(repo, path, text)
    return commit(repo, "plugin")


def compute(repo: Path, base: str, head: str = "HEAD", tries: int = 0) -> selection.Selection:
    stage_map = load_stage_map(repo / "stage_map.yaml")
    return diff_range.compute(repo, stage_map, base, head, deepen_tries=tries)


def by_path(chosen: selection.Selection) -> dict[str, tuple[int | None, str | None, str]]:
    return {m.path: (m.stage, m.entry, m.rule) for m in chosen.matches}


def branch(repo: Path, name: str = "feature") -> None:
    git(repo, "checkout", "-q", "-b", name)
