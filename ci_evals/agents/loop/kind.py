"""The `loop` kind: a bounded tool loop over the Messages API (`agents.loop.agent`),
configured by its block of the suite (`agent: {kind: loop, ...}` -> `LoopConfig`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ci_evals.agents.loop.config import LoopConfig, load_loop_config, load_tools

if TYPE_CHECKING:
    from ci_evals.agents import Agent
    from ci_evals.agents.base import Variation
    from ci_evals.config.yaml_source import LocatedNode


class LoopKind:
    name = "loop"
    needs_plugin = False  # a task, not a plugin: the suite may leave `plugin:` out

    def load(self, value: LocatedNode | None) -> LoopConfig:
        return LoopConfig() if value is None else load_loop_config(value)

    def available(self) -> str | None:
        return None

    def with_variation(self, options: object | None, variation: Variation) -> LoopConfig:
        config = options if isinstance(options, LoopConfig) else LoopConfig()
        if variation.system_prompt is not None:
            config = dataclasses.replace(config, system_prompt=variation.system_prompt)
        if variation.where is not None:  # the matrix's tool set, checked at its file:line
            config = dataclasses.replace(config, tools=load_tools(variation.where))
        elif variation.tools is not None:
            config = dataclasses.replace(config, tools=variation.tools)
        return config

    def create(self) -> Agent:
        from ci_evals.agents.loop.agent import LoopAgent  # noqa: PLC0415 - the Messages API client

        return LoopAgent()


KIND = LoopKind()
