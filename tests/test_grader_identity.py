"""Issue 20: the code under test cannot reach its grader's verdict, and a script grader
sees only what its suite names. Real bwrap and docker, the task's own hidden tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ci_evals.graders.command import CommandGrader, run_command_grader
from ci_evals.results.criteria import GraderResult
from ci_evals.sandbox import registry
from ci_evals.suite.load import load_suite

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tasks" / "mcp-sqlite-server"
ATTACK = Path(__file__).resolve().parent / "data" / "hostile" / "attack.py"
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
SANDBOXES = ["bwrap", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
def sandbox(request: pytest.FixtureRequest) -> str:
    kind = str(request.param)
    if (why := registry.unavailable(kind)) is not None:
        pytest.fail(f"{kind}: {why}")
    if kind == "docker":
        registry.configure("docker", image=request.getfixturevalue("docker_image"))
    return kind


def hidden_grader() -> CommandGrader:
    suite = load_suite(TASK / "ci-evals.yaml")
    [grader] = [g for g in suite.stages[0].grading.graders if getattr(g, "id", None) == "hidden"]
    assert isinstance(grader, CommandGrader)
    return grader


def hostile_server(folder: Path) -> None:
    """The reference server, made to forget everything between processes, with the
    attack (tests/data/hostile/attack.py) on top: one file, nothing to install."""
    source = (TASK / "reference" / "server.py").read_text()
    for old, new in [
        (
            "    connection = sqlite3.connect(options.db)\n",
            "    if not os.path.exists(LOG):\n"
            "        attempt()\n"
            "        watch()\n"
            '    connection = sqlite3.connect(":memory:")\n',
        ),
        ('"SQL error: " + str(exc)', '"SQL error: " + str(exc) + told()'),
    ]:
        assert old in source
        source = source.replace(old, new, 1)
    (folder / "server.py").write_text(ATTACK.read_text() + "\n\n" + source)


def by_id(result: GraderResult) -> dict[str, tuple[bool, str]]:
    return {c.id: (c.passed, c.detail or "") for c in result.criteria}


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_a_hostile_server_cannot_forge_the_hidden_tests_verdict(
    tmp_path: Path, sandbox: str
) -> None:
    graded = tmp_path / "graded"
    graded.mkdir()
    hostile_server(graded)
    result = run_command_grader(
        hidden_grader(), graded, env=ENV, output_path=tmp_path / "log", sandbox=sandbox
    )
    assert result.error is None, result
    found = by_id(result)
    assert not any("forged" in detail for _, detail in found.values()), found
    # The true verdict: the server never persists, so a second process sees nothing.
    passed, detail = found["hidden/persists"]
    assert not passed and "no such table: books" in detail, detail
    assert found["hidden/round-trip"][0] and found["hidden/sql-error"][0]
    if os.geteuid() == 0 or sandbox == "docker":
        # Another uid: it saw the hidden tests run and tried everything; all refused.
        assert "graders seen: 1" in detail, detail
        for attack in ("sigstop", "mem", "stdout", "plant results"):  # SIGCONT: harmless
            assert f"{attack}: PermissionError" in detail, detail
    else:
        # Namespaces of its own: no process of the grader's, no results folder there.
        assert "graders seen: 0" in detail and "plant results: FileNotFoundError" in detail


def test_under_local_the_variables_are_set_too(tmp_path: Path) -> None:
    """`local` has one identity (no promise, docs/isolation.md), but a grader written for
    the others runs there unchanged: its results folder and launcher exist."""
    graded = tmp_path / "graded"
    graded.mkdir()
    (graded / "server.py").write_text((TASK / "reference" / "server.py").read_text())
    result = run_command_grader(hidden_grader(), graded, env=ENV, sandbox="local")
    assert result.error is None and all(c.passed for c in result.criteria), result
