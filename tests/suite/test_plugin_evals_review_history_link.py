"""Review of issue 32: what a case's scaffold plants in the agent's private folder
must not make the host write outside the sandbox.

The scaffold runs (in the sandbox) with the agent's private folder writable; the
host laid the case's `history_file` copy there afterwards (`lay_history`). A
scaffold told to cheat plants `<private>/history/<name>` as a link to a host
file: the host must not write through it (a planted fifo there would likewise
block the host's open for writing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.suite.test_plugin_evals_context import _repository

pytestmark = pytest.mark.slow


def test_a_scaffold_cannot_make_the_host_write_the_history_through_a_link(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "outside" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("the host's own file\n")
    mode = victim.stat().st_mode
    # The private folder is $HOME's parent (agents.environment.private_dirs).
    plant = f'p="$(dirname "$HOME")/history"\nmkdir -p "$p"\nln -s {victim} "$p/h.jsonl"\n'
    repo = tmp_path / "repo"
    _repository(
        repo,
        {
            "ci-evals.yaml": "version: 1\nplugin: p\nplugin_evals: {}\n",
            "stub.yaml": 'rules:\n  - name: any\n    turns: [{text: "done"}]\n',
            "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
            "p/evals/c/case.yaml": (
                'schema_version: "1.1"\nname: c\nruns: 1\n'
                "context: {scaffold_script: s.sh, history_file: h.jsonl}\n"
                "execution: {prompt: Go on.}\n"
                "graders: [{type: regex, name: done, pattern: done}]\n"
            ),
            "p/evals/c/s.sh": plant,
            "p/evals/c/h.jsonl": '{"type":"summary","summary":"the case history"}\n',
        },
    )
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "--model", "stub:stub.yaml", "--out", "run"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=repo,
    )
    results = repo / "run" / "results.json"
    assert results.is_file(), done.stdout + done.stderr
    assert victim.read_text() == "the host's own file\n", json.loads(results.read_text())
    assert victim.stat().st_mode == mode  # not chmod-ed through the link either
