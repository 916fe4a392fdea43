"""The normalised key a replayed request is matched by, and how two keys differ.

A request's key is its route and its JSON body with what varies between two
runs of the same agent — and does not change the model's answer — taken out:
the query string and every header, `metadata.user_id`, `cache_control` markers,
tool-use ids (renumbered `toolu#1`, ...), the order of one message's tool results,
and, in the CLI's environment block only, the run's temp folder, the kernel's
`OS Version:`, today's date and the budget reminder; a subagent's id and duration
in the CLI's hand-back. A request carries text the run does not control (commands,
skills, tool results: whatever a PR commits), so each normalisation applies only
where the CLI itself puts that text, never to a string that merely contains it.
Everything else is kept as sent, so a changed prompt, command, tool or setting is
a different request.

Each rule, where it applies and why: docs/replay.md (*How a request finds its
answer*).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

# The CLI's environment block, whole: its heading, its first sentence and its
# working-directory line, whose value is
# `$TMPDIR/ci-evals-<run-id>-<mkdtemp suffix>/<scenario>/workspace` (run.runner).
_HEADER = "# Environment\nYou have been invoked in the following environment: \n"
_WORKING_DIRECTORY = re.compile(r" - Primary working directory: ([^\n]+)\n")
# What the CLI puts before the block when tools are deferred (a default subagent's
# block, with ToolSearch on): its sentence, one tool name a line, a blank line.
_TOOL_SEARCH = re.compile(
    r"The following deferred tools are now available via ToolSearch\.[^\n]*\n(?:[^\n]+\n)*\n"
)
_RUN_TMP = re.compile(r"^(/(?:[^\n/]+/)*?ci-evals-(\d{8}T\d{6}Z-[0-9a-f]{6})-[A-Za-z0-9_]+)(?:/|$)")
# What cannot come right before or after a folder or id standing on its own.
_BEFORE = r"(?<![\w./~-])"
_AFTER = r"(?![\w])"
# In the block's leading list (up to its first blank line): the kernel of the machine
# that ran it (a runner image's update, a laptop), not the question. Only a kernel's
# shape (`os.type() os.release()`): a line that says more is kept as it is.
_OS_VERSION = re.compile(r"^( - OS Version: )[A-Za-z][A-Za-z0-9_]*(?: [\w.+~-]{1,128})?$", re.M)
# The block's closing lines: the budget paragraph (with max_budget_usd) and the date.
_BUDGET = r"USD budget: \$[0-9.e+-]+/\$[0-9.]+; \$[0-9.e+-]+ remaining"
_SPENT = re.compile(r"(USD budget: \$)[0-9.e+-]+(/\$[0-9.]+; \$)[0-9.e+-]+( remaining)")
_CLOSING = re.compile(rf"(\n\n(?:{_BUDGET}\n\n)?)Today's date is \d{{4}}-\d{{2}}-\d{{2}}(\.?)\Z")
_WHOLE_BUDGET = re.compile(rf"{_BUDGET}\Z")
_BILLING = re.compile(r"x-anthropic-billing-header:[^\n]*\Z")
# The hand-back's end: "agentId: <id> (use SendMessage with to: '<id>', ...)" and the
# `<usage>` it closes with; the id is "a" and 16 hex digits, random per run.
_HAND_BACK = re.compile(
    r"(\nagentId: )(a[0-9a-f]{16})( \(use SendMessage with to: ')\2('[^\n]*\)\n<usage>"
    r"(?:[a-z_]+: \d+\n)*duration_ms: )\d+(</usage>)\Z"
)
_SUBAGENT_TOOLS = frozenset({"Agent", "Task"})
_TOOL_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_CACHE_CONTROL = "cache_control"


def request_key(path: str, body: object) -> dict[str, Any]:
    """The normalised key of one request (`path` may carry a query string)."""
    normal = _normalise(body, _own_folder(body))
    if isinstance(normal, dict):
        _system_in_place(normal.get("system"))
        _tools_in_place(normal.get("tools"))
        _messages_in_place(normal.get("messages"))
        _order_tool_results(normal.get("messages"))
        metadata = normal.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("user_id", None)
            if not metadata:
                del normal["metadata"]
    return {"route": path.split("?", 1)[0], "body": normal}


def run_tmp_folders(body: object) -> list[str]:
    """The run temp folder the request's environment block names (none or one)."""
    found = _run_tmp(body)
    return [found[0]] if found else []


def _run_tmp(body: object) -> tuple[str, str] | None:
    """(the run temp folder, its run id) from the CLI's working-directory line."""
    place = _environment_place(body.get("messages") if isinstance(body, dict) else None)
    if place is None:
        return None
    holder, field, at = place
    line = _WORKING_DIRECTORY.match(holder[field], at + len(_HEADER))
    found = _RUN_TMP.match(line.group(1)) if line else None
    return (found.group(1), found.group(2)) if found else None


