"""Review of issue 32: a case run that reaches its `max_turns` is graded by `claude
plugin eval` (the CLI grades every run it finished, the child's `error_max_turns`
included); ci-evals must score it alike, or document why not.

The case's one grader looks for the file the first (and only) turn wrote: the
CLI scores the case 1.0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.run_helpers import plugin_eval, write_tree

pytestmark = pytest.mark.slow

FILES = {
    ".claude-plugin/plugin.json": '{"name": "turns"}\n',
    "evals/short/prompt.md": "---\nruns: 1\nmax_turns: 1\n---\nWrite the note for Alex.\n",
    "evals/short/graders/wrote.md": "---\ntype: file_exists\npath: note.txt\n---\n",
}
STUB = """\
rules:
  - name: short
    match: {prompt_contains: "note for Alex"}
    turns:
      - tools:
          - write: {path: note.txt, content: "hi\\n"}
      - text: "Done."
"""


def test_a_run_at_its_turn_limit_is_graded_as_the_cli_grades_it(tmp_path: Path) -> None:
    plugin = write_tree(tmp_path / "turns", FILES)
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB)
    out = tmp_path / "cli.json"
    with StubServer(load_script(stub)) as server:
        done = plugin_eval(
            plugin, tmp_path / "home", server.url, "--allow-tools", "Write", "--json", str(out)
        )
    assert out.is_file(), done.stdout + done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    theirs = case["aggregates"]["score"]
    assert theirs == 1.0, case  # the CLI graded the run that hit max_turns

    (tmp_path / "ci-evals.yaml").write_text(
        "version: 1\nplugin: turns\nplugin_evals:\n  allow_tools: [Write]\n"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", "--model", f"stub:{stub}", "--out", "run"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    results = tmp_path / "run" / "results.json"
    assert results.is_file(), ran.stdout + ran.stderr
    (summary,) = json.loads(results.read_text())["summaries"]
    ours = (summary["summary"]["binary_score"] or {}).get("mean")
    assert ours is not None and ours / 100 == pytest.approx(theirs), (summary, ran.stderr)
