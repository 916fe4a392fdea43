"""The recording `run --record` writes (`model-exchanges.jsonl`), capped.

One JSON line per exchange, written by the forwarding proxy and the stub
model alike. Whatever runs in the sandbox chooses what it sends, so what is
kept is capped: an exchange whose line would pass `MAX_EXCHANGE_BYTES` is
kept as a marker line without its bodies (`"truncated": {"bytes": N,
"limit": L}`), and once the file would pass `MAX_RECORDING_BYTES` one last
line says so (`"truncated": "recording"`) and nothing more is written.
The replay reader (`replay.recording`) reads both markers: a cut exchange is
never served, so the request it was for diverges (fail closed), and a
divergence names the cut.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

MAX_EXCHANGE_BYTES = 16 * 1024 * 1024  # one line: a long conversation is a few MiB
MAX_RECORDING_BYTES = 256 * 1024 * 1024  # the file: what replay reads, what a PR commits
TRUNCATED = "truncated"  # the marker's key
WHOLE = "recording"  # its value when the file was cut, not one exchange
# What a cut exchange keeps: where it was and what became of it, no body.
_KEPT = ("time", "method", "path", "outcome", "status", "model")


class ExchangeLog:
    """Appends exchanges to `path`, one line each, within the caps; thread-safe."""

    def __init__(
        self,
        path: Path,
        *,
        exchange_limit: int = MAX_EXCHANGE_BYTES,
        limit: int = MAX_RECORDING_BYTES,
    ) -> None:
        self.path = path
        self.exchange_limit = exchange_limit
        self.limit = limit
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._written = 0
        self._full = False

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("ab")
        self._written = self._file.tell()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def write(self, record: Mapping[str, Any], scrub: Callable[[str], str] = str) -> None:
        """One exchange (`scrub` takes secrets out of its line), or its marker."""
        line = scrub(json.dumps(record, ensure_ascii=False, default=str)).encode() + b"\n"
        if len(line) > self.exchange_limit:
            cut = {k: record.get(k) for k in _KEPT}
            cut[TRUNCATED] = {"bytes": len(line), "limit": self.exchange_limit}
            line = scrub(json.dumps(cut, ensure_ascii=False, default=str)).encode() + b"\n"
        with self._lock:
            if self._file is None or self._full:
                return
            if self._written + len(line) > self.limit:
                self._full = True
                line = json.dumps({TRUNCATED: WHOLE, "limit": self.limit}).encode() + b"\n"
            self._file.write(line)
            self._file.flush()
            self._written += len(line)
