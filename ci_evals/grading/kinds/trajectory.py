"""What a stage called: tools, skills and subagents, read from its trajectory.

The trajectory is the stage's SDK messages as JSON lines. The runner owns its
exact envelope; this reader only relies on what every shape shares: a tool
call is an object with a string `name`, an object `input`, and an `id` (the
SDK's `ToolUseBlock` as a dict) or `"type": "tool_use"` (the CLI's
stream-json). It accepts the SDK's message dataclasses as dicts
(`AssistantMessage.content`), wrapped in any envelope
(`{"type": ..., "message": {...}, "ts": ...}`). Calls made inside subagents
are messages of the same stream, so they count too. A call whose result is an
error (`is_error`: an unknown skill or subagent type) is kept, marked `failed`:
a skill or subagent that never ran did not fire.

Hooks are read from the CLI's hook events (`include_hook_events`; SessionStart
always): `{"subtype": "hook_response", "hook_event": "Stop", "hook_name":
"Stop", "exit_code": 0, "outcome": "success", "stderr": ...}`, a line of its
own (`HookEventMessage`). The event names no plugin: with no settings loaded,
the plugin under test is the only source of hooks besides the CLI's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

What = Literal["tool", "skill", "subagent", "hook"]


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: Mapping[str, Any]
    failed: bool = False  # its result was an error: the skill or subagent did not run


@dataclass(frozen=True)
class HookRun:
    """One hook that ran to its end (`hook_response`)."""

    event: str  # "SessionStart"
    name: str  # "SessionStart:startup"
    outcome: str  # "success", "error", ...
    exit_code: int | None
    said: str  # its stderr, else its output: why it failed, when it did

    background: bool = False  # it answered `{"async": true}` and went on alone

    @property
    def ok(self) -> bool:
        """It ran and succeeded, or answered that it goes on in the background (the
        session may end first: `cancelled`, which is not its failure)."""
        done = self.outcome == "success" or (self.outcome == "" and self.exit_code == 0)
        return done or self.background


@dataclass(frozen=True)
class Trajectory:
    uses: list[ToolUse]
    hooks: list[HookRun]


def read_tool_uses(path: Path) -> list[ToolUse]:
    """Every tool call in a trajectory file; OSError or ValueError (naming the line)."""
    return read_trajectory(path).uses


def read_trajectory(path: Path) -> Trajectory:
    """The tool calls and hook runs of a trajectory file; OSError or ValueError."""
    with path.open(encoding="utf-8") as lines:
        return parse(lines)


def tool_uses(lines: Iterable[str]) -> list[ToolUse]:
    """Every tool call in JSON lines (blank lines skipped); ValueError names a bad line."""
    return parse(lines).uses


def parse(lines: Iterable[str]) -> Trajectory:
    """Tool calls and hook runs in JSON lines; ValueError names a bad line."""
    calls: list[tuple[str | None, ToolUse]] = []
    failed: set[str] = set()
    hooks: list[HookRun] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            hook = _hook_run(message)
            if hook is not None:
                hooks.append(hook)
                continue
            _walk(message, calls, failed)
        except RecursionError:  # the agent controls what its tools echo back
            raise ValueError(f"line {number} is not JSON (nested too deeply)") from None
        except ValueError as exc:
            raise ValueError(f"line {number} is not JSON ({exc})") from None
    uses = [
        ToolUse(use.name, use.input, failed=True) if ident in failed else use
        for ident, use in calls
    ]
    return Trajectory(uses, hooks)


def _hook_run(message: Any) -> HookRun | None:
    """A `hook_response` line (the SDK's HookEventMessage, or the CLI's own frame)."""
    if not isinstance(message, dict):
        return None
    inner = message.get("data")
    data: dict[str, Any] = inner if isinstance(inner, dict) else message
    if data.get("subtype") != "hook_response":
        return None
    code = data.get("exit_code")
    said = data.get("stderr") or data.get("output") or ""
    return HookRun(
        event=str(data.get("hook_event") or message.get("hook_event_name") or ""),
        name=str(data.get("hook_name") or ""),
        outcome=str(data.get("outcome") or ""),
        exit_code=code if isinstance(code, int) else None,
        said=" ".join(str(said).split())[:300],
        background=_went_async(data.get("stdout") or data.get("output")),
    )


def _went_async(stdout: object) -> bool:
    """The hook's first line of output is `{"async": true, ...}` (Claude Code's
    protocol for a command hook that goes on in the background)."""
    if not isinstance(stdout, str) or not stdout.lstrip().startswith("{"):
        return False
    try:
        answer = json.loads(stdout.strip().splitlines()[0])
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("async") is True


def _walk(value: Any, calls: list[tuple[str | None, ToolUse]], failed: set[str]) -> None:
    if isinstance(value, dict):
        name, given = value.get("name"), value.get("input")
        if (
            isinstance(name, str)
            and isinstance(given, dict)
            and ("id" in value or value.get("type") in ("tool_use", "server_tool_use"))
        ):
            ident = value.get("id")
            calls.append((ident if isinstance(ident, str) else None, ToolUse(name, given)))
            return  # a tool's input is data, not messages
        used = value.get("tool_use_id")
        if isinstance(used, str) and value.get("is_error") is True:
            failed.add(used)
        for child in value.values():
            _walk(child, calls, failed)
    elif isinstance(value, list):
        for child in value:
            _walk(child, calls, failed)


def same_name(want: str, got: str) -> bool:
    """`lab-planner` matches `labsmith:lab-planner`; a namespaced name matches only itself."""
    return want == got or (":" not in want and got.rsplit(":", 1)[-1] == want)


def is_call(use: ToolUse, what: What, name: str) -> bool:
    """Is `use` a call of the tool / skill / subagent `name`? A skill or subagent
    whose call failed (an unknown name) did not run: not a call of it."""
    if what == "tool":
        return use.name == name
    if use.failed:
        return False
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


def hook_runs(hooks: Iterable[HookRun], event: str) -> list[HookRun]:
    """The runs of hooks on `event` (`Stop`), or of exactly `event` named so
    (`SessionStart:startup`)."""
    return [hook for hook in hooks if event in (hook.event, hook.name)]
