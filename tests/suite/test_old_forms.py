"""Suites written before `agent: {kind: ...}` / `sandbox: {kind: ...}` still load.

The benchmark task (tasks/mcp-sqlite-server) rewritten in the old forms, checked
by the real `ci-evals check` in a subprocess: what a user with an old suite sees.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

TASK = REPO / "tasks" / "mcp-sqlite-server"
NEW_HEAD = """agent:
  kind: loop                    # the bounded tool loop (docs/loop-agent.md); no plugin
  max_steps: 20                 # the step ceiling: halted without final_submit by then
  context: {strategy: summary, keep_last: 8}
sandbox:
  kind: docker                  # a fresh container per scenario, no network
  image: python-mcp             # Debian + python3 + the mcp package (ci-evals sandbox build)
"""


def old_task(tmp_path: Path, head: str) -> Path:
    folder = tmp_path / "task"
    shutil.copytree(TASK, folder)
    suite = folder / "ci-evals.yaml"
    text = suite.read_text(encoding="utf-8")
    assert NEW_HEAD in text, "the task's head changed: update this test"
    suite.write_text(text.replace(NEW_HEAD, head), encoding="utf-8")
    return suite


def check(suite: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    stub = f"stub:{suite.parent / 'stub.yaml'}"
    command = [sys.executable, "-m", "ci_evals", "check", "--suite", str(suite), "--model", stub]
    return subprocess.run(
        [*command, *extra], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_old_loop_block_warns_once_at_its_key(tmp_path: Path) -> None:
    head = "agent: loop\nloop:\n  max_steps: 20\n  context: {strategy: summary, keep_last: 8}\n"
    head += "sandbox: {kind: docker, image: python-mcp}\n"
    suite = old_task(tmp_path, head)
    line = suite.read_text(encoding="utf-8").splitlines().index("loop:") + 1
    done = check(suite)
    assert done.returncode == 0, done.stderr
    warnings = [w for w in done.stderr.splitlines() if "warning" in w]
    assert warnings == [
        f"ci-evals: warning: {suite}:{line}: loop: is the old form; write agent: "
        "{kind: loop, <its keys>}"
    ]


def test_a_top_level_image_for_isolation_docker_still_loads(tmp_path: Path) -> None:
    # Before the seams merge `image:` was checked and kept whatever the suite's
    # sandbox, so a bwrap suite ran in docker with `--isolation docker`.
    suite = old_task(tmp_path, "agent: {kind: loop, max_steps: 20}\nimage: python-mcp\n")
    line = suite.read_text(encoding="utf-8").splitlines().index("image: python-mcp") + 1
    for extra in ((), ("--isolation", "docker")):
        done = check(suite, *extra)
        assert done.returncode == 0, done.stderr
        warnings = [w for w in done.stderr.splitlines() if "warning" in w]
        assert warnings == [
            f"ci-evals: warning: {suite}:{line}: top-level image: python-mcp is the old form; "
            "write sandbox: {kind: bwrap, docker: {image: python-mcp}}"
        ]


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ("agent: {max_steps: 3}\n", ":5:8: agent: needs a kind"),
        ("agent: claude\nloop: {max_steps: 3}\n", ":6:7: loop: configures agent loop, but"),
        ("agent: {kind: loop}\nloop: {max_steps: 3}\n", ":6:7: loop: and agent: {kind: loop"),
        (
            "agent: loop\nsandbox: {kind: docker, image: python-mcp}\nnetwork: true\n",
            ":7:10: network: and sandbox: {kind: ...} both configure",
        ),
    ],
)
def test_a_bad_block_is_one_line_naming_its_key_once(
    tmp_path: Path, head: str, expected: str
) -> None:
    done = check(old_task(tmp_path, head))
    assert done.returncode == 2
    (line, *_) = [text for text in done.stderr.splitlines() if "problem" not in text]
    assert expected in line, line
