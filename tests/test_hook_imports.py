"""The pre-commit hook paths stay light: what they import, counted, never timed.

Each hook runs as a commit runs it: a fresh interpreter in a copy of the
labsmith example (its own git repository). What is checked is deterministic:

- which heavy packages end up in `sys.modules`: none of the agent SDK, docker,
  pydantic, anthropic (the import-linter contract "The hook paths import ..."
  says the same statically, but cannot see that the graders' imports of the
  pydantic result records are lazy); and, for `check-fixtures
  --contracts-only`, none of the backends its suite does not use (the lazy
  registries: no mcp or command grader kind, no bwrap sandbox module);
- for `check-coverage` and `compute-stage` (with the map cache warm, as on
  every commit after the first): no third-party package and no heavy standard
  library package at all, and how many modules the hook adds, held under a
  ceiling. A new heavy import is tens of modules; a timed budget caught the
  same thing but failed on a loaded machine. How long the imports take is
  measured by benchmarks/bench_hook_imports.py.
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
# Standard-library packages that each pull in tens of modules; the hot hooks
# need none of them (an HTTP client, an event loop, a thread pool, e-mail parsing).
HEAVY_STDLIB = ("asyncio", "concurrent", "email", "http", "ssl", "urllib.request", "xml")
# The modules each hot hook adds to a fresh interpreter, warm (issue 37
# measured 66 and 78); the ceilings leave room for modules being split in
# two, not for a new package. `check-fixtures --contracts-only` (258, with
# jsonschema) is not held to one.
MAX_MODULES = {"check-coverage": 90, "compute-stage": 100}
MARK = "-- hook starts --"
# Runs the hook in-process after marking stderr, then lists, on its last line,
# the modules it loaded (one space-separated line).
PROBE = f"""
import sys
before = set(sys.modules)
sys.stderr.write({MARK!r} + "\\n"); sys.stderr.flush()
from ci_evals.main import main
code = main(sys.argv[1:])
print(" ".join(sorted(set(sys.modules) - before)), file=sys.stderr)
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


def _run(root: Path, env: dict[str, str], argv: list[str]) -> set[str]:
    """The modules one fresh run of the hook loaded."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert MARK in result.stderr, result.stderr[-2000:]
    after = result.stderr.split(MARK + "\n", 1)[1].splitlines()
    assert result.returncode == 0, after[-20:]
    return set(after[-1].split())


@pytest.mark.parametrize("hook", list(HOOKS))
def test_a_hook_imports_no_sdk_docker_pydantic_or_anthropic(
    example: tuple[Path, dict[str, str]], hook: str
) -> None:
    root, env = example
    loaded = _run(root, env, HOOKS[hook])
    assert loaded & set(HEAVY) == set()


def test_the_fixtures_hook_imports_no_backend_its_suite_does_not_use(
    example: tuple[Path, dict[str, str]],
) -> None:
    root, env = example
    loaded = _run(root, env, HOOKS["check-fixtures --contracts-only"])
    assert loaded & set(UNUSED) == set()


@pytest.mark.parametrize("hook", list(MAX_MODULES))
def test_a_hot_hook_loads_only_the_standard_library_and_few_modules(
    example: tuple[Path, dict[str, str]], hook: str
) -> None:
    root, env = example
    _run(root, env, HOOKS[hook])  # fills the map cache, as a repository's first commit does
    loaded = _run(root, env, HOOKS[hook])
    assert "ci_evals.main" in loaded  # sanity: the probe saw the hook's imports
    tops = {name.split(".")[0] for name in loaded}
    assert tops - set(sys.stdlib_module_names) == {"ci_evals"}
    assert {m for m in loaded for h in HEAVY_STDLIB if m == h or m.startswith(h + ".")} == set()
    assert len(loaded) <= MAX_MODULES[hook], (len(loaded), sorted(loaded))


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
