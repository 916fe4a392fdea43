"""The `claude` kind: the real claude-agent-sdk (`agents.claude`), which has no
options of its own in the suite (its model, limits and plugin are the suite's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ci_evals.errors import UserError

if TYPE_CHECKING:
    from ci_evals.agents import Agent
    from ci_evals.agents.base import Variation
    from ci_evals.config.yaml_source import LocatedNode


class ClaudeKind:
    name = "claude"
    needs_plugin = True

    def load(self, value: LocatedNode | None) -> None:
        if value is not None:
            value.mapping(("kind",), what="mapping (agent claude takes no options)")

    def available(self) -> str | None:
        return None  # the SDK is a dependency; its CLI is bundled

    def with_variation(self, options: object | None, variation: Variation) -> None:
        raise UserError(
            "agent claude has no system prompt or tool set to vary",
            hint="leave system_prompts and tool_sets out of the matrix",
        )

    def create(self) -> Agent:
        from ci_evals.agents.claude import ClaudeAgent  # noqa: PLC0415 - the SDK (~0.8 s)

        return ClaudeAgent()


KIND = ClaudeKind()
