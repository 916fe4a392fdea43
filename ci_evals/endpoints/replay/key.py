"""The normalised key a replayed request is matched by, and how two keys differ.

A request's key is its route and its JSON body with what varies between two
runs of the same agent — and does not change the model's answer — taken out
(docs/replay.md, *What is normalised*):

- the query string (`?beta=true`) and every header: session ids, the CLI's
  version, `anthropic-beta`, the key or token;
- `metadata.user_id` (a device and session id per run);
- every `cache_control` marker (where the CLI puts prompt-caching breakpoints);
- in every string: the run's temp folder (`…/ci-evals-<run-id>-<random>`,
  where the workspaces are) as `$RUN_TMP`, any other run id as `$RUN_ID`, the
  CLI's "Today's date is …" as `<date>`, its "OS Version: …" (the kernel) as
  `<os>`, the `x-anthropic-billing-header` line;
- tool-use ids (`toolu_…`, `srvtoolu_…`), renumbered by first appearance in
  the request (`toolu#1`): the model's own ids, whichever run they came from;
- the CLI's subagent ids (`a` and 16 hex digits, random per run: the Task
  tool's `agentId: …`, `SendMessage with to: '…'`) as `$AGENT_ID`, and the
  `duration_ms` of the `<usage>` the CLI appends to a subagent's result;
- what the stage spent and has left in the CLI's budget reminder (`USD
  budget: $0.05/$2; $1.95 remaining`: the cap is kept), which with parallel
  subagents depends on whose answer was counted first;
- the order of the tool results in one message: the CLI lists the results of
  parallel tool calls (subagents above all) as they finish, so they are put
  in the order of their calls (the API pairs a result with its call by id).

Everything else is kept as sent — model, system, messages (roles, text,
tool calls and results), tools, max_tokens, thinking, stream, tool_choice,
temperature, stop sequences, ... — so a changed prompt, command, tool or
setting is a different request.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

# `$TMPDIR/ci-evals-<run-id>-<mkdtemp suffix>` (run.runner): the run's workspaces. The
# `$TMPDIR` part starts where a path can (not inside another path) and is the shortest
# there is: two paths in one word (`…/a.md,/tmp/ci-evals-…`) are two folders, never one
# match swallowing the first path's tail (`a.md,`), which would make requests naming
# different files one key.
_RUN_TMP = re.compile(
    r"(?:(?<![^\s\"'`<>|:,;=(\[{])/[^\s\"'`<>|:,;]*?)?"
    r"/ci-evals-\d{8}T\d{6}Z-[0-9a-f]{6}-[A-Za-z0-9_]+"
)
_RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6}\b")
_DATE = re.compile(r"(Today's date is )\d{4}-\d{2}-\d{2}")
# The CLI's environment line: the kernel of the machine that ran it (a runner image's
# update, a laptop), not the question.
_OS_VERSION = re.compile(r"(OS Version: )[^\n]*")
_BILLING = re.compile(r"x-anthropic-billing-header:[^\n]*")
_TOOL_ID = re.compile(r"\b(?:srv)?toolu_[A-Za-z0-9_]+")
# What the stage spent so far, in the CLI's budget reminder (with max_budget_usd):
# with parallel subagents it depends on which answers were counted first.
_SPENT = re.compile(r"(USD budget: \$)[0-9.e+-]+(/\$[0-9.]+; \$)[0-9.e+-]+( remaining)")
# How long a subagent took, in the `<usage>` the CLI appends to its result.
_DURATION = re.compile(r"(\nduration_ms: )\d+(</usage>)")
# The CLI's subagent ids: "a" and 16 hex digits, random per run.
_AGENT_ID = re.compile(r"\ba[0-9a-f]{16}\b")
_DROPPED_KEYS = frozenset({"cache_control"})


def request_key(path: str, body: object) -> dict[str, Any]:
    """The normalised key of one request (`path` may carry a query string)."""
    ids: dict[str, str] = {}
    normal = _normalise(body, ids)
    if isinstance(normal, dict):
        _order_tool_results(normal.get("messages"))
        metadata = normal.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("user_id", None)
            if not metadata:
                del normal["metadata"]
    return {"route": path.split("?", 1)[0], "body": normal}


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


def run_tmp_folders(body: object) -> list[str]:
    """The run temp folders a request names, in the order they first appear."""
    text = json.dumps(body, ensure_ascii=False)
    return list(dict.fromkeys(_RUN_TMP.findall(text)))


def digest(key: dict[str, Any]) -> str:
    """A stable hash of a key (sorted keys: field order never matters)."""
    text = json.dumps(key, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _normalise(value: object, ids: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v, ids) for k, v in sorted(value.items()) if k not in _DROPPED_KEYS}
    if isinstance(value, list):
        return [_normalise(v, ids) for v in value]
    if isinstance(value, str):
        return _normalise_text(value, ids)
    return value


def _normalise_text(text: str, ids: dict[str, str]) -> str:
    text = _RUN_TMP.sub("$RUN_TMP", text)
    text = _RUN_ID.sub("$RUN_ID", text)
    text = _DATE.sub(r"\1<date>", text)
    text = _OS_VERSION.sub(r"\1<os>", text)
    text = _BILLING.sub("x-anthropic-billing-header: <dropped>", text)
    text = _AGENT_ID.sub("$AGENT_ID", text)
    text = _DURATION.sub(r"\1<ms>\2", text)
    text = _SPENT.sub(r"\1<spent>\2<left>\3", text)
    return _TOOL_ID.sub(lambda m: ids.setdefault(m.group(), f"toolu#{len(ids) + 1}"), text)


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
