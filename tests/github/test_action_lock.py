"""The action's lock (action/constraints.txt) and its check (.ci/lock.py --static):
every dependency pyproject.toml declares for `ci-evals[run]` pinned, inside its range.
The install half of the check (a fresh venv from PyPI) runs in CI (.ci/run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.paths import REPO

LOCK = REPO / "action" / "constraints.txt"
PYPROJECT = """\
[project]
name = "ci-evals"
dependencies = ["pathspec>=1.1,<2", "PyYAML>=6,<7"]
[project.optional-dependencies]
run = ["pydantic>=2.7,<3", "ci-evals[docker]"]
docker = ["docker>=7.1,<8"]
"""


def check(tmp_path: Path, lock: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "constraints.txt").write_text(lock)
    return subprocess.run(
        [sys.executable, str(REPO / ".ci/lock.py"), "--static",
         "--lock", str(tmp_path / "constraints.txt"),
         "--pyproject", str(tmp_path / "pyproject.toml")],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def test_the_shipped_lock_pins_every_declared_dependency_inside_its_range() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci/lock.py"), "--static"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert "every pin inside pyproject.toml's ranges" in done.stdout


def test_a_lock_inside_the_ranges_passes(tmp_path: Path) -> None:
    done = check(tmp_path, "# header\npathspec==1.1.1\npyyaml==6.0.4\npydantic==2.14.4\n")
    assert done.returncode == 0, done.stdout


def test_a_pin_outside_its_range_is_named_at_its_line(tmp_path: Path) -> None:
    done = check(tmp_path, "pathspec==1.1.1\nPyYAML==6.0.4\npydantic==3.0.0\n")
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    assert line.startswith("constraints.txt:3: pydantic==3.0.0 is outside pyproject.toml's range")
    assert "<3,>=2.7" in line and "python .ci/lock.py --update" in line


def test_a_declared_dependency_not_pinned_is_named(tmp_path: Path) -> None:
    done = check(tmp_path, "pathspec==1.1.1\npydantic==2.14.4\n")
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    assert line.startswith("constraints.txt: PyYAML (pyproject.toml: PyYAML<7,>=6) is not pinned")


def test_a_line_that_is_no_pin_is_named(tmp_path: Path) -> None:
    done = check(tmp_path, "pathspec>=1.1\npyyaml==6.0.4\npydantic==2.14.4\npyyaml==6.0.3\n")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "constraints.txt:1: not `name==version`: 'pathspec>=1.1'",
        "constraints.txt:4: pyyaml pinned twice (line 2)",
        "constraints.txt: pathspec (pyproject.toml: pathspec<2,>=1.1) is not pinned; "
        "run `python .ci/lock.py --update`",
    ]


def test_the_action_installs_with_the_lock_and_keys_its_cache_on_it() -> None:
    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    by_name = {str(s.get("name") or s.get("uses")): s for s in steps}
    setup = next(s for s in steps if str(s.get("uses", "")).startswith("actions/setup-python@"))
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["cache-dependency-path"] == "${{ steps.lock.outputs.path }}"
    assert "action/constraints.txt" in by_name["Key the pip cache on the lock"]["run"]
    install = by_name["Install ci-evals"]["run"]
    assert '-c "$ACTION_PATH/action/constraints.txt" "${ACTION_PATH}[run]"' in install
