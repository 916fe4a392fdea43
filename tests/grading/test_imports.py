"""The grading config loaders stay cheap: the suite loader may run on hot paths."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from ci_evals.config import yaml_source
from ci_evals.grading.config import load_stage_grading
from pathlib import Path
extra = yaml_source.loads(
    "checks: [{ files: a.md }, { trajectory: { tool: Bash } }]\\n"
    "graders: [{ id: t, command: [echo] }]\\n"
    "scoring: { analytic_mean_at_least: 3.5 }\\n",
    "s.yaml",
).mapping(("checks", "graders", "scoring"))
load_stage_grading(extra, suite_dir=Path("."), plugin_dir=Path("."), within=Path("."))
print(sorted(m for m in ("pydantic", "jsonschema", "claude_agent_sdk") if m in sys.modules))
"""


def test_loading_stage_grading_imports_no_pydantic_or_jsonschema() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
