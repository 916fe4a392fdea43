"""Encode one assistant message as Messages API streaming events (Server-Sent Events).

The sequence follows the streaming spec: `message_start`, then per content
block `content_block_start` / `content_block_delta`* / `content_block_stop`,
then `message_delta` (stop reason and cumulative usage) and `message_stop`.
Text goes out as `text_delta`, tool input as `input_json_delta` pieces of the
JSON string — the client concatenates and parses them at `content_block_stop`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ci_evals.endpoints.local_http import error_body
from ci_evals.endpoints.stub_model.script import StubUsage

# Big Write contents are split into several deltas, as the real API does.
_DELTA_CHARS = 4096


def event(name: str, data: Mapping[str, Any]) -> bytes:
    """One SSE event: `event:` line, one `data:` line of compact JSON, blank line."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def _usage_json(usage: StubUsage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": usage.output_tokens,
    }


def message_json(
    message_id: str,
    model: str,
    blocks: Sequence[Mapping[str, Any]],
    stop_reason: str,
    usage: StubUsage,
) -> bytes:
    """The same message as one JSON body, for a request with `stream: false`.

    The CLI sends one when a stream fails to parse (its non-streaming fallback).
    """
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _usage_json(usage),
    }
    return json.dumps(message, ensure_ascii=False).encode()


def message_events(
    message_id: str,
    model: str,
    blocks: Sequence[Mapping[str, Any]],
    stop_reason: str,
    usage: StubUsage,
) -> Iterator[bytes]:
    """The events of one streamed message made of `text` and `tool_use` blocks."""
    start_usage = {**_usage_json(usage), "output_tokens": 0}
    yield event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )
    for index, block in enumerate(blocks):
        yield from _block_events(index, block)
    yield event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            # Cumulative, as the API reports it at the end of a stream.
            "usage": {**start_usage, "output_tokens": usage.output_tokens},
        },
    )
    yield event("message_stop", {"type": "message_stop"})


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[bytes]:
    if block["type"] == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        pieces = [{"type": "text_delta", "text": part} for part in _split(str(block["text"]))]
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        encoded = json.dumps(block["input"], ensure_ascii=False)
        pieces = [{"type": "input_json_delta", "partial_json": part} for part in _split(encoded)]
    yield event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in pieces:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        yield event("content_block_delta", payload)
    yield event("content_block_stop", {"type": "content_block_stop", "index": index})


def _split(text: str) -> list[str]:
    if not text:
        return [""]
    return [text[i : i + _DELTA_CHARS] for i in range(0, len(text), _DELTA_CHARS)]


def status_error_body(status: int, message: str | None, request_id: str) -> bytes:
    """The API's error body for an HTTP error status (its error type from the status)."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return error_body(kind, message or f"stub: scripted HTTP {status} ({kind})", request_id)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

MALFORMED_EVENT = b"event: message_start\ndata: {this is not json\n\n"
MALFORMED_JSON = b"{this is not json"
