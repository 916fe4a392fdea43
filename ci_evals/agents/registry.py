"""Agent kinds by name (`ci_evals.registry`), and the one factory every command uses.

The suite names its backend (`agent:`, default `claude`); `build_agent` wraps
it in the retry policy for endpoint errors (`retry`). Built in: `claude`,
`loop`; a package adds one with an entry point in group `ci_evals.agents`
naming its `AgentKind` (agents.base). Kinds are light; the backend they
create is imported only then (the claude backend pulls in the SDK, ~0.8 s).
"""

from __future__ import annotations

from collections.abc import Callable

from ci_evals.agents import Agent, StageOutcome, StageRequest
from ci_evals.agents.base import AgentConfig, AgentKind
from ci_evals.registry import Registry

DEFAULT_AGENT = "claude"

KINDS: Registry[AgentKind] = Registry(
    "agent",
    "ci_evals.agents",
    {
        "claude": "ci_evals.agents.claude_kind:KIND",
        "loop": "ci_evals.agents.loop.kind:KIND",
    },
    protocol=AgentKind,
)


def get_agent(name: str) -> Agent:
    """The backend registered as `name`, unwrapped; an unknown name lists the known."""
    return KINDS.get(name).create()


def build_agent(
    config: AgentConfig | None = None,
    *,
    on_retry: Callable[[StageRequest, StageOutcome, int, float], None] | None = None,
) -> Agent:
    """The backend `config` names, re-running a stage whose endpoint failed (5xx/529)."""
    from ci_evals.agents.retry import RetryingAgent  # noqa: PLC0415 - registry stays light

    name = (config or AgentConfig(DEFAULT_AGENT)).kind
    return RetryingAgent(get_agent(name), on_retry=on_retry)
