"""For tests that install this project the way a user would: its installable
files copied out (uncommitted work included), a fresh venv, and `ci-evals`
run from it with nothing of the test's own environment leaking in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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

# Would make a venv's interpreter import something other than what it installed.
LEAKY_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
# The agent side, and what the `report` extra must not pull in either.
AGENT_MODULES = ("claude_agent_sdk", "anthropic", "jsonschema", "docker")


def copy_installable(dest: Path, *extra: str) -> None:
    """pyproject.toml, PYPI.md (its readme) and the package (plus `extra` top-level files)
    into `dest`."""
    for name in ["pyproject.toml", "PYPI.md", *extra]:
        shutil.copy2(PROJECT / name, dest / name)
    shutil.copytree(
        PROJECT / "ci_evals", dest / "ci_evals", ignore=shutil.ignore_patterns("__pycache__")
    )


def new_venv(venv: Path) -> Path:
    """A fresh venv (with pip) at `venv`; its `bin` folder."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv / "bin"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would leak the test's packages, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
    return env | extra


def ci_evals(
    venv: Path, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`ci-evals ARGS` as the venv installed it."""
    return subprocess.run(
        [str(venv / "bin" / "ci-evals"), *args],
        cwd=cwd,
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def absent(venv: Path, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` the venv's interpreter cannot find (none imported)."""
    probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] "
    probe += "if u.find_spec(m) is None))"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe, *modules],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout.split()
