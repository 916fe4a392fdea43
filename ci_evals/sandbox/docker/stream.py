"""Reading one `docker exec` over its hijacked connection: stdin in, stdout and stderr out.

Without a terminal the engine multiplexes both output streams on one
connection, each frame an 8-byte header (stream: 1 stdout, 2 stderr; three
zero bytes; the payload's length, big-endian) and the payload. `pump` feeds
stdin (then half-closes, which the engine reads as EOF), reads frames into
two capped tails (the last bytes kept: a compiler's last errors matter most),
and stops at EOF, at the deadline, or once `ended()` says the command's
process is gone and the connection has stayed quiet for `drain_s` (a
background process that left the command's group may hold stdout open).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

HEADER = struct.Struct(">BxxxI")
STDOUT, STDERR = 1, 2
_CHUNK = 64 * 1024
_IDLE_POLL_S = 0.2  # how often a quiet connection asks whether the command ended


@dataclass
class Tail:
    """The last `cap` bytes written to it (cap < 0: all), and how many were cut."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if 0 <= self.cap < len(self.data):
            cut = len(self.data) - self.cap
            self.dropped += cut
            del self.data[:cut]


@dataclass
class Pumped:
    stdout: Tail
    stderr: Tail
    timed_out: bool


class _Frames:
    """Cuts the multiplexed byte stream into (stream, payload) pieces as it arrives."""

    def __init__(self, out: Tail, err: Tail) -> None:
        self._pending = b""
        self._sinks = {STDOUT: out, STDERR: err}

    def feed(self, data: bytes) -> None:
        buffer = self._pending + data
        at = 0
        while len(buffer) - at >= HEADER.size:
            kind, size = HEADER.unpack_from(buffer, at)
            if len(buffer) - at - HEADER.size < size:
                break
            start = at + HEADER.size
            sink = self._sinks.get(kind)
            if sink is not None:  # stream 0 (stdin echo) and unknown kinds: dropped
                sink.add(buffer[start : start + size])
            at = start + size
        self._pending = buffer[at:]


def pump(
    sock: socket.socket,
    *,
    stdin: bytes | None,
    deadline: float | None,
    cap: int,
    merge: bool,
    ended: Callable[[], bool],
    drain_s: float,
) -> Pumped:
    """Drive the connection until EOF, `deadline` (monotonic) or a quiet end; see the module doc."""
    out = Tail(cap)
    err = out if merge else Tail(cap)
    frames = _Frames(out, err)
    sock.setblocking(False)  # the caller's socket: it is closed next, never reused
    feeder = _Stdin(sock, stdin)
    quiet_since: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(sock, feeder.events())
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return Pumped(stdout=out, stderr=err, timed_out=True)
            wait = _IDLE_POLL_S if deadline is None else min(_IDLE_POLL_S, deadline - now)
            events = selector.select(max(0.0, wait))
            if not events:
                if quiet_since is None and ended():
                    quiet_since = time.monotonic()
                if quiet_since is not None and time.monotonic() - quiet_since >= drain_s:
                    break
                continue
            quiet_since = None
            mask = events[0][1]
            if mask & selectors.EVENT_WRITE and feeder.write():
                selector.modify(sock, feeder.events())
            if mask & selectors.EVENT_READ:
                try:
                    data = sock.recv(_CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    break
                if not data:
                    break
                frames.feed(data)
    return Pumped(stdout=out, stderr=err, timed_out=False)


class _Stdin:
    """Writes the command's stdin as the connection takes it, then half-closes it
    (EOF for the command). No stdin (None): the stream was never attached."""

    def __init__(self, sock: socket.socket, data: bytes | None) -> None:
        self._sock = sock
        self._left = memoryview(data or b"")
        if data is not None and not self._left:
            self._close()

    def events(self) -> int:
        return selectors.EVENT_READ | (selectors.EVENT_WRITE if self._left else 0)

    def write(self) -> bool:
        """Write what the socket takes; True once everything is written (and EOF sent)."""
        try:
            self._left = self._left[self._sock.send(self._left[:_CHUNK]) :]
        except BlockingIOError:
            return False
        except OSError:  # the command exited before reading it all
            self._left = self._left[:0]
        if self._left:
            return False
        self._close()
        return True

    def _close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
