"""The normalised key a replayed request is matched by, and how two keys differ.

A request's key is its route and its JSON body with what varies between two
runs of the same agent — and does not change the model's answer — taken out
(docs/replay.md, *How a request finds its answer*). A request carries text
the run does not control (commands, skills, tool results: whatever a PR
commits), so each normalisation applies only where the CLI itself puts that
text, never to a string that merely contains it:

- the query string (`?beta=true`) and every header: session ids, the CLI's
  version, `anthropic-beta`, the key or token;
- `metadata.user_id` (a device and session id per run);
- every `cache_control` marker (where the CLI puts prompt-caching breakpoints);
- the `id` of a tool call and the `tool_use_id` of its result (the fields,
  not text naming them), renumbered by first appearance (`toolu#1`);
- the order of the tool results in one message: the CLI lists the results of
  parallel tool calls (subagents above all) as they finish, so they are put
  in the order of their calls (the API pairs a result with its call by id);
- the run's temp folder (`…/ci-evals-<run-id>-<random>`, where the
  workspaces are) as `$RUN_TMP` and its run id as `$RUN_ID`, in any string:
  the folder is the one the CLI's environment block names as the working
  directory, so no other string can make a folder of its own vanish;
- in the CLI's environment block (a system prompt block or a `system`
  message starting `# Environment`): its `OS Version:` line in the leading
  list (the kernel) as `<os>`, its closing `Today's date is …` as `<date>`,
  and what the stage spent and has left in the budget paragraph just before
  it (`USD budget: $0.05/$2; $1.95 remaining`: the cap is kept);
- the same budget reminder when it is a whole `system` message;
- the `x-anthropic-billing-header` when it is a whole system prompt block;
- in the hand-back the CLI appends to a subagent's result (the end of an
  `Agent`/`Task` call's result): the subagent's id (`agentId: a…`, random per
  run) as `$AGENT_ID` and its `duration_ms` as `<ms>`.

Everything else is kept as sent — model, system, messages (roles, text,
tool calls and results), tools, max_tokens, thinking, stream, tool_choice,
temperature, stop sequences, ... — so a changed prompt, command, tool or
setting is a different request.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

# The CLI's environment block and its working-directory line, whose value is
# `$TMPDIR/ci-evals-<run-id>-<mkdtemp suffix>/<scenario>/workspace` (run.runner).
_ENVIRONMENT = "# Environment\n"
_WORKING_DIRECTORY = re.compile(r"^ - Primary working directory: (/[^\n]*)$", re.MULTILINE)
_RUN_TMP = re.compile(r"^(/(?:[^\n/]+/)*?ci-evals-(\d{8}T\d{6}Z-[0-9a-f]{6})-[A-Za-z0-9_]+)(?:/|$)")
# What cannot come right before or after a folder or id standing on its own.
_BEFORE = r"(?<![\w./~-])"
_AFTER = r"(?![\w])"
# The leading list of the environment block (up to its first blank line): the kernel
# of the machine that ran it (a runner image's update, a laptop), not the question.
_OS_VERSION = re.compile(r"^( - OS Version: )[^\n]*$", re.MULTILINE)
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
_DROPPED_KEYS = frozenset({"cache_control"})


def request_key(path: str, body: object) -> dict[str, Any]:
    """The normalised key of one request (`path` may carry a query string)."""
    ids: dict[str, str] = {}
    normal = _normalise(body, ids, _own_folder(body))
    if isinstance(normal, dict):
        _map_texts(normal, "system", _system_text)
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
    for text in _environment_texts(body):
        line = _WORKING_DIRECTORY.search(text.split("\n\n", 1)[0])
        found = _RUN_TMP.match(line.group(1)) if line else None
        if found:
            return found.group(1), found.group(2)
    return None


def _own_folder(body: object) -> re.Pattern[str] | None:
    """What `$RUN_TMP` and `$RUN_ID` replace: this request's folder and run id, exactly."""
    found = _run_tmp(body)
    if found is None:
        return None
    folder, run_id = (re.escape(part) for part in found)
    return re.compile(f"{_BEFORE}(?:(?P<folder>{folder})|(?P<run_id>{run_id})){_AFTER}")


def _environment_texts(body: object) -> Iterator[str]:
    """The text of each environment block (a system prompt block, a `system` message)."""
    if not isinstance(body, dict):
        return
    for value in _texts(body.get("system")):
        if value.startswith(_ENVIRONMENT):
            yield value
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == "system":
            for value in _texts(message.get("content")):
                if value.startswith(_ENVIRONMENT):
                    yield value


def _texts(content: object) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                yield block["text"]


def _map_texts(holder: dict[str, Any], key: str, change: Callable[[str], str]) -> None:
    """`change` applied to `holder[key]` when text, or to each text block's text."""
    content = holder.get(key)
    if isinstance(content, str):
        holder[key] = change(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                block["text"] = change(block["text"])


def _system_text(text: str) -> str:
    """A system prompt block: the billing header as a whole block, or the environment."""
    return "x-anthropic-billing-header: <dropped>" if _BILLING.match(text) else _environment(text)


def _environment(text: str) -> str:
    """The CLI's environment block with its machine, date and spend normalised."""
    if not text.startswith(_ENVIRONMENT):
        return text
    head, blank, rest = text.partition("\n\n")
    head = _OS_VERSION.sub(r"\1<os>", head, count=1)
    text = head + blank + rest
    closing = _CLOSING.search(text)
    if closing is None:
        return text
    paragraph = _SPENT.sub(r"\1<spent>\2<left>\3", closing.group(1))
    return f"{text[: closing.start()]}{paragraph}Today's date is <date>{closing.group(2)}"


def _messages_in_place(messages: object) -> None:
    if not isinstance(messages, list):
        return
    calls: dict[str, str] = {}  # a call's (renumbered) id: its tool's name
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "system":
            _map_texts(message, "content", _system_message)
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if isinstance(kind, str) and kind in _TOOL_CALLS and isinstance(block.get("id"), str):
                calls[block["id"]] = str(block.get("name"))
            elif (
                block.get("type") == "tool_result"
                and calls.get(str(block.get("tool_use_id"))) in _SUBAGENT_TOOLS
            ):
                _hand_back(block)


def _system_message(text: str) -> str:
    if _WHOLE_BUDGET.match(text):
        return _SPENT.sub(r"\1<spent>\2<left>\3", text)
    return _environment(text)


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


def digest(key: dict[str, Any]) -> str:
    """A stable hash of a key (sorted keys: field order never matters)."""
    text = json.dumps(key, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _normalise(value: object, ids: dict[str, str], own: re.Pattern[str] | None) -> Any:
    if isinstance(value, dict):
        normal = {
            k: _normalise(v, ids, own) for k, v in sorted(value.items()) if k not in _DROPPED_KEYS
        }
        # A call's id and the id its result answers: fields, never text that names them.
        kind = value.get("type")
        kind = kind if isinstance(kind, str) else None  # a JSON schema's `type` may be a list
        if kind is not None and kind in _TOOL_CALLS and isinstance(value.get("id"), str):
            normal["id"] = _renumbered(value["id"], ids)
        if kind == "tool_result" and isinstance(value.get("tool_use_id"), str):
            normal["tool_use_id"] = _renumbered(value["tool_use_id"], ids)
        return normal
    if isinstance(value, list):
        return [_normalise(v, ids, own) for v in value]
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
