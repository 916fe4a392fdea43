"""How the `loop` agent (`agents.loop.agent`) runs a stage: its block of the suite
(`agent: {kind: loop, ...}`, read by `agents.loop.kind`).

Validated once, at load, into a frozen `LoopConfig`; every mistake names its
file:line and key. The same record is what `ci-evals run --tasks` varies per
agent configuration (`--matrix`: model x system prompt x tool set).

```yaml
agent:
  kind: loop
  max_steps: 20             # the step ceiling: model turns before the run is halted
  tools: [run_command, write_file, read_file, list_directory, final_submit]
  system_prompt: "..."      # default: DEFAULT_SYSTEM_PROMPT
  context: {strategy: summary, keep_last: 6}   # full | window | summary
  command_timeout_s: 120    # one run_command's ceiling (the stage's time left caps it too)
  output_chars: 16000       # what one tool output may give back to the model
  max_tokens: 8192          # per model response
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from ci_evals.config.yaml_source import LocatedNode

TOOL_NAMES = ("run_command", "write_file", "read_file", "list_directory", "final_submit")
ContextStrategy = Literal["full", "window", "summary"]
STRATEGIES: tuple[ContextStrategy, ...] = ("full", "window", "summary")

DEFAULT_SYSTEM_PROMPT = (
    "You are a software engineer working alone in a sandboxed workspace with no network. "
    "Act only through the tools. Paths are relative to the workspace. Check your work by "
    "running it. When the task is done, call final_submit; you have a limited number of steps."
)
DEFAULT_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class LoopConfig:
    max_steps: int = 20
    tools: tuple[str, ...] = TOOL_NAMES
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    context: ContextStrategy = "full"
    # With `window`/`summary`: how many of the latest steps keep their tool
    # outputs whole; older ones are dropped or summarised.
    keep_last: int = 6
    command_timeout_s: float = 120.0
    output_chars: int = 16_000
    max_tokens: int = 8192


_KEYS = (
    "max_steps",
    "tools",
    "system_prompt",
    "context",
    "command_timeout_s",
    "output_chars",
    "max_tokens",
)


def load_loop_config(value: LocatedNode, defaults: LoopConfig | None = None) -> LoopConfig:
    """The loop's block (its `kind` aside) over `defaults`; UserError with file:line."""
    keys = value.mapping(("kind", *_KEYS))
    changes: dict[str, object] = {}
    if "max_steps" in keys:
        changes["max_steps"] = keys["max_steps"].as_int(minimum=1, maximum=10_000)
    if "tools" in keys:
        changes["tools"] = load_tools(keys["tools"])
    if "system_prompt" in keys:
        changes["system_prompt"] = keys["system_prompt"].as_str()
    if "context" in keys:
        base_keep = (defaults or LoopConfig()).keep_last
        changes["context"], changes["keep_last"] = _load_context(keys["context"], base_keep)
    if "command_timeout_s" in keys:
        changes["command_timeout_s"] = keys["command_timeout_s"].as_number(minimum=0.001)
    if "output_chars" in keys:
        changes["output_chars"] = keys["output_chars"].as_int(minimum=200)
    if "max_tokens" in keys:
        changes["max_tokens"] = keys["max_tokens"].as_int(minimum=1)
    return dataclasses.replace(defaults or LoopConfig(), **changes)  # type: ignore[arg-type]


def load_tools(value: LocatedNode) -> tuple[str, ...]:
    """A tool set: known names, no repeats; `final_submit` is always in it (without
    it a run could only ever be halted)."""
    names: list[str] = []
    for item in value.sequence(allow_empty=False):
        name = item.as_str()
        if name not in TOOL_NAMES:
            raise item.error(f"unknown tool {name!r}", hint=f"valid: {', '.join(TOOL_NAMES)}")
        if name in names:
            raise item.error(f"tool {name!r} listed twice")
        names.append(name)
    if "final_submit" not in names:
        names.append("final_submit")
    return tuple(names)


def _load_context(value: LocatedNode, keep_last: int) -> tuple[ContextStrategy, int]:
    keys = value.mapping(("strategy", "keep_last"), required=("strategy",))
    strategy = keys["strategy"].as_str()
    if strategy not in STRATEGIES:
        raise keys["strategy"].error(
            f"unknown context strategy {strategy!r}", hint=f"valid: {', '.join(STRATEGIES)}"
        )
    if "keep_last" in keys:
        keep_last = keys["keep_last"].as_int(minimum=1)
    return strategy, keep_last
