"""Agent configurations for `ci-evals run --tasks`: model x system prompt x tool set.

A matrix file (`--matrix FILE`) names the values to vary; every combination
is one configuration, run on every task. What a file leaves out is each
task's own (its suite's `model:`, its agent's prompt and tools), so no file
at all is the one configuration `task` (docs/loop-agent.md):

```yaml
models: [claude-sonnet-4-5, claude-haiku-4-5]   # or stub:PATH; default: --model
system_prompts:                                  # name -> text
  terse: "You are a careful engineer. Be brief."
  plan-first: "Plan before you write code; test before you submit."
tool_sets:                                       # name -> tools (final_submit always added)
  all: [run_command, write_file, read_file, list_directory]
  shell-only: [run_command]
```
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from ci_evals.agents.base import Variation
from ci_evals.agents.registry import KINDS
from ci_evals.config.yaml_source import ANY_KEY, LocatedNode, load
from ci_evals.errors import UserError
from ci_evals.suite.load import Suite

OWN_LABEL = "each task's own model, prompt and tools"  # no matrix
_FOLDER_MAX = 40
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Configuration:
    """One agent configuration; `None` in a dimension means each task's own."""

    model: str | None = None
    system_prompt: tuple[str, str] | None = None  # (name, text)
    tools: tuple[str, tuple[str, ...]] | None = None  # (name, tool names)
    # The tool set as written: the agent kind checks its names there (`AgentKind.with_variation`).
    tools_field: LocatedNode | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """What it sets, named (`model claude-sonnet-4-5, prompt brief, tools all`),
        as the tables show it; what it leaves to each task is left out. Two
        configurations differ in what they set, so their labels differ."""
        parts = [f"{kind} {value}" for kind, value in self._set()]
        return ", ".join(parts) if parts else OWN_LABEL

    def folder(self, number: int) -> str:
        """A short, path-safe folder name: its number (unique) and what it sets
        (`2-sonnet-4-5_brief_all`; a stub model by its script's name, `stub-tasks`)."""
        short = [_short(kind, value) for kind, value in self._set()]
        slug = _UNSAFE.sub("-", "_".join(short)).strip("-_")[:_FOLDER_MAX] or "own"
        return f"{number}-{slug}"

    def _set(self) -> list[tuple[str, str]]:
        found = []
        if self.model is not None:
            found.append(("model", self.model))
        if self.system_prompt is not None:
            found.append(("prompt", self.system_prompt[0]))
        if self.tools is not None:
            found.append(("tools", self.tools[0]))
        return found

    def apply(self, suite: Suite, task: str) -> Suite:
        """`suite` as this configuration runs it (a varied prompt or tool set: its agent
        kind's `with_variation`, which refuses when that agent has neither)."""
        if self.system_prompt is None and self.tools is None:
            return suite
        variation = Variation(
            system_prompt=None if self.system_prompt is None else self.system_prompt[1],
            tools=None if self.tools is None else self.tools[1],
            where=self.tools_field,
        )
        try:
            options = KINDS.get(suite.agent.kind).with_variation(suite.agent.options, variation)
        except UserError as exc:
            if exc.file is not None:
                raise
            raise UserError(
                f"task {task!r}: {exc.message}", file=suite.display, hint=exc.hint
            ) from None
        return dataclasses.replace(suite, agent=dataclasses.replace(suite.agent, options=options))


def _short(kind: str, value: str) -> str:
    """A model as its name without the vendor's prefix; a stub as `stub-<script>`."""
    if kind != "model":
        return value[:16]
    if value.startswith("stub:"):
        script = Path(value.removeprefix("stub:"))
        name = script.parent.name if script.stem == "stub" and script.parent.name else script.stem
        return "stub-" + name[:16]
    return value.removeprefix("claude-")[:24]


def load_matrix(path: Path | None) -> tuple[Configuration, ...]:
    """The configurations of a matrix file, in file order (models vary slowest)."""
    if path is None:
        return (Configuration(),)
    root = load(path, str(path))
    keys = root.mapping(("models", "system_prompts", "tool_sets"))
    models: list[str | None] = [None]
    if "models" in keys:
        models = list(dict.fromkeys(item.as_str() for item in keys["models"].sequence(False)))
    prompts: list[tuple[str, str] | None] = [None]
    if "system_prompts" in keys:
        prompts = [(name, value.as_str()) for name, value in _named(keys["system_prompts"])]
    tool_sets: list[tuple[str, LocatedNode] | None] = [None]
    if "tool_sets" in keys:
        tool_sets = [(name, value) for name, value in _named(keys["tool_sets"])]
    return tuple(
        Configuration(
            model,
            prompt,
            None if tools is None else (tools[0], _tool_names(tools[1])),
            None if tools is None else tools[1],
        )
        for model, prompt, tools in itertools.product(models, prompts, tool_sets)
    )


def _tool_names(value: LocatedNode) -> tuple[str, ...]:
    """A tool set's names as written (non-empty, no repeats); which names an agent
    has is its kind's to say (`AgentKind.with_variation`, at this file:line)."""
    names = value.as_str_list(allow_empty=False)
    for item, name in zip(value.sequence(), names, strict=True):
        if names.count(name) > 1:
            raise item.error(f"tool {name!r} listed twice")
    return tuple(names)


def _named(value: LocatedNode) -> list[tuple[str, LocatedNode]]:
    """A non-empty mapping of names (letters, digits, `_`, `-`) to values."""
    items = list(value.mapping(ANY_KEY).items())
    if not items:
        raise value.error("needs at least one name: value")
    for name, item in items:
        if not _NAME.fullmatch(name):
            raise item.error(f"bad name {name!r}", hint="letters, digits, '_' and '-'")
    return items
