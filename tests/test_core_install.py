"""The core install (what the pre-commit hook gets): no agent dependencies.

A real virtualenv with only the package (`--no-deps`) plus its two core
dependencies from PyPI: the hook and `compute-stage` work there, and every
command that drives agents refuses in one line, exit 2, naming the extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, git
from tests.install_helpers import PROJECT, SMALL_MAP, copy_installable

MESSAGE = "needs the agent dependencies: pip install 'ci-evals[run]'"


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding ci-evals without its `run` extra (built from a copy of the sources)."""
    work = tmp_path_factory.mktemp("core-install")
    source = work / "src"
    source.mkdir()
    copy_installable(source)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", str(source)], check=True, timeout=600)
    subprocess.run([*pip, "pathspec>=1.1,<2", "PyYAML>=6,<7"], check=True, timeout=600)
    return venv


def _ci_evals(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / "ci-evals"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.slow
def test_the_core_venv_really_lacks_the_agent_dependencies(core_venv: Path) -> None:
    probe = "import importlib.util as u; print([u.find_spec(m) is None for m in "
    probe += "('claude_agent_sdk', 'pydantic', 'jsonschema', 'pathspec', 'yaml')])"
    result = subprocess.run(
        [str(core_venv / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "[True, True, True, False, False]"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "grade", "check-fixtures", "mcp-check"])
def test_agent_commands_say_in_one_line_what_to_install(
    core_venv: Path, tmp_path: Path, command: str
) -> None:
    result = _ci_evals(core_venv, tmp_path, command, "--help")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ci-evals: error: ci-evals {command} {MESSAGE}")
    assert "claude_agent_sdk" in lines[0]  # the hint names what is missing


@pytest.mark.slow
def test_run_with_its_real_arguments_gives_the_same_line(core_venv: Path) -> None:
    suite, stub = str(EXAMPLE.suite), EXAMPLE.model()
    result = _ci_evals(core_venv, PROJECT, "run", "--suite", suite, "--model", stub)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert f"ci-evals run {MESSAGE}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_hook_and_compute_stage_work_on_the_core_alone(core_venv: Path, repo: Path) -> None:
    (repo / "stage_map.yaml").write_text(SMALL_MAP, encoding="utf-8")
    for relative in ["plugin/agents/a.md", "plugin/skills/w/SKILL.md"]:
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text("x\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    covered = _ci_evals(core_venv, repo, "check-coverage")
    assert covered.returncode == 0, covered.stderr
    assert "every file covered" in covered.stdout

    (repo / "plugin/skills/w/SKILL.md").write_text("y\n", encoding="utf-8")
    (repo / "plugin/notes.txt").write_text("z\n", encoding="utf-8")
    git(repo, "add", ".")
    uncovered = _ci_evals(core_venv, repo, "check-coverage")
    assert uncovered.returncode == 1
    assert "plugin/notes.txt: not covered by any entry" in uncovered.stdout
    git(repo, "rm", "-q", "--cached", "plugin/notes.txt")
    git(repo, "commit", "-q", "-m", "two")
    stage = _ci_evals(core_venv, repo, "compute-stage", "HEAD~1")
    assert stage.returncode == 0, stage.stderr
    assert stage.stdout == "2\n"
