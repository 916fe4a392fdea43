"""`ci-evals sandbox check`: the kind a run would open, and whether it runs here.

bubblewrap refused as on a runner whose user namespaces are restricted is a
`bwrap` program on PATH that fails as it does there (a process boundary).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO
from tests.run_helpers import make_suite


def check(cwd: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "sandbox", "check", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_the_suites_kind_runs_here(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path)
    done = check(tmp_path, "--suite", str(suite))
    assert (done.returncode, done.stdout, done.stderr) == (0, "bwrap\n", "")


def test_isolation_none_is_the_host(tmp_path: Path) -> None:
    make_suite(tmp_path)  # found from the current folder
    done = check(tmp_path, "--isolation", "none")
    assert (done.returncode, done.stdout) == (0, "local\n"), done.stderr


def test_bubblewrap_refused_is_exit_1_and_one_line_saying_why(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path)
    fake = tmp_path / "bin"
    fake.mkdir()
    bwrap = fake / "bwrap"
    bwrap.write_text('#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n')
    bwrap.chmod(bwrap.stat().st_mode | stat.S_IXUSR)
    done = check(tmp_path, "--suite", str(suite), path=f"{fake}{os.pathsep}{os.environ['PATH']}")
    assert (done.returncode, done.stdout) == (1, "bwrap\n")
    (line,) = done.stderr.splitlines()
    assert line.startswith("ci-evals: the bwrap sandbox cannot run here: ")
    assert "setting up uid map: Permission denied" in line
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in line


def test_a_kind_the_suite_cannot_give_is_a_usage_error(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path)
    done = check(tmp_path, "--suite", str(suite), "--isolation", "docker")
    assert done.returncode == 2 and done.stdout == ""
    assert "--isolation docker: the docker sandbox needs an image" in done.stderr
    assert "Traceback" not in done.stderr
