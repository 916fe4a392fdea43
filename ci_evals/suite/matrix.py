"""Agent configurations for `ci-evals run --tasks`: model x system prompt x tool set.

A matrix file (`--matrix FILE`) names the values to vary; every combination
is one configuration, run on every task. What a file leaves out is each
task's own (its suite's `model:`, its `loop:` prompt and tools), so no file
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
from dataclasses import dataclass
from pathlib import Path

from ci_evals.agents.loop_config import LoopConfig, load_tools
from ci_evals.config.yaml_source import ANY_KEY, Field, load
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
        """`suite` as this configuration runs it (a varied prompt or tool set: `agent: loop`)."""
        if self.system_prompt is None and self.tools is None:
            return suite
        if suite.loop is None:
            raise UserError(
                f"task {task!r} is not an agent: loop suite; the matrix varies its system "
                "prompt or tools",
                file=suite.display,
                hint="leave system_prompts and tool_sets out, or make the task agent: loop",
            )
        loop: LoopConfig = suite.loop
        if self.system_prompt is not None:
            loop = dataclasses.replace(loop, system_prompt=self.system_prompt[1])
        if self.tools is not None:
            loop = dataclasses.replace(loop, tools=self.tools[1])
        return dataclasses.replace(suite, loop=loop)


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
    tool_sets: list[tuple[str, tuple[str, ...]] | None] = [None]
    if "tool_sets" in keys:
        tool_sets = [(name, load_tools(value)) for name, value in _named(keys["tool_sets"])]
    return tuple(
        Configuration(model, prompt, tools)
        for model, prompt, tools in itertools.product(models, prompts, tool_sets)
    )


def _named(value: Field) -> list[tuple[str, Field]]:
    """A non-empty mapping of names (letters, digits, `_`, `-`) to values."""
    items = list(value.mapping(ANY_KEY).items())
    if not items:
        raise value.error("needs at least one name: value")
    for name, item in items:
        if not _NAME.fullmatch(name):
            raise item.error(f"bad name {name!r}", hint="letters, digits, '_' and '-'")
    return items