def _own_folder(body: object) -> re.Pattern[str] | None:
    """What `$RUN_TMP` and `$RUN_ID` replace: this request's folder and run id, exactly."""
    found = _run_tmp(body)
    if found is None:
        return None
    folder, run_id = (re.escape(part) for part in found)
    return re.compile(f"{_BEFORE}(?:(?P<folder>{folder})|(?P<run_id>{run_id})){_AFTER}")


def _environment_place(messages: object) -> tuple[dict[str, Any], str, int] | None:
    """Where the CLI's environment block is: (the dict holding its text, the text's
    key, where the block starts in it), or None.

    Only the first `system` message, one text, can be it, and only in the block's
    whole shape (heading, sentence, working-directory line) at its start or right
    after the ToolSearch paragraph: that message is the CLI's own. Text a plugin
    supplies (an agent file is a system prompt block; a command, a skill or a tool
    result is a user message) never stands there, so it is never normalised."""
    if not isinstance(messages, list):
        return None
    message = next((m for m in messages if isinstance(m, dict) and m.get("role") == "system"), None)
    found = _only_text(message) if message is not None else None
    if found is None:
        return None
    holder, field = found
    text: str = holder[field]
    preamble = _TOOL_SEARCH.match(text)
    at = preamble.end() if preamble else 0
    if not text.startswith(_HEADER, at) or not _WORKING_DIRECTORY.match(text, at + len(_HEADER)):
        return None
    return holder, field, at


def _only_text(message: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a message's one text is: (the message, "content") for a string, (its
    one block, "text") for a list of one text block; None for anything else."""
    content = message.get("content")
    if isinstance(content, str):
        return message, "content"
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        block = content[0]
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return block, "text"
    return None


def _system_in_place(system: object) -> None:
    """The system prompt blocks: their cache markers, and the billing header when it
    is the first block, whole (the CLI's attribution, per version and request).
    Nothing else: an agent file's body and an appended prompt are blocks here."""
    if not isinstance(system, list):
        return
    for i, block in enumerate(system):
        if not isinstance(block, dict):
            continue
        block.pop(_CACHE_CONTROL, None)
        text = block.get("text")
        if i == 0 and isinstance(text, str) and _BILLING.match(text):
            block["text"] = "x-anthropic-billing-header: <dropped>"


def _tools_in_place(tools: object) -> None:
    """A tool's cache marker, at its top level only: a `cache_control` inside its
    schema is a property the model reads (an MCP server's schema, PR-controlled)."""
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict):
            tool.pop(_CACHE_CONTROL, None)


def _environment(text: str, at: int) -> str:
    """The CLI's environment block (from `at`) with its machine, date and spend normalised."""
    head, blank, rest = text[at:].partition("\n\n")
    head = _OS_VERSION.sub(r"\1<os>", head, count=1)
    text = text[:at] + head + blank + rest
    closing = _CLOSING.search(text, at)
    if closing is None:
        return text
    paragraph = _SPENT.sub(r"\1<spent>\2<left>\3", closing.group(1))
    return f"{text[: closing.start()]}{paragraph}Today's date is <date>{closing.group(2)}"


def _messages_in_place(messages: object) -> None:
    if not isinstance(messages, list):
        return
    place = _environment_place(messages)
    if place is not None:
        holder, field, at = place
        holder[field] = _environment(holder[field], at)
    ids: dict[str, str] = {}  # a call's id as sent: its number (`toolu#N`)
    calls: dict[str, str] = {}  # a call's (renumbered) id: its tool's name
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if message.get("role") == "system":
            _map_whole_budget(message)
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                _block_in_place(block, ids, calls)


def _block_in_place(block: dict[str, Any], ids: dict[str, str], calls: dict[str, str]) -> None:
    """A message's content block: its cache marker, a call's id or the id its result
    answers (renumbered), a tool result's inner markers and a subagent's hand-back."""
    block.pop(_CACHE_CONTROL, None)
    kind = block.get("type")
    if isinstance(kind, str) and kind in _TOOL_CALLS and isinstance(block.get("id"), str):
        block["id"] = _renumbered(block["id"], ids)
        calls[block["id"]] = str(block.get("name"))
    elif kind == "tool_result":
        if isinstance(block.get("tool_use_id"), str):
            block["tool_use_id"] = _renumbered(block["tool_use_id"], ids)
        inner = block.get("content")
        for part in inner if isinstance(inner, list) else []:
            if isinstance(part, dict):
                part.pop(_CACHE_CONTROL, None)
        if calls.get(str(block.get("tool_use_id"))) in _SUBAGENT_TOOLS:
            _hand_back(block)


def _map_whole_budget(message: dict[str, Any]) -> None:
    """The budget reminder the CLI sends as a whole `system` message (or text block)."""
    content = message.get("content")
    if isinstance(content, str) and _WHOLE_BUDGET.match(content):
        message["content"] = _SPENT.sub(r"\1<spent>\2<left>\3", content)
    for block in content if isinstance(content, list) else []:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and _WHOLE_BUDGET.match(text):
            block["text"] = _SPENT.sub(r"\1<spent>\2<left>\3", text)


