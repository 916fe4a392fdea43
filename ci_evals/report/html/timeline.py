"""A trajectory (`trajectory.jsonl`) as a readable timeline, streamed.

Both backends' lines are read: the Claude Code CLI's messages as the SDK gives
them (`AssistantMessage` with text, thinking and tool-use blocks, `UserMessage`
with tool results, `ResultMessage`, the `Task*` messages of subagents) and the
loop agent's (`AssistantMessage` with typed blocks, `ToolResult`, `Nudge`). A
message inside a subagent (`parent_tool_use_id` set) is indented under the
call that started it. Every assistant turn shows its tokens and its cost at
list price.

A trajectory can be 100 MB. The file is read one line at a time, never
whole: a line longer than `TimelineCaps.line_bytes` is skipped unparsed (its size
said), each text is cut at `TimelineCaps.text_chars`, and once the timeline has
written `TimelineCaps.page_chars` the rest is only counted, not parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ci_evals.endpoints.pricing import PricedUsage, Pricing
from ci_evals.fs.links import Unreadable
from ci_evals.report.html.markup import clipped_pre, esc, fold, money, seconds
from ci_evals.report.html.source import open_in

_PRICING = Pricing()
_CHUNK = 1 << 20


@dataclass(frozen=True)
class TimelineCaps:
    page_chars: int = 2_000_000  # HTML written for one timeline before the rest is counted
    text_chars: int = 4_000  # of one text, tool input or tool output
    line_bytes: int = 1 << 20  # a longer line is skipped, not parsed


def timeline(
    run_dir: Path, rel: str | None, limits: TimelineCaps = TimelineCaps()
) -> Iterator[str]:
    """HTML chunks for the trajectory at `run_dir/rel` (a note when there is none)."""
    if rel is None:
        yield '<p class="muted">No trajectory was recorded.</p>'
        return
    try:
        handle = open_in(run_dir, rel)
    except Unreadable as exc:
        yield f'<p class="note">The trajectory cannot be shown: {esc(exc)}</p>'
        return
    with handle:
        yield from _events(handle, limits)


@dataclass(frozen=True)
class Opening:
    """What a trajectory's first lines say: the prompt the stage was given (the
    `Prompt` line the agents write first) and the model the CLI said it runs
    (its `init` message: the model it used, not the one asked for)."""

    prompt: str | None = None
    model: str | None = None


_OPENING_LINES = 4  # the prompt, the init message (the loop agent's LoopStarted): first


def opening(run_dir: Path, rel: str | None, limits: TimelineCaps = TimelineCaps()) -> Opening:
    """The `Opening` of the trajectory at `run_dir/rel` (empty when it has none)."""
    if rel is None:
        return Opening()
    prompt = model = None
    try:
        with open_in(run_dir, rel) as handle:
            for _ in range(_OPENING_LINES):
                line = handle.readline(limits.line_bytes)
                if not line.endswith(b"\n"):
                    break  # the end, or a line too long to be either
                data = _json(line)
                if data.get("type") == "Prompt" and isinstance(data.get("text"), str):
                    prompt = data["text"]
                if data.get("type") == "LoopStarted":  # the loop agent's first line says both
                    prompt = data["prompt"] if isinstance(data.get("prompt"), str) else None
                    model = data["model"] if isinstance(data.get("model"), str) else None
                    break
                inner = data.get("data")
                if data.get("subtype") == "init" and isinstance(inner, dict):
                    model = inner.get("model") if isinstance(inner.get("model"), str) else None
                    break
    except Unreadable:
        pass
    return Opening(prompt, model)


def _json(line: bytes) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _events(handle: BinaryIO, limits: TimelineCaps) -> Iterator[str]:
    written = 0
    depth: dict[str, int] = {}  # tool_use_id -> depth of what runs inside it
    number = 0
    while True:
        line = handle.readline(limits.line_bytes)
        if not line:
            return
        number += 1
        if not line.endswith(b"\n") and len(line) == limits.line_bytes:
            size = len(line) + _skip_line(handle)
            chunk = _box(number, "event not shown", f"<p>{size:,} bytes: too large</p>", "")
        else:
            chunk = _event(number, line, depth, limits)
        if not chunk:
            continue
        yield chunk
        written += len(chunk)
        if written >= limits.page_chars:
            left = _count_lines(handle)
            if left:
                yield (
                    f'<p class="note">{left:,} more events not shown (the page shows the first '
                    f"{number:,}); the whole trajectory is in the run folder.</p>"
                )
            return


def _skip_line(handle: BinaryIO) -> int:
    skipped = 0
    while True:
        chunk = handle.readline(_CHUNK)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


def _count_lines(handle: BinaryIO) -> int:
    count, last = 0, b"\n"
    while chunk := handle.read(_CHUNK):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count + (last != b"\n")


def _event(number: int, line: bytes, depth: dict[str, int], limits: TimelineCaps) -> str:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        if not line.strip():
            return ""
        return _box(number, "unreadable line", clipped_pre(line.decode(errors="replace"), 300), "")
    if not isinstance(data, dict):
        return _box(number, "unreadable line", clipped_pre(str(data), 300), "")
    kind = str(data.get("type", "?"))
    parent = data.get("parent_tool_use_id")
    level = depth.get(parent, 1) if isinstance(parent, str) else 0
    render = _RENDERERS.get(kind, _other)
    css, title, body = render(data, limits)
    for block in _blocks(data):
        if "name" in block and isinstance(block.get("id"), str):
            depth[block["id"]] = level + 1  # a subagent it starts runs one level in
    when = data.get("elapsed_s")
    meta = f"+{when:.1f}s" if isinstance(when, int | float) else ""
    return _box(number, title, body, meta, css=css, level=level)


def _box(number: int, title: str, body: str, meta: str, *, css: str = "", level: int = 0) -> str:
    indent = f" depth-{min(level, 3)}" if level else ""
    return (
        f'<div class="event {css}{indent}" id="e{number}"><div class="meta">#{number} '
        f"<b>{esc(title)}</b> {esc(meta)}</div>{body}</div>"
    )


def _blocks(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = data.get("content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=1, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _block(block: Mapping[str, Any], limits: TimelineCaps) -> str:
    cut = limits.text_chars
    if "name" in block and "input" in block:  # a tool use (SDK: no "type" key)
        name = esc(block.get("name"))
        return fold(f"tool call <code>{name}</code>", _tool_input(block["input"], cut), open_=True)
    if "tool_use_id" in block:  # a tool result
        error = " (error)" if block.get("is_error") else ""
        summary = f"tool result{error}"
        return fold(esc(summary), clipped_pre(_text(block.get("content")), cut))
    if "thinking" in block:
        return fold("thinking", clipped_pre(_text(block["thinking"]), cut))
    if "text" in block:
        return clipped_pre(_text(block["text"]), cut)
    return clipped_pre(_text(block), cut)


_INLINE_CHARS = 100  # a longer value, or one with a line break, gets a block of its own


def _tool_input(value: object, cut: int) -> str:
    """A tool call's input as a reader wants it: each field by name, a text as text
    (a Write's content, an Edit's old and new string, a Bash command with its line
    breaks), not one JSON string with literal `\\n` in it."""
    if not isinstance(value, dict) or not value:
        return clipped_pre(_text(value), cut)
    parts: list[str] = []
    for key, item in value.items():
        text = _text(item)
        if isinstance(item, str) and ("\n" in text or len(text) > _INLINE_CHARS):
            parts.append(
                f'<div class="field"><code>{esc(key)}</code></div>{clipped_pre(text, cut)}'
            )
        else:
            shown = text if len(text) <= cut else text[:cut] + " …"
            parts.append(f'<div class="field"><code>{esc(key)}</code> {esc(shown)}</div>')
    return "".join(parts)


def _assistant(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    body = "".join(_block(b, limits) for b in _blocks(data))
    usage = data.get("usage")
    meta = ""
    if isinstance(usage, dict):
        counted = PricedUsage.from_api(usage)
        model = data.get("model") if isinstance(data.get("model"), str) else None
        cost = _PRICING.cost(model, counted)
        meta = (
            f'<div class="meta">{counted.input_tokens:,} in · {counted.output_tokens:,} out'
            f"{_cache(counted)} · {esc(money(cost))} at list price · {esc(model or '')}</div>"
        )
    step = data.get("step")
    title = f"assistant, step {step}" if isinstance(step, int) else "assistant"
    return "assistant", title, body + meta


def _cache(usage: PricedUsage) -> str:
    if not (usage.cache_read_input_tokens or usage.cache_creation_input_tokens):
        return ""
    return (
        f" · cache {usage.cache_read_input_tokens:,} read, "
        f"{usage.cache_creation_input_tokens:,} written"
    )


def _user(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    blocks = _blocks(data)
    if not blocks and isinstance(data.get("content"), str):
        return "user", "user", clipped_pre(data["content"], limits.text_chars)
    errors = any(b.get("is_error") for b in blocks)
    results = any("tool_use_id" in b for b in blocks)
    css = "tool-result" + (" is-error" if errors else "") if results else "user"
    title = "tool result" if results else "user"
    return css, title, "".join(_block(b, limits) for b in blocks)


def _tool_result(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    """The loop agent's record of one tool run."""
    error = bool(data.get("is_error"))
    facts = [
        f"{key} {data[key]}"
        for key in ("exit_code", "timed_out", "duration_s")
        if data.get(key) is not None
    ]
    meta = f'<div class="meta">{esc(", ".join(facts))}</div>' if facts else ""
    body = clipped_pre(_text(data.get("output")), limits.text_chars) + meta
    return "tool-result" + (" is-error" if error else ""), f"tool result: {data.get('tool')}", body


