"""The core install (what the pre-commit hook gets): no agent dependencies.

A real virtualenv with only the wheel and its core dependencies from PyPI: the
hook, `compute-stage` and `baseline fetch` work there (`report` and `comment`
too: tests/test_report_install.py), and every command that needs the `run`
extra refuses in one line, exit 2, naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, git
from tests.github_actions_fake import TOKEN, ActionsGitHub, actions_github, zip_of
from tests.install_helpers import (
    PROJECT,
    SMALL_MAP,
    absent,
    ci_evals,
    clean_env,
    copy_installable,
    new_venv,
)
from tests.paths import DATA

__all__ = ["actions_github"]  # the stand-in GitHub (runs, artifacts)

MESSAGE = "needs the agent dependencies: pip install 'ci-evals[run]'"
AGENT_COMMANDS = ("run", "grade", "check-fixtures", "mcp-check")


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel built from a copy of the sources, without any extra:
    what `pipx run` / `uvx` make of a wheel (its dependencies from the index)."""
    work = tmp_path_factory.mktemp("core-install")
    source = work / "src"
    source.mkdir()
    copy_installable(source)
    wheels = work / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels)]
    subprocess.run([*build, str(source)], check=True, timeout=600)
    (wheel,) = wheels.glob("ci_evals-*.whl")
    venv = work / "venv"
    new_venv(venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, str(wheel)], check=True, timeout=600, env=clean_env())
    return venv


@pytest.mark.slow
def test_the_core_venv_really_lacks_the_agent_dependencies(core_venv: Path) -> None:
    modules = ("claude_agent_sdk", "anthropic", "pydantic", "jsonschema", "pathspec", "yaml")
    assert absent(core_venv, modules) == ["claude_agent_sdk", "anthropic", "jsonschema"]


@pytest.mark.slow
def test_a_wheel_says_its_version_alone(core_venv: Path, tmp_path: Path) -> None:
    """No commit to name: the wheel came from no git checkout (installed from a file)."""
    from ci_evals import __version__  # noqa: PLC0415

    done = ci_evals(core_venv, tmp_path, "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"ci-evals {__version__}\n", "")


@pytest.mark.slow
@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_commands_needing_the_run_extra_say_so_in_one_line(
    core_venv: Path, tmp_path: Path, command: str
) -> None:
    result = ci_evals(core_venv, tmp_path, command, "--help")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ci-evals: error: ci-evals {command} {MESSAGE}")
    assert "missing: claude_agent_sdk" in lines[0]  # the hint names what is missing


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "comment", "baseline"])
def test_the_readers_of_a_run_need_no_extra(core_venv: Path, tmp_path: Path, command: str) -> None:
    """`pip install ci-evals` alone can report on a run and post it (issue 35)."""
    result = ci_evals(core_venv, tmp_path, command, "--help")
    assert (result.returncode, result.stderr) == (0, "")
    assert "usage: ci-evals" in result.stdout


@pytest.mark.slow
def test_run_with_its_real_arguments_gives_the_same_line(core_venv: Path) -> None:
    suite, stub = str(EXAMPLE.suite), EXAMPLE.model()
    result = ci_evals(core_venv, PROJECT, "run", "--suite", suite, "--model", stub)
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
    covered = ci_evals(core_venv, repo, "check-coverage")
    assert covered.returncode == 0, covered.stderr
    assert "every file covered" in covered.stdout

    (repo / "plugin/skills/w/SKILL.md").write_text("y\n", encoding="utf-8")
    (repo / "plugin/notes.txt").write_text("z\n", encoding="utf-8")
    git(repo, "add", ".")
    uncovered = ci_evals(core_venv, repo, "check-coverage")
    assert uncovered.returncode == 1
    assert "plugin/notes.txt: not covered by any entry" in uncovered.stdout
    git(repo, "rm", "-q", "--cached", "plugin/notes.txt")
    git(repo, "commit", "-q", "-m", "two")
    stage = ci_evals(core_venv, repo, "compute-stage", "HEAD~1")
    assert stage.returncode == 0, stage.stderr
    assert stage.stdout == "2\n"


@pytest.mark.slow
def test_baseline_fetch_works_on_the_core_alone(
    core_venv: Path, tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    """The trusted comment job's baseline step needs no extra: the last successful run's
    artifact, through the stand-in GitHub (its storage redirect included)."""
    recorded = (DATA / "results-v2-full.json").read_bytes()
    actions_github.add_run(conclusion="failure")
    good = actions_github.add_run()
    actions_github.add_artifact(good, zip_of({"run/results.json": recorded}))
    env = clean_env(
        GITHUB_TOKEN=TOKEN,
        GITHUB_REPOSITORY="acme/widgets",
        GITHUB_API_URL=actions_github.url,
    )
    env = {k: v for k, v in env.items() if k.lower() not in ("http_proxy", "https_proxy")}
    out = tmp_path / "baseline"
    argv = ["baseline", "fetch", "--workflow", "evals.yml", "--branch", "main", "--out", str(out)]
    done = ci_evals(core_venv, tmp_path, *argv, env=env)
    assert done.returncode == 0, done.stderr
    assert (out / "results.json").read_bytes() == recorded
    source = json.loads((out / "baseline-source.json").read_text(encoding="utf-8"))
    assert source["run_id"] == good
    assert str(out / "results.json") in done.stdout
