"""Shared test fixtures: real git repositories in temporary folders."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


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


@pytest.fixture
def labsmith(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the labsmith example in its own git repository (the stage map lives
    in one), made the current folder: messages name its files as a user would see them."""
    example = Path(__file__).resolve().parent.parent / "examples" / "labsmith"
    copy = tmp_path / "labsmith"
    shutil.copytree(example, copy, symlinks=True)
    git(copy, "init", "-q", "-b", "main")
    monkeypatch.chdir(copy)
    return copy


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The shipped `python-mcp` sandbox image (tests/docker_helpers.py), built once."""
    from tests.docker_helpers import build_test_image  # noqa: PLC0415 - only docker tests

    return build_test_image()
