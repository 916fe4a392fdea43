"""A recorded response moved to this run: the recorded run's temp folder becomes ours.

The model answered the recorded run with its paths (`Write
/tmp/ci-evals-<old run>-…/acme/workspace/out.md`); served unchanged, the
agent of this run would write into a folder that is not its workspace. Every
occurrence of the recorded run's temp folder (`key.run_tmp_folders`) is
replaced with this run's. In an event stream a path can be cut across two
deltas, so each content block's deltas are first joined into one (the client
sees the same block, in fewer events).
"""

from __future__ import annotations

import json
from typing import Any

_JOINED = {"text_delta": "text", "input_json_delta": "partial_json", "thinking_delta": "thinking"}


def moved(body: bytes, streamed: bool, old: frozenset[str], new: str | None) -> bytes:
    """`body` with each of `old` replaced by `new` (unchanged when there is nothing to do)."""
    if new is None or not old or old == {new}:
        return body
    if not streamed:
        return _replace(body.decode("utf-8", errors="replace"), old, new).encode()
    return b"".join(_event(name, data) for name, data in _joined(body, old, new))


def _replace(text: str, old: frozenset[str], new: str) -> str:
    for folder in sorted(old, key=len, reverse=True):
        text = text.replace(folder, new)
    return text


def _joined(body: bytes, old: frozenset[str], new: str) -> list[tuple[str | None, Any]]:
    """The stream's events, each block's deltas of one kind joined into its first."""
    events: list[tuple[str | None, Any]] = []
    open_delta: dict[tuple[object, str], dict[str, Any]] = {}
    for raw in body.decode("utf-8", errors="replace").split("\n\n"):
        if not raw.strip():
            continue
        name, data = _parse(raw)
        if not isinstance(data, dict):
            events.append((name, raw if data is None else data))
            continue
        delta = data.get("delta")
        kind = delta.get("type") if isinstance(delta, dict) else None
        if data.get("type") == "content_block_delta" and kind in _JOINED:
            assert isinstance(delta, dict)
            field = _JOINED[str(kind)]
            first = open_delta.get((data.get("index"), field))
            if first is not None:
                first[field] = str(first.get(field, "")) + str(delta.get(field, ""))
                continue
            open_delta[(data.get("index"), field)] = delta
        events.append((name, data))
    return [
        (name, _deep_replace(data, old, new) if isinstance(data, dict) else data)
        for name, data in events
    ]


def _deep_replace(value: Any, old: frozenset[str], new: str) -> Any:
    if isinstance(value, dict):
        return {k: _deep_replace(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_replace(v, old, new) for v in value]
    return _replace(value, old, new) if isinstance(value, str) else value


def _parse(raw: str) -> tuple[str | None, Any]:
    """(event name, its data as JSON); data None when it is not JSON (kept as it was)."""
    name = None
    data_lines = []
    for line in raw.split("\n"):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data_lines.append(line[5:].lstrip(" "))
    try:
        return name, json.loads("\n".join(data_lines))
    except ValueError:
        return name, None


def _event(name: str | None, data: Any) -> bytes:
    if isinstance(data, str):  # an event that was not JSON: as recorded
        return (data + "\n\n").encode()
    head = f"event: {name}\n" if name is not None else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
