"""Optional dependencies: the agent side (`ci-evals[run]`) is not installed with the core.

The core install (pathspec, PyYAML) is what the pre-commit hook and
`compute-stage` need, and what the framework hook installs into every user's
hook environment. Running and grading agents needs the `run` extra
(claude-agent-sdk, anthropic, pydantic, jsonschema); a command that needs it checks for
it here, before importing anything, and says in one line how to get it.
"""

from __future__ import annotations

from importlib.util import find_spec

from ci_evals.errors import UserError

# The top-level modules of the `run` extra (see pyproject.toml).
RUN_EXTRA_MODULES = ("claude_agent_sdk", "anthropic", "pydantic", "jsonschema")
# What a command that drives no agent needs of it (fixture contracts, `fixtures update`).
NO_AGENT_MODULES = ("pydantic", "jsonschema")


def missing_run_extra(modules: tuple[str, ...] = RUN_EXTRA_MODULES) -> list[str]:
    """The `run` extra's modules that cannot be found (without importing them)."""
    return [name for name in modules if find_spec(name) is None]


def require_run_extra(command: str, *, agent: bool = True) -> None:
    """Raise the one-line `UserError` (exit 2) when the `run` extra is not installed
    (`agent=False`: only the part a command that drives no agent needs)."""
    missing = missing_run_extra(RUN_EXTRA_MODULES if agent else NO_AGENT_MODULES)
    if missing:
        raise UserError(
            f"ci-evals {command} needs the agent dependencies: pip install 'ci-evals[run]'",
            hint=f"missing: {', '.join(missing)}",
        )
