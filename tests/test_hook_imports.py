"""The pre-commit hook paths stay light: what they import, and how long importing takes.

Each hook runs as a commit runs it: a fresh interpreter in a copy of the
labsmith example (its own git repository). Two facts are checked:

- which heavy packages end up in `sys.modules` (deterministic): none of the
  agent SDK, docker, pydantic, anthropic (the import-linter contract "The hook
  paths import ..." says the same statically, but cannot see that the graders'
  imports of the pydantic result records are lazy); and, for `check-fixtures
  --contracts-only`, none of the backends its suite does not use (the lazy
  registries: no mcp or command grader kind, no bwrap sandbox module);
- the import time of the hook's own modules, from `-X importtime` (the
  cumulative time of every top-level import after the interpreter started,
  lazy imports during the run included): the minimum of several runs, so a
  loaded machine (which only ever adds time) does not fail it, while a new
  heavy import (tens of ms on any machine) does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import copy_example

HEAVY = ("claude_agent_sdk", "docker", "pydantic", "anthropic")
HOOKS = {
    "check-coverage": ["check-coverage"],
    "compute-stage": ["compute-stage", "HEAD"],
    "check-fixtures --contracts-only": ["check-fixtures", "--contracts-only"],
}
# What `check-fixtures --contracts-only` on the example must not import: the
# kinds its suite does not use (grader kinds are imported by the stage keys
# used), and the sandbox module itself (loading reads only the kind's block).
UNUSED = (
    "ci_evals.grading.kinds.command",
    "ci_evals.grading.kinds.mcp",
    "ci_evals.mcp.check",
    "ci_evals.sandbox.bwrap",
    "ci_evals.sandbox.limits",
)
# The import budget of the pre-commit hooks (issue 23). `check-fixtures
# --contracts-only` loads the suite and checks JSON against the contracts'
# schemas: jsonschema alone is ~60 ms of its ~155 ms (was ~210 ms with every
# grader kind imported); measured and reported, not yet held to 150 ms.
BUDGET_MS = {"check-coverage": 150.0, "compute-stage": 150.0}
RUNS = 5
MARK = "-- hook starts --"
# Runs the hook in-process after marking stderr, then lists the watched modules loaded.
PROBE = f"""
import sys
sys.stderr.write({MARK!r} + "\\n"); sys.stderr.flush()
from ci_evals.main import main
code = main(sys.argv[1:])
print(" ".join(m for m in {HEAVY + UNUSED!r} if m in sys.modules), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = copy_example(tmp_path_factory.mktemp("hooks") / "labsmith").root
    for argv in (["init", "-q", "-b", "main"], ["add", "."]):
        subprocess.run(["git", *argv], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
        cwd=root,
        check=True,
    )
    # Bytecode written once and reused, as an installed package's is (an
    # editable checkout under PYTHONDONTWRITEBYTECODE would recompile each run).
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path_factory.mktemp("pyc"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("GITHUB_ACTIONS", None)
    return root, env


def _run(root: Path, env: dict[str, str], argv: list[str]) -> tuple[float, set[str]]:
    """(import milliseconds after the mark, watched modules loaded) of one fresh run."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", PROBE, *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert MARK in result.stderr, result.stderr[-2000:]
    after = result.stderr.split(MARK + "\n", 1)[1].splitlines()
    assert result.returncode == 0, after[-20:]
    loaded = set(after[-1].split())
    micros = 0
    for line in after:
        parts = line.split("|")
        if not line.startswith("import time:") or len(parts) != 3:
            continue
        cumulative, name = parts[1].strip(), parts[2]
        # Top level: one space before the name (nested imports are indented further).
        if cumulative.isdigit() and not name.startswith("  "):
            micros += int(cumulative)
    return micros / 1000, loaded


@pytest.mark.parametrize("hook", list(HOOKS))
def test_a_hook_imports_no_sdk_docker_pydantic_or_anthropic(
    example: tuple[Path, dict[str, str]], hook: str
) -> None:
    root, env = example
    _, loaded = _run(root, env, HOOKS[hook])
    assert loaded & set(HEAVY) == set()


def test_the_fixtures_hook_imports_no_backend_its_suite_does_not_use(
    example: tuple[Path, dict[str, str]],
) -> None:
    root, env = example
    _, loaded = _run(root, env, HOOKS["check-fixtures --contracts-only"])
    assert loaded & set(UNUSED) == set()


@pytest.mark.parametrize("hook", list(BUDGET_MS))
def test_a_hook_imports_within_its_budget(example: tuple[Path, dict[str, str]], hook: str) -> None:
    root, env = example
    _run(root, env, HOOKS[hook])  # writes the bytecode
    times = [_run(root, env, HOOKS[hook])[0] for _ in range(RUNS)]
    assert min(times) > 1.0  # sanity: the import lines were read
    assert min(times) <= BUDGET_MS[hook], f"{hook}: imports took {sorted(times)} ms"


def test_the_git_hook_imports_nothing_from_the_repository(tmp_path: Path) -> None:
    """hooks/pre-commit's fallback (no `ci-evals` on PATH, `python3` that has it)
    runs from the repository's top: a committed `yaml.py` (or a `*.dist-info`
    declaring a sandbox) must not be imported, as plain `python3 -m` would."""
    root = copy_example(tmp_path / "labsmith").root
    marker = tmp_path / "pwned"
    planted = f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit('planted')\n"
    (root / "yaml.py").write_text(planted)
    (root / "ci_evals_pr-1.dist-info").mkdir()
    (root / "ci_evals_pr-1.dist-info" / "METADATA").write_text("Name: ci-evals-pr\nVersion: 1\n")
    (root / "ci_evals_pr-1.dist-info" / "entry_points.txt").write_text(
        "[ci_evals.sandboxes]\nlocal = yaml:KIND\n"
    )
    hook = Path(__file__).parent.parent / "hooks" / "pre-commit"
    bin_dir = tmp_path / "bin"  # python3 with ci-evals installed, no ci-evals script
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    for argv in (["init", "-q", "-b", "main"], ["config", "core.hooksPath", str(hook.parent)]):
        subprocess.run(["git", *argv], cwd=root, check=True, env=env)
    subprocess.run(["git", "add", "."], cwd=root, check=True, env=env)
    commit = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert not marker.exists(), commit.stderr
    assert commit.returncode == 0, commit.stderr  # the map covers the example: it ran
