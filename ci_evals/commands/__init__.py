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
    "forecast": (
        "ci_evals.commands.forecast",
        "price a run from the base's last runs before it starts; gate the spend",
    ),
    "plan": (
        "ci_evals.commands.plan",
        "split a run into K shards for CI's job matrix, balanced by recorded durations",
    ),
    "merge": (
        "ci_evals.commands.merge",
        "merge the results of a run's shards into one run folder, refusing a mismatch",
    ),
    "record": (
        "ci_evals.commands.record",
        "promote a run's recording (run --record) into recordings/NAME/, fit to commit",
    ),
    "init": (
        "ci_evals.commands.init",
        "draft a suite for a plugin (stage map, ci-evals.yaml, fixtures, stub script, "
        "pre-commit hook), never overwriting a file",
    ),
    "check": (
        "ci_evals.commands.check",
        "check everything a run checks first (suite, map, stub script, commands, fixtures), "
        "listing every problem; nothing is started",
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
    "import": (
        "ci_evals.commands.import_run",
        "a `claude plugin eval` aggregate-result.json as a run folder, for report, the PR "
        "comment and --baseline",
    ),
    "baseline": (
        "ci_evals.commands.baseline",
        "fetch the baseline run for `report --baseline` (the last successful run's artifact)",
    ),
    "comment": (
        "ci_evals.commands.comment",
        "fork pull requests: pack a run for the trusted workflow, or check that artifact and post",
    ),
    "check-fixtures": (
        "ci_evals.commands.check_fixtures",
        "grade the curated fixtures with their stage's reviewer and checks: good work must pass",
    ),
    "fixtures": (
        "ci_evals.commands.fixtures",
        "promote a passing run's saved stage state to the stage's fixture (fixtures update)",
    ),
    "check-coverage": (
        "ci_evals.commands.check_coverage",
        "fail when a plugin file is covered by no stage-map entry, or an entry matches nothing",
    ),
    "mcp-check": (
        "ci_evals.commands.mcp_check",
        "check an MCP server over stdio: every sub-test of the mcp grader, a fresh process each",
    ),
    "sandbox": (
        "ci_evals.commands.sandbox",
        "build a sandbox image from its recipe (debootstrap + wheels, no registry)",
    ),
    "gc": (
        "ci_evals.commands.gc",
        "remove the Docker containers a crashed ci-evals left behind",
    ),
}

# Commands that drive agents, or check JSON Schemas (mcp-check), or read
# results.json beside them: they need the `run` extra (claude-agent-sdk,
# anthropic, jsonschema), checked by `main` before their module is imported.
NEEDS_RUN_EXTRA = frozenset(
    {
        "run",
        "forecast",
        "plan",
        "merge",
        "init",
        "check",
        "grade",
        "check-fixtures",
        "import",
        "fixtures",
        "mcp-check",
    }
)
# Ways of running those commands that drive no agent: they need only pydantic
# and jsonschema (what the `ci-evals-fixtures` pre-commit hook installs).
NO_AGENT_FLAGS = {"check-fixtures": "--contracts-only", "fixtures": ""}
# `report`, `comment` and `baseline` are not listed: they read results.json
# (pydantic, in the core) and talk to GitHub (the standard library's HTTP), so a
# trusted comment job installs no agent SDK.
