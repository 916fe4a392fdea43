"""What a stage called: tools, skills and subagents, read from its trajectory.

The trajectory is the stage's SDK messages as JSON lines. The runner owns its
exact envelope; this reader only relies on what every shape shares: a tool
call is an object with a string `name`, an object `input`, and an `id` (the
SDK's `ToolUseBlock` as a dict) or `"type": "tool_use"` (the CLI's
stream-json). It accepts the SDK's message dataclasses as dicts
(`AssistantMessage.content`), wrapped in any envelope
(`{"type": ..., "message": {...}, "ts": ...}`). Calls made inside subagents
are messages of the same stream, so they count too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

What = Literal["tool", "skill", "subagent"]


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: Mapping[str, Any]


def read_tool_uses(path: Path) -> list[ToolUse]:
    """Every tool call in a trajectory file; OSError or ValueError (naming the line)."""
    with path.open(encoding="utf-8") as lines:
        return tool_uses(lines)


def tool_uses(lines: Iterable[str]) -> list[ToolUse]:
    """Every tool call in JSON lines (blank lines skipped); ValueError names a bad line."""
    found: list[ToolUse] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            found.extend(_walk(message))
        except RecursionError:  # the agent controls what its tools echo back
            raise ValueError(f"line {number} is not JSON (nested too deeply)") from None
        except ValueError as exc:
            raise ValueError(f"line {number} is not JSON ({exc})") from None
    return found


def _walk(value: Any) -> Iterator[ToolUse]:
    if isinstance(value, dict):
        name, given = value.get("name"), value.get("input")
        if (
            isinstance(name, str)
            and isinstance(given, dict)
            and ("id" in value or value.get("type") in ("tool_use", "server_tool_use"))
        ):
            yield ToolUse(name=name, input=given)
            return  # a tool's input is data, not messages
        for child in value.values():
            yield from _walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from _walk(child)


def same_name(want: str, got: str) -> bool:
    """`lab-planner` matches `labsmith:lab-planner`; a namespaced name matches only itself."""
    return want == got or (":" not in want and got.rsplit(":", 1)[-1] == want)


def is_call(use: ToolUse, what: What, name: str) -> bool:
    """Is `use` a call of the tool / skill / subagent `name`?"""
    if what == "tool":
        return use.name == name
    if what == "skill":
        skill = use.input.get("skill")
        return use.name == "Skill" and isinstance(skill, str) and same_name(name, skill)
    # The subagent tool was called Task before it was called Agent.
    kind = use.input.get("subagent_type", "general-purpose")
    return use.name in ("Agent", "Task") and isinstance(kind, str) and same_name(name, kind)


def count_calls(uses: Iterable[ToolUse], what: What, name: str) -> int:
    return sum(1 for use in uses if is_call(use, what, name))


def last_assistant_text(lines: Iterable[str]) -> str | None:
    """The text of the last assistant message that has any (its text blocks joined by
    newlines), subagents' included, as `claude plugin eval` reads `last_message`;
    None when no message has text. ValueError names a line that is not JSON."""
    last: str | None = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"line {number} is not JSON ({exc})") from None
        if not isinstance(message, dict) or message.get("type") != "AssistantMessage":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        if texts:
            last = "\n".join(texts)
    return last
