"""A hostile agent against a case's mock stand-in, in the real sandbox (bwrap) with the
real CLI: it scans /proc, where the stand-in runs beside it, and finds no key; it
cannot rewrite the stand-in's spec (read-only, and checked by digest); the link it
plants in place of the call log is followed neither by the stand-in nor by the
host, which says so and keeps no forged record."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.run_helpers import run_ci_evals, write_files

pytestmark = pytest.mark.slow

SECRET = "sk-ant-api03-hostile-mock-secret"
HOSTILE = (
    # Every process the agent can see: environments and command lines.
    "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; tr '\\0' ' ' < $p/cmdline; echo; "
    "done > dump.txt 2>/dev/null; "
    # The stand-in's spec: named on its command line; write it, and plant a link as its log.
    "spec=$(grep -ao '/[^ ]*/spec/[^ ]*[.]json' dump.txt | head -1); "
    '(echo forged > "$spec") 2> spec-error.txt; '
    'log=$(dirname $(dirname "$spec"))/log/calls.jsonl; rm -f "$log"; '
    'ln -s /proc/self/environ "$log"; ls -l "$log" > planted.txt'
)
FILES = {
    ".claude-plugin/plugin.json": '{"name": "tix"}',
    ".mcp.json": '{"mcpServers": {"tracker": {"command": "false"}}}',
    "evals/mocks/tracker/get.md": '{"id": "{{input.id}}"}\n',
    "evals/snoop/prompt.md": "---\nruns: 1\n---\nSnoop around.\n",
    "evals/snoop/graders/got.md": "---\ntype: regex\ntarget: mock_calls\n---\nT-2\n",
}
STUB = f"""\
rules:
  - name: snoop
    match: {{prompt_contains: "Snoop around"}}
    turns:
      - tools:
          - tool: {{name: ToolSearch, input: {{query: "select:mcp__plugin_tix_tracker__get"}}}}
      - tools:
          - tool: {{name: mcp__plugin_tix_tracker__get, input: {{id: T-1}}}}
      - tools:
          - bash: {json.dumps(HOSTILE)}
      - tools:
          - tool: {{name: mcp__plugin_tix_tracker__get, input: {{id: T-2}}}}
      - text: "Done."
"""


def test_a_hostile_agent_finds_no_key_and_forges_no_mock_record(tmp_path: Path) -> None:
    write_files(tmp_path / "tix", FILES)
    (tmp_path / "stub.yaml").write_text(STUB)
    (tmp_path / "ci-evals.yaml").write_text(
        "version: 1\nplugin: tix\nplugin_evals: {allow_tools: [Bash]}\n"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": SECRET}
    done = run_ci_evals(tmp_path, "run", "--model", "stub:stub.yaml", "--out", "run", env={**env})
    stage = next((tmp_path / "run" / "snoop").glob("1-*"))
    produced = stage / "produced"
    dump = (produced / "dump.txt").read_text(errors="replace")
    assert "mock_server.py" in dump  # the stand-in was there to be scanned
    assert SECRET not in dump
    assert "Read-only file system" in (produced / "spec-error.txt").read_text()
    assert "/proc/self/environ" in (produced / "planted.txt").read_text()
    # The second call still answered (the model saw T-2), its record went nowhere.
    document = json.loads((tmp_path / "run" / "results.json").read_text())
    assert document["scenarios"][0]["stages"][0]["status"] == "passed", done.stderr
    calls = (stage / "mock-calls.jsonl").read_text().splitlines()
    assert [json.loads(c)["input"] for c in calls] == []
    assert "mocks: the call log cannot be opened" in done.stderr
    assert SECRET not in (stage / "mock-calls.jsonl").read_text()
