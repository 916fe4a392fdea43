"""What the `loop` agent sends the model each step: its history, seen through a strategy.

The history is the whole conversation: the task, then per step the assistant
message and the user message carrying its tool results. It is kept whole
(the trajectory records it); each request sends a *view* of it:

- `full` — everything (the seed's default: 20 steps fit);
- `window` — the last `keep_last` steps whole; in older steps each tool
  output, and each long tool input (a file's content), is replaced by one
  line saying it was dropped;
- `summary` — the same, but the line summarises what it replaces (size,
  first and last lines, the exit code line when there is one).

Older steps lose their bulk, never their place: every `tool_use` keeps its
`tool_result` (the API refuses an unmatched one), the task statement stays
first, and the number of assistant messages is unchanged, which is what the
stub model counts turns by, so a scripted conversation means the same under
every strategy. Pure functions; the history is not changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ci_evals.agents.loop.config import ContextStrategy

Message = dict[str, Any]
_LONG_INPUT = 400  # characters: a tool input above it is bulk, not an instruction
_LINE = 160


def view(history: Sequence[Message], strategy: ContextStrategy, keep_last: int) -> list[Message]:
    """The messages to send for `history` (task first, then assistant/user pairs)."""
    if strategy == "full":
        return list(history)
    assistants = [i for i, message in enumerate(history) if message["role"] == "assistant"]
    if len(assistants) <= keep_last:
        return list(history)
    cut = assistants[-keep_last]  # messages before this index belong to older steps
    out: list[Message] = []
    for index, message in enumerate(history):
        out.append(message if index == 0 or index >= cut else _shrunk(message, strategy))
    return out


def _shrunk(message: Message, strategy: ContextStrategy) -> Message:
    content = message["content"]
    if not isinstance(content, list):
        return message
    return {**message, "content": [_shrunk_block(block, strategy) for block in content]}


def _shrunk_block(block: Any, strategy: ContextStrategy) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "tool_result":
        text = _result_text(block.get("content"))
        return {**block, "content": _replacement(text, strategy, "output")}
    if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
        given = {
            key: _replacement(value, strategy, key)
            if isinstance(value, str) and len(value) > _LONG_INPUT
            else value
            for key, value in block["input"].items()
        }
        return {**block, "input": given}
    return block


def _replacement(text: str, strategy: ContextStrategy, what: str) -> str:
    if strategy == "window":
        return f"[{what} dropped: {len(text)} characters, an older step]"
    return summarize(text, what)


def summarize(text: str, what: str = "output") -> str:
    """One line standing for `text`: its size, the exit code line, its first and last lines."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    parts = [f"[{what} summarised: {len(text)} characters, {len(lines)} lines"]
    exit_line = next((line for line in lines if line.startswith("exit code:")), None)
    if exit_line is not None:
        parts.append(exit_line)
    body = [line for line in lines if line != exit_line and not line.startswith("--- ")]
    if body:
        parts.append(f"first: {body[0][:_LINE]}")
    if len(body) > 1:
        parts.append(f"last: {body[-1][:_LINE]}")
    return "; ".join(parts) + "]"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""
