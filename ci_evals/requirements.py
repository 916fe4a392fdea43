"""Optional dependencies: neither the agent side nor the results reader comes with the core.

The core install (pathspec, PyYAML) is what the pre-commit hook and
`compute-stage` need, what the framework hook installs into every user's hook
environment, and all `baseline fetch` needs (the standard library's HTTP).
Reading `results.json` (`report`, `comment`) needs the `report` extra
(pydantic: the one model that writes the file validates it); running and
grading agents needs the `run` extra (that, plus claude-agent-sdk, anthropic,
jsonschema). A command that needs one checks for it here, before importing
anything, and says in one line how to get it.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Literal

from ci_evals.errors import UserError

# The top-level modules of each extra (see pyproject.toml).
RUN_EXTRA_MODULES = ("claude_agent_sdk", "anthropic", "pydantic", "jsonschema")
REPORT_EXTRA_MODULES = ("pydantic",)
# What a command that drives no agent needs of `run` (fixture contracts, `fixtures update`).
NO_AGENT_MODULES = ("pydantic", "jsonschema")

Extra = Literal["run", "report"]
# What each extra is for, as the one line names it.
_PURPOSE: dict[Extra, str] = {"run": "the agent dependencies", "report": "the results reader"}


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that cannot be found (without importing them)."""
    return [name for name in modules if find_spec(name) is None]


def require_extra(command: str, extra: Extra, modules: tuple[str, ...]) -> None:
    """Raise the one-line `UserError` (exit 2) when one of `modules` (of `extra`) is missing."""
    missing = missing_modules(modules)
    if missing:
        raise UserError(
            f"ci-evals {command} needs {_PURPOSE[extra]}: pip install 'ci-evals[{extra}]'",
            hint=f"missing: {', '.join(missing)}",
        )


def require_run_extra(command: str, *, agent: bool = True) -> None:
    """Raise the one-line `UserError` (exit 2) when the `run` extra is not installed
    (`agent=False`: only the part a command that drives no agent needs)."""
    require_extra(command, "run", RUN_EXTRA_MODULES if agent else NO_AGENT_MODULES)


def require_report_extra(command: str) -> None:
    """Raise the one-line `UserError` (exit 2) when the `report` extra is not installed."""
    require_extra(command, "report", REPORT_EXTRA_MODULES)
