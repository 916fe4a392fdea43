"""For tests that install this project the way a user would: its installable
files copied out (uncommitted work included), and a small stage map."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.paths import REPO

PROJECT = REPO

SMALL_MAP = """\
version: 1
root: plugin
stages: [research, write]
entries:
  - { glob: "agents/*.md", stage: 1 }
  - { glob: "skills/**", stage: write }
"""


def copy_installable(dest: Path, *extra: str) -> None:
    """pyproject.toml, README.md and the package (plus `extra` top-level files) into `dest`."""
    for name in ["pyproject.toml", "README.md", *extra]:
        shutil.copy2(PROJECT / name, dest / name)
    shutil.copytree(
        PROJECT / "ci_evals", dest / "ci_evals", ignore=shutil.ignore_patterns("__pycache__")
    )
