"""The hooks end to end: the real pre-commit framework, and the plain git hook on `git commit`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import copy_example, git
from tests.install_helpers import PROJECT, SMALL_MAP, copy_installable


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This project's installable files committed in a temp repo (works with uncommitted work)."""
    path = tmp_path_factory.mktemp("hook-repo")
    copy_installable(path, ".pre-commit-hooks.yaml")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "hooks"]):
        subprocess.run(
            ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
            cwd=path,
            env=env,
            check=True,
            timeout=60,
        )
    return path


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pre-commit store for the session: the hook's virtualenv is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def _plugin(repo: Path, *files: str) -> None:
    (repo / "stage_map.yaml").write_text(SMALL_MAP, encoding="utf-8")
    for relative in files:
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n", encoding="utf-8")
    git(repo, "add", ".")


def _try_repo(
    repo: Path, hook_repo: Path, home: Path, hook: str = "ci-evals-coverage"
) -> subprocess.CompletedProcess[str]:
    pre_commit = Path(sys.executable).with_name("pre-commit")
    return subprocess.run(
        [str(pre_commit), "try-repo", str(hook_repo), hook, "--all-files"],
        cwd=repo,
        env={**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


@pytest.mark.slow
def test_framework_hook_fails_on_an_uncovered_file(
    repo: Path, hook_repo: Path, pre_commit_home: Path
) -> None:
    _plugin(repo, "plugin/agents/a.md", "plugin/skills/w/SKILL.md", "plugin/notes.txt")
    result = _try_repo(repo, hook_repo, pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stage map covers every plugin file" in result.stdout
    assert "Failed" in result.stdout
    assert (
        "plugin/notes.txt: not covered by any entry in stage_map.yaml" in result.stdout
    )  # git shows hook output on stderr


@pytest.mark.slow
def test_framework_hook_passes_when_covered(
    repo: Path, hook_repo: Path, pre_commit_home: Path
) -> None:
    _plugin(repo, "plugin/agents/a.md", "plugin/skills/w/SKILL.md", "README.md")
    result = _try_repo(repo, hook_repo, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


@pytest.mark.slow
def test_the_documented_config_pinned_by_autoupdate_freeze(
    repo: Path, hook_repo: Path, pre_commit_home: Path
) -> None:
    """What the README says works until there is a release tag: `rev:` a full commit
    SHA, filled in by `pre-commit autoupdate --freeze` (no tag: the default branch's
    latest commit). `rev: v0.1.0` names no tag and fails (issue 10, item 9)."""
    _plugin(repo, "plugin/agents/a.md", "plugin/skills/w/SKILL.md")
    config = repo / ".pre-commit-config.yaml"
    config.write_text(
        f"repos:\n  - repo: {hook_repo}\n    rev: main\n    hooks:\n"
        "      - id: ci-evals-coverage\n",
        encoding="utf-8",
    )
    git(repo, "add", ".")
    pre_commit = str(Path(sys.executable).with_name("pre-commit"))
    env = {**os.environ, "PRE_COMMIT_HOME": str(pre_commit_home), "NO_COLOR": "1"}

    def framework(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [pre_commit, *args], cwd=repo, env=env, capture_output=True, text=True,
            check=False, timeout=900,
        )  # fmt: skip

    frozen = framework("autoupdate", "--freeze")
    assert frozen.returncode == 0, frozen.stdout + frozen.stderr
    sha = git(hook_repo, "rev-parse", "HEAD").strip()
    assert f"rev: {sha}" in config.read_text(encoding="utf-8")
    git(repo, "add", ".")
    ran = framework("run", "--all-files")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "stage map covers every plugin file" in ran.stdout
    config.write_text(config.read_text(encoding="utf-8").replace(sha, "v0.1.0"), encoding="utf-8")
    git(repo, "add", ".")
    assert framework("run", "--all-files").returncode != 0  # no such tag


def test_framework_fixtures_hook_fails_on_a_stale_fixture(
    repo: Path, hook_repo: Path, pre_commit_home: Path
) -> None:
    """`ci-evals-fixtures` in the real framework: its own environment (the package and
    pydantic + jsonschema, no agent SDK), the labsmith example laid out as in this
    repository (suite, map and fixtures at the top)."""
    copy_example(repo)
    git(repo, "add", ".")
    result = _try_repo(repo, hook_repo, pre_commit_home, "ci-evals-fixtures")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fixtures hold the stages' contracts" in result.stdout
    assert "Passed" in result.stdout

    lab = repo / "fixtures" / "3-plan-lab-output" / "lab" / "lab.md"
    lab.write_text(lab.read_text().replace("## Environment", "## Setup"))
    git(repo, "add", ".")
    result = _try_repo(repo, hook_repo, pre_commit_home, "ci-evals-fixtures")
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "fixtures/3-plan-lab-output/lab/lab.md: missing '## Environment' -- "
        "stage 4 (plan-chapter) consumes[1].headings (produced by stage 3 (plan-lab)), "
        "ci-evals.yaml:64"
    ) in result.stdout


def _hooks(name: str) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load((PROJECT / name).read_text(encoding="utf-8"))
    hooks = data if isinstance(data, list) else [h for r in data["repos"] for h in r["hooks"]]
    return {hook["id"]: hook for hook in hooks}


@pytest.mark.parametrize("hook_id", ["ci-evals-coverage", "ci-evals-fixtures"])
def test_this_repository_runs_the_hook_it_provides_and_it_passes(hook_id: str) -> None:
    """Its own .pre-commit-config.yaml runs each provided hook as a user's would (no
    --map or --suite: the map and the suite are at the top), on this checkout's code;
    the same command, run here, passes on the repository itself."""
    provided = _hooks(".pre-commit-hooks.yaml")[hook_id]
    own = _hooks(".pre-commit-config.yaml")[hook_id]
    command = provided["entry"].split()
    assert own["entry"].split() == ["python", "-m", "ci_evals", *command[1:]]
    assert (own["pass_filenames"], own["always_run"]) == (False, True)
    assert set(provided.get("additional_dependencies", [])) <= set(own["additional_dependencies"])
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", *command[1:]],
        cwd=PROJECT, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def _commit(repo: Path, path_dirs: list[str]) -> subprocess.CompletedProcess[str]:
    """`git commit` with the given PATH; git shows a hook's output on stderr."""
    env = {**os.environ, "PATH": os.pathsep.join(path_dirs)}
    return subprocess.run(
        ["git", "commit", "-q", "-m", "change"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _system_dirs() -> list[str]:
    """PATH entries for git and sh, without the project's virtualenv."""
    venv_bin = str(Path(sys.executable).parent)
    return [d for d in os.environ["PATH"].split(os.pathsep) if d and d != venv_bin]


def test_plain_git_hook_refuses_an_uncovered_commit(repo: Path) -> None:
    """Installed by copying into .git/hooks; `ci-evals` found on PATH."""
    hook = repo / ".git" / "hooks" / "pre-commit"
    shutil.copy2(PROJECT / "hooks" / "pre-commit", hook)
    _plugin(repo, "plugin/agents/a.md", "plugin/skills/w/SKILL.md", "plugin/stray.py")
    path = [str(Path(sys.executable).parent), *_system_dirs()]
    result = _commit(repo, path)
    assert result.returncode != 0
    assert (
        "plugin/stray.py: not covered by any entry in stage_map.yaml" in result.stderr
    )  # git shows hook output on stderr
    assert git(repo, "rev-list", "--all") == ""  # nothing was committed

    git(repo, "rm", "-q", "--cached", "plugin/stray.py")
    assert _commit(repo, path).returncode == 0
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"


def test_plain_git_hook_via_hooks_path_falls_back_to_python_module(
    repo: Path, tmp_path: Path
) -> None:
    """Installed with `git config core.hooksPath`; no `ci-evals` on PATH, only python3."""
    hooks = repo / "githooks"
    hooks.mkdir()
    shutil.copy2(PROJECT / "hooks" / "pre-commit", hooks / "pre-commit")
    git(repo, "config", "core.hooksPath", "githooks")
    shim = tmp_path / "bin"
    shim.mkdir()
    # A wrapper, not a symlink: a symlinked venv python would not find its pyvenv.cfg.
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python3").chmod(0o755)
    _plugin(repo, "plugin/agents/a.md", "plugin/other.md")
    path = [str(shim), *_system_dirs()]
    env_python = {**os.environ, "PATH": os.pathsep.join(path)}
    assert shutil.which("ci-evals", path=env_python["PATH"]) is None
    result = _commit(repo, path)
    assert result.returncode != 0
    assert (
        "plugin/other.md: not covered by any entry in stage_map.yaml" in result.stderr
    )  # git shows hook output on stderr
    assert "'skills/**' matches no staged file" in result.stderr
