"""The agent seam's `AgentKind`: one backend as the registry (`agents.registry`)
knows it. The `Agent` Protocol it creates, and the records a stage runs on
(`StageRequest`, `StageOutcome`), are in the package (`ci_evals.agents`).

A kind reads its own block of the suite (`agent: {kind: K, ...}` -> its
options, file:line errors), says whether it can run here, and makes the
backend. A built-in kind lives in a light module (the claude backend's SDK is
imported only by `create`); a package adds one with an entry point in group
`ci_evals.agents`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ci_evals.agents import Agent
    from ci_evals.config.yaml_source import LocatedNode


@dataclass(frozen=True)
class AgentConfig:
    """The suite's agent: a kind and its options (what `AgentKind.load` gave; the
    backend gets them as `StageRequest.options`)."""

    kind: str = "claude"
    options: object | None = None


@dataclass(frozen=True)
class Variation:
    """What `ci-evals run --tasks --matrix` varies of an agent (None: the task's own).
    `where` is the matrix's tool set as written, for the kind to check at its file:line."""

    system_prompt: str | None = None
    tools: tuple[str, ...] | None = None
    where: LocatedNode | None = None


class AgentKind(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def needs_plugin(self) -> bool:
        """False: a suite may leave `plugin:` out (the agent runs a task, not a plugin)."""

    def load(self, value: LocatedNode | None) -> object | None:
        """Its options from its block (None: the suite named it bare); mistakes are
        `LocatedNode.error`s at their file:line."""

    def available(self) -> str | None:
        """Why it cannot run here, in one line; None when it can."""

    def with_variation(self, options: object | None, variation: Variation) -> object | None:
        """`options` with a matrix configuration's system prompt or tools; a `UserError`
        when this agent has neither to vary."""

    def create(self) -> Agent:
        """A backend that runs stages (it may import what is heavy now)."""
