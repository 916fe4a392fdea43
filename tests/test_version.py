"""`ci-evals --version` run from a git checkout names its commit, and says when the
package differs from it (a git install and a wheel: tests/test_report_install.py,
tests/test_core_install.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals import __version__
from tests.conftest import git
from tests.install_helpers import clean_env, copy_installable

pytestmark = pytest.mark.slow  # a copy of the package, git, and an interpreter's start each


def _version(checkout: Path, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "--version"],
        cwd=cwd,
        env=clean_env(PYTHONPATH=str(checkout)),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stderr == ""
    return done.stdout


def test_a_checkout_names_its_commit_and_its_changes(tmp_path: Path) -> None:
    checkout = tmp_path / "ci-evals"
    checkout.mkdir()
    copy_installable(checkout)
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "one")
    sha = git(checkout, "rev-parse", "HEAD").strip()
    elsewhere = tmp_path / "elsewhere"  # the current folder plays no part
    elsewhere.mkdir()
    assert _version(checkout, elsewhere) == f"ci-evals {__version__} (git {sha[:12]}, editable)\n"

    with (checkout / "ci_evals" / "text.py").open("a", encoding="utf-8") as module:
        module.write("# changed\n")
    said = _version(checkout, elsewhere)
    assert said == f"ci-evals {__version__} (git {sha[:12]}, editable, uncommitted changes)\n"


def test_a_copy_outside_git_is_its_version_alone(tmp_path: Path) -> None:
    copy = tmp_path / "ci-evals"
    copy.mkdir()
    copy_installable(copy)
    assert _version(copy, tmp_path) == f"ci-evals {__version__}\n"
