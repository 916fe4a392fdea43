"""Optional dependencies: the agent side (`ci-evals[run]`) is not installed with the core.

The core install (pathspec, PyYAML, pydantic) is what the pre-commit hook and
`compute-stage` need, what the framework hook installs into every user's hook
environment, and all that `report`, `comment` and `baseline fetch` need
(pydantic: the one model that writes results.json validates it). Running and
grading agents needs the `run` extra (claude-agent-sdk, anthropic, jsonschema);
a command that needs it checks for it here, before importing anything, and
says in one line how to get it.
"""

from __future__ import annotations

from importlib.util import find_spec

from ci_evals.errors import UserError

# The top-level modules of each extra (see pyproject.toml).
RUN_EXTRA_MODULES = ("claude_agent_sdk", "anthropic", "jsonschema")
# What a command that drives no agent needs of `run` (fixture contracts, `fixtures update`).
NO_AGENT_MODULES = ("jsonschema",)


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that cannot be found (without importing them)."""
    return [name for name in modules if find_spec(name) is None]


def require_run_extra(command: str, *, agent: bool = True) -> None:
    """Raise the one-line `UserError` (exit 2) when the `run` extra is not installed
    (`agent=False`: only the part a command that drives no agent needs)."""
    missing = missing_modules(RUN_EXTRA_MODULES if agent else NO_AGENT_MODULES)
    if missing:
        raise UserError(
            f"ci-evals {command} needs the agent dependencies: pip install 'ci-evals[run]'",
            hint=f"missing: {', '.join(missing)}",
        )
