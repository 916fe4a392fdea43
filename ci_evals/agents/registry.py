"""Agent backends by name, and the one factory every command uses.

The suite names its backend (`agent:`, default `claude`); `build_agent` wraps
it in the retry policy for endpoint errors (`retry`). Backends are imported
on first use: the claude backend pulls in the SDK (~0.8 s).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ci_evals.agents import Agent, StageOutcome, StageRequest
from ci_evals.errors import UserError

DEFAULT_AGENT = "claude"

# name -> (module, class). Adding a backend is a module and a line here.
AGENTS: dict[str, tuple[str, str]] = {
    "claude": ("ci_evals.agents.claude", "ClaudeAgent"),
    "loop": ("ci_evals.agents.loop", "LoopAgent"),
}


def get_agent(name: str) -> Agent:
    """The backend registered as `name`; an unknown name lists the valid ones."""
    if name not in AGENTS:
        valid = ", ".join(sorted(AGENTS))
        raise UserError(f"unknown agent {name!r}", hint=f"valid agents: {valid}")
    module_name, class_name = AGENTS[name]
    module = importlib.import_module(module_name)
    agent: Agent = getattr(module, class_name)()
    return agent


def build_agent(
    name: str = DEFAULT_AGENT,
    *,
    on_retry: Callable[[StageRequest, StageOutcome, int, float], None] | None = None,
) -> Agent:
    """The backend `name`, re-running a stage whose endpoint failed (5xx/529)."""
    from ci_evals.agents.retry import RetryingAgent  # noqa: PLC0415 - registry stays light

    return RetryingAgent(get_agent(name), on_retry=on_retry)
