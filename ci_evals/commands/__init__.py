"""The subcommands, by name: module path and one-line summary.

Each module defines `add_arguments(parser)` and `run(args) -> int`. Keep heavy
imports inside `run`, so that `--help` and the hot commands stay fast.
"""

from __future__ import annotations

COMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "ci_evals.commands.run",
        "run stages N..last of the suite's scenarios through the agent",
    ),
    "compute-stage": (
        "ci_evals.commands.compute_stage",
        "print the lowest stage a change from BASE to HEAD can affect",
    ),
    "grade": (
        "ci_evals.commands.grade",
        "re-grade a saved run (changed rubric, threshold or check) without running any stage",
    ),
    "report": (
        "ci_evals.commands.report",
        "JUnit XML and a Markdown summary of a saved run, for CI reporters and the step summary",
    ),
    "check-fixtures": (
        "ci_evals.commands.check_fixtures",
        "grade the curated fixtures with their stage's reviewer and checks: good work must pass",
    ),
    "check-coverage": (
        "ci_evals.commands.check_coverage",
        "fail when a plugin file is covered by no stage-map entry, or an entry matches nothing",
    ),
    "mcp-check": (
        "ci_evals.commands.mcp_check",
        "check an MCP server over stdio: every sub-test of the mcp grader, a fresh process each",
    ),
}

# Commands that drive agents, read results.json (pydantic models) or check
# JSON Schemas (mcp-check): they need the `run` extra (claude-agent-sdk,
# pydantic, jsonschema), checked by `main` before their module is imported.
NEEDS_RUN_EXTRA = frozenset({"run", "grade", "check-fixtures", "report", "mcp-check"})