def _hand_back(result: dict[str, Any]) -> None:
    """The subagent's id and duration in the hand-back ending its result's last text."""
    content = result.get("content")
    if isinstance(content, list):
        texts = [b for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        if texts:
            texts[-1]["text"] = _HAND_BACK.sub(_hand_back_text, texts[-1]["text"])
    elif isinstance(content, str):
        result["content"] = _HAND_BACK.sub(_hand_back_text, content)


def _hand_back_text(match: re.Match[str]) -> str:
    return f"{match.group(1)}$AGENT_ID{match.group(3)}$AGENT_ID{match.group(4)}<ms>{match.group(5)}"


def _order_tool_results(messages: object) -> None:
    """Each message's tool results in the order of their calls (`toolu#N`), in place;
    other blocks keep their places."""
    if not isinstance(messages, list):
        return
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        places = [i for i, block in enumerate(content) if _call_number(block) is not None]
        ordered = sorted((content[i] for i in places), key=lambda block: _call_number(block) or 0)
        for i, block in zip(places, ordered, strict=True):
            content[i] = block


def _call_number(block: object) -> int | None:
    """N of a tool result's renumbered call id (`toolu#N`), None for any other block."""
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return None
    call = block.get("tool_use_id")
    if isinstance(call, str) and call.startswith("toolu#") and call[6:].isdigit():
        return int(call[6:])
    return None


def key_text(key: dict[str, Any]) -> bytes:
    """A key as compact JSON, sorted (field order never matters): what `digest` hashes."""
    text = json.dumps(key, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text.encode()


def digest(key: dict[str, Any]) -> str:
    """A stable hash of a key."""
    return hashlib.sha256(key_text(key)).hexdigest()


def _normalise(value: object, own: re.Pattern[str] | None) -> Any:
    """A copy of `value` with its keys sorted and this run's folder and id replaced."""
    if isinstance(value, dict):
        return {k: _normalise(v, own) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_normalise(v, own) for v in value]
    if isinstance(value, str) and own is not None:
        return own.sub(lambda m: "$RUN_TMP" if m.group("folder") else "$RUN_ID", value)
    return value


def _renumbered(tool_id: str, ids: dict[str, str]) -> str:
    return ids.setdefault(tool_id, f"toolu#{len(ids) + 1}")


# -- how two keys differ ------------------------------------------------------------------


def differences(key: object, recorded: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Each place `key` differs from `recorded`: (JSON path, one line on how), in order."""
    if type(key) is not type(recorded):
        yield path, f"{_short(key)} != recorded {_short(recorded)}"
    elif isinstance(key, dict) and isinstance(recorded, dict):
        for name in sorted(set(key) | set(recorded)):
            where = f"{path}.{name}" if path else name
            if name not in recorded:
                yield where, f"not in the recorded request (is {_short(key[name])})"
            elif name not in key:
                yield where, f"missing (recorded {_short(recorded[name])})"
            else:
                yield from differences(key[name], recorded[name], where)
    elif isinstance(key, list) and isinstance(recorded, list):
        for i, (mine, theirs) in enumerate(zip(key, recorded, strict=False)):
            yield from differences(mine, theirs, f"{path}[{i}]")
        if len(key) != len(recorded):
            yield path, f"{len(key)} items, recorded {len(recorded)}"
    elif isinstance(key, str) and isinstance(recorded, str):
        if key != recorded:
            yield path, _text_difference(key, recorded)
    elif key != recorded:
        yield path, f"{_short(key)} != recorded {_short(recorded)}"


def distance(key: object, recorded: object) -> tuple[int, int]:
    """How far apart two keys are: (differing places, -the length of the common
    message prefix); the smallest is the nearest recorded request."""
    count = sum(1 for _ in differences(key, recorded))
    return count, -_common_messages(key, recorded)


def _common_messages(key: object, recorded: object) -> int:
    mine, theirs = _messages(key), _messages(recorded)
    same = 0
    for a, b in zip(mine, theirs, strict=False):
        if a != b:
            break
        same += 1
    return same


def _messages(key: object) -> list[Any]:
    body = key.get("body") if isinstance(key, dict) else None
    messages = body.get("messages") if isinstance(body, dict) else None
    return messages if isinstance(messages, list) else []


def _text_difference(text: str, recorded: str) -> str:
    """Where two strings first differ, with a little context on each side."""
    at = next(
        (i for i, (a, b) in enumerate(zip(text, recorded, strict=False)) if a != b),
        min(len(text), len(recorded)),
    )
    start = max(0, at - 20)

    def excerpt(s: str) -> str:
        cut = s[start : at + 40]
        return ("…" if start else "") + repr(cut)[1:-1] + ("…" if at + 40 < len(s) else "")

    return f"at character {at}: '{excerpt(text)}' != recorded '{excerpt(recorded)}'"


def _short(value: object, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"
