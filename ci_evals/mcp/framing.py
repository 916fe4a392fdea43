"""Newline-delimited JSON-RPC from a server's stdout, whatever the server writes.

The stdio transport is one JSON-RPC message per line, UTF-8, no embedded
newlines, nothing else on stdout. A server under test may break every one of
those rules, so `LineReader` never raises: it turns bytes (in chunks of any
size, cut anywhere) into `Message`s and `Violation`s. A line longer than
`MAX_LINE_BYTES` is dropped as it arrives (never held whole in memory).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_LINE_BYTES = 4 * 1024 * 1024
_SHOWN = 80  # characters of an offending line quoted in a violation


@dataclass(frozen=True)
class Message:
    """One JSON-RPC message (a JSON object with `"jsonrpc": "2.0"`)."""

    body: dict[str, Any]

    @property
    def is_reply(self) -> bool:
        return "method" not in self.body and ("result" in self.body or "error" in self.body)

    @property
    def reply_problem(self) -> str | None:
        """Why this reply is no JSON-RPC 2.0 response (None when it is one, or no reply):
        a response has a result or an error object, never both."""
        if not self.is_reply:
            return None
        if "result" in self.body and "error" in self.body:
            return "both result and error (a response has exactly one)"
        error = self.body.get("error", {})
        code = error.get("code") if isinstance(error, dict) else None
        if "error" in self.body and (
            not isinstance(code, int)
            or isinstance(code, bool)
            or not isinstance(error.get("message"), str)
        ):
            return "an error that is not an object with an integer code and a string message"
        return None


@dataclass(frozen=True)
class Violation:
    """A line on stdout that is not a JSON-RPC message, said in a few words."""

    text: str


Event = Message | Violation


class LineReader:
    """Feed it stdout as it comes; it gives back whole lines, parsed."""

    def __init__(self, cap: int = MAX_LINE_BYTES) -> None:
        self._cap = cap
        self._partial = bytearray()
        self._skipping = 0  # > 0: inside a line longer than the cap, this many bytes so far

    def feed(self, data: bytes) -> list[Event]:
        events: list[Event] = []
        while data:
            end = data.find(b"\n")
            piece, data = (data, b"") if end < 0 else (data[:end], data[end + 1 :])
            if self._skipping:
                self._skipping += len(piece)
            elif len(self._partial) + len(piece) > self._cap:
                self._skipping = len(self._partial) + len(piece)
                self._partial.clear()
            else:
                self._partial += piece
            if end < 0:
                break
            if self._skipping:
                events.append(Violation(f"a line of {self._skipping} bytes (cap {self._cap})"))
                self._skipping = 0
            else:
                line = bytes(self._partial)
                self._partial.clear()
                event = parse_line(line)
                if event is not None:
                    events.append(event)
        return events

    def close(self) -> list[Event]:
        """At end of stream: an unterminated last line is a violation (messages end in \\n)."""
        if self._skipping:
            return [Violation(f"a line of {self._skipping} bytes (cap {self._cap}), unterminated")]
        if self._partial.strip():
            shown = bytes(self._partial[:_SHOWN]).decode("utf-8", "replace")
            self._partial.clear()
            return [Violation(f"output without a final newline: {shown!r}")]
        return []


def parse_line(line: bytes) -> Event | None:  # noqa: PLR0911 - one return per rule broken
    """One stdout line as a message or a violation; None for an empty line (\\r\\n tolerated)."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line.strip():
        return None
    shown = line[:_SHOWN].decode("utf-8", "replace")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return Violation(f"a line that is not UTF-8: {shown!r}")
    try:
        body = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return Violation(f"JSON nested too deeply: {shown!r}")
    except ValueError:
        return Violation(f"not JSON: {shown!r}")
    if not isinstance(body, dict):
        # A batch (a JSON array) is not a message on any revision a server answers with.
        return Violation(f"JSON that is not an object: {shown!r}")
    if body.get("jsonrpc") != "2.0":
        return Violation(f'a JSON object without "jsonrpc": "2.0": {shown!r}')
    if "method" not in body and "result" not in body and "error" not in body:
        return Violation(
            f"a JSON-RPC object that is neither request, notification nor reply: {shown!r}"
        )
    return Message(body)


def _no_constant(name: str) -> Any:
    """NaN, Infinity and -Infinity: Python's json reads them, JSON has no such literals."""
    raise ValueError(f"{name} is not JSON")
