"""Shared test fixtures: real git repositories in temporary folders."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import REPO

PROJECT = REPO


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the developer's git config (hooks, signing, templates) out of tests."""
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in _GIT_ENV}
    os.environ.update(_GIT_ENV)
    os.environ["GIT_CONFIG_GLOBAL"] = str(home / ".gitconfig")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def _outside_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run as on a developer's machine, also in this repository's own Actions
    jobs: there ci-evals takes only what git tracks (`git.only_tracked`) and never
    lets the host stand in for a sandbox. A test of Actions sets GITHUB_ACTIONS."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` and return its stdout; fail the test on a non-zero exit."""
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty git repository on branch `main`."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path


@dataclass(frozen=True)
class ExampleLayout:
    """The labsmith example as this repository lays it out, under `root`: the suite,
    the stage map and the fixtures at the top, the plugin and its stub scripts in
    examples/labsmith/ (the layout a user's repository copies)."""

    root: Path

    @property
    def suite(self) -> Path:
        return self.root / "ci-evals.yaml"

    @property
    def stage_map(self) -> Path:
        return self.root / "stage_map.yaml"

    @property
    def fixtures(self) -> Path:
        return self.root / "fixtures"

    @property
    def example(self) -> Path:
        return self.root / EXAMPLE_DIR

    @property
    def plugin(self) -> Path:
        return self.example / "plugin"

    def stub(self, script: str = "labsmith.yaml") -> Path:
        """A stub-model script of the example (labsmith.yaml, broken-plan.yaml)."""
        return self.example / "stub" / script

    def model(self, script: str = "labsmith.yaml") -> str:
        """The `--model` value that plays `script`."""
        return f"stub:{self.stub(script)}"


# Where the example's own files live, relative to the top (of this repository or a copy).
EXAMPLE_DIR = "examples/labsmith"
# This repository's example, in place: read it, never write to it.
EXAMPLE = ExampleLayout(PROJECT)


def copy_example(dest: Path, *, readme: bool = True) -> ExampleLayout:
    """Copy the example's files (suite, map, fixtures, examples/labsmith/) into `dest`,
    at the same paths as in this repository; `dest` may exist (not these files in it)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("ci-evals.yaml", "stage_map.yaml"):
        shutil.copy2(PROJECT / name, dest / name)
    shutil.copytree(EXAMPLE.fixtures, dest / "fixtures", symlinks=True)
    ignore = None if readme else shutil.ignore_patterns("README.md")
    shutil.copytree(EXAMPLE.example, dest / EXAMPLE_DIR, symlinks=True, ignore=ignore)
    return ExampleLayout(dest)


@pytest.fixture
def labsmith(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExampleLayout:
    """A copy of the labsmith example in its own git repository (the stage map lives
    in one), made the current folder: messages name its files as a user would see them."""
    copy = copy_example(tmp_path / "labsmith")
    git(copy.root, "init", "-q", "-b", "main")
    monkeypatch.chdir(copy.root)
    return copy


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The shipped `python-mcp` sandbox image (tests/docker_helpers.py), built once."""
    from tests.docker_helpers import build_test_image  # noqa: PLC0415 - only docker tests

    return build_test_image()