def _result(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    cost, took = data.get("total_cost_usd"), data.get("duration_ms")
    facts = [
        f"{data['subtype']}" if data.get("subtype") else "",
        f"{data['num_turns']} turns" if data.get("num_turns") is not None else "",
        f"{money(cost)} (as the CLI counts it)" if isinstance(cost, int | float) else "",
        seconds(took / 1000) if isinstance(took, int | float) else "",
        f"stop reason {data['stop_reason']}" if data.get("stop_reason") else "",
    ]
    body = f'<div class="meta">{esc(", ".join(f for f in facts if f))}</div>'
    if data.get("result") is not None:
        body += clipped_pre(_text(data["result"]), limits.text_chars)
    css = "result" + (" is-error" if data.get("is_error") else "")
    return css, "result", body


def _system(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    inner = data.get("data") if isinstance(data.get("data"), dict) else {}
    assert isinstance(inner, dict)
    subtype = data.get("subtype")
    if subtype == "init":
        facts = [
            f"model {inner.get('model')}",
            f"{len(inner.get('tools') or [])} tools",
            f"permissions {inner.get('permissionMode')}",
        ]
        return "system", "session started", f'<div class="meta">{esc(", ".join(facts))}</div>'
    if subtype in ("hook_started", "hook_response"):
        return _hook(data, inner, limits)
    shown = {k: v for k, v in inner.items() if k not in _SYSTEM_NOISE and v not in (None, "")}
    if not shown:
        return "system", f"system: {subtype}", ""
    return "system", f"system: {subtype}", _tool_input(shown, limits.text_chars)


# The envelope every system frame repeats: not what it says.
_SYSTEM_NOISE = frozenset({"type", "subtype", "session_id", "uuid", "cwd"})


def _hook(
    data: Mapping[str, Any], inner: Mapping[str, Any], limits: TimelineCaps
) -> tuple[str, str, str]:
    """A hook's start or end (`include_hook_events`): what it said, by name ("Stop
    says: …"), and how it ended. What a hook says to the model steers the agent: a
    reader of a failed run must not have to open a JSON fold to find it."""
    event = inner.get("hook_event") or data.get("hook_event_name") or "a hook"
    name = str(inner.get("hook_name") or event)
    if data.get("subtype") == "hook_started":
        return "system", f"hook {name} started", ""
    facts = [
        f"{key.replace('_', ' ')} {inner[key]}"
        for key in ("outcome", "exit_code")
        if inner.get(key) not in (None, "")
    ]
    said = [
        str(inner[key]).strip()
        for key in ("stderr", "output", "stdout")
        if isinstance(inner.get(key), str) and str(inner[key]).strip()
    ]
    said = list(dict.fromkeys(said))  # the CLI copies stdout into output
    body = f'<div class="meta">{esc(", ".join(facts))}</div>' if facts else ""
    if said:
        body += f"<p>{esc(name)} says:</p>" + clipped_pre("\n".join(said), limits.text_chars)
    failed = inner.get("outcome") not in (None, "success") or inner.get("exit_code") not in (
        None,
        0,
    )
    return "system" + (" is-error" if failed else ""), f"hook {name}", body


def _loop_started(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    """The loop agent's first line: its model, sandbox and the prompt."""
    facts = [f"{key} {data[key]}" for key in ("model", "sandbox") if data.get(key)]
    body = f'<div class="meta">{esc(", ".join(facts))}</div>'
    body += clipped_pre(_text(data.get("prompt")), limits.text_chars)
    return "user", "loop started: the prompt", body


def _prompt(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    """The prompt the stage was given (written first by the agents)."""
    return "user", "prompt", clipped_pre(_text(data.get("text")), limits.text_chars)


def _task(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    inner = data.get("data") if isinstance(data.get("data"), dict) else {}
    assert isinstance(inner, dict)
    what = data.get("description") or inner.get("description") or data.get("summary") or ""
    agent = inner.get("subagent_type")
    title = f"subagent {str(data.get('subtype', '')).removeprefix('task_')}"
    text = f"{agent}: {what}" if agent else str(what)
    return "system", title, f'<div class="meta">{esc(text)}</div>'


def _nudge(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    return "user", "nudge (no tool call)", clipped_pre(_text(data.get("text")), limits.text_chars)


def _other(data: Mapping[str, Any], limits: TimelineCaps) -> tuple[str, str, str]:
    shown = {k: v for k, v in data.items() if k not in ("time", "elapsed_s", "type")}
    return "", str(data.get("type", "?")), fold("details", clipped_pre(_text(shown), 600))


_RENDERERS = {
    "AssistantMessage": _assistant,
    "UserMessage": _user,
    "ToolResult": _tool_result,
    "ResultMessage": _result,
    "SystemMessage": _system,
    "HookEventMessage": _system,
    "Prompt": _prompt,
    "LoopStarted": _loop_started,
    "TaskStartedMessage": _task,
    "TaskProgressMessage": _task,
    "TaskNotificationMessage": _task,
    "TaskUpdatedMessage": _task,
    "Nudge": _nudge,
}
