"""`ci-evals check` asks Claude Code's own loader (agents.plugin_load) about the
suite's plugin, as `init` does: a plugin it refuses fails `check` in one line
quoting its reason, a part it drops is a note, and with no Claude Code CLI
installed the check is skipped, said so, never a crash. Real plugins broken in
the ways the loader refuses, the real bundled CLI."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.commands.test_check import check, project
from tests.onboarding_helpers import write

MANIFEST = "plugin/.claude-plugin/plugin.json"
OK = (
    "ci-evals check: OK: ci-evals.yaml: 2 stages, 2 scenarios, stage map stage_map.yaml, "
    "model stub:stub.yaml, from stage 1 (explore)"
)


def test_a_plugin_claude_code_refuses_fails_check_quoting_its_loader(tmp_path: Path) -> None:
    project(tmp_path)
    # As wshobson/agents' pptx-deck-creation ships it: `agents` names a folder.
    write(tmp_path / MANIFEST, '{"name": "feature-dev", "agents": ["./agents"]}\n')
    proc = check(tmp_path, "--model", "stub:stub.yaml")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"ci-evals check: {MANIFEST}: Claude Code does not load this plugin: agents.0: "
        'Invalid string: must end with ".md" (fix it as the reason says (claude plugin '
        "validate PLUGIN_DIR lists every problem); as it is, every stage would fail with "
        "that reason)",
        "ci-evals check: 1 problem; nothing was started",
    ]


def test_a_part_claude_code_drops_is_a_note(tmp_path: Path) -> None:
    project(tmp_path)
    write(
        tmp_path / MANIFEST,
        '{"name": "feature-dev", "agents": ["./agents/code-reviewer.md", "./agents/gone.md"]}\n',
    )
    proc = check(tmp_path, "--model", "stub:stub.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == OK
    assert proc.stderr.splitlines() == [
        "ci-evals check: note: Claude Code loads the plugin less a part: Path not found: "
        "agents/gone.md (agents)"
    ]


def test_without_a_claude_code_cli_the_load_check_is_skipped_and_said(tmp_path: Path) -> None:
    project(tmp_path)
    write(tmp_path / MANIFEST, '{"name": "feature-dev", "agents": ["./agents"]}\n')
    # The SDK as a wheel without its bundled binary installs it, and no `claude` on
    # PATH: a copy of the real package, less `_bundled/`, ahead on the import path.
    spec = importlib.util.find_spec("claude_agent_sdk")
    assert spec is not None and spec.origin is not None
    packages = tmp_path.parent / "no-cli"
    shutil.copytree(
        Path(spec.origin).parent,
        packages / "claude_agent_sdk",
        ignore=shutil.ignore_patterns("_bundled", "__pycache__"),
    )
    path = [Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")]
    assert not any((folder / "claude").exists() for folder in path)
    env = dict(os.environ, PYTHONPATH=str(packages), PATH=os.pathsep.join(map(str, path)))
    proc = subprocess.run(
        [sys.executable, "-m", "ci_evals", "check", "--model", "stub:stub.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == OK
    assert proc.stderr.splitlines() == [
        "ci-evals check: note: could not ask Claude Code whether it loads the plugin (load "
        "check skipped): no Claude Code CLI (pip install claude-agent-sdk)"
    ]
