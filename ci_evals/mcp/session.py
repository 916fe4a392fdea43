"""One MCP server process over stdio: write JSON-RPC lines, wait for replies by id.

The process is started from a sandbox's `Spawn` (so it runs where the sandbox
says, never by a shell) in a session of its own; `close()` ends its whole
process group. Two threads read its stdout (through `framing.LineReader`)
and its stderr (the last `STDERR_CAP` bytes kept, for the report). Every wait
has a deadline: a server that hangs costs one timeout, not the check.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from typing import IO, Any

from ci_evals.mcp.framing import LineReader, Message, Violation
from ci_evals.mcp.revisions import VERSION_KEY
from ci_evals.process import ProcessGroup, kill_group
from ci_evals.sandbox.base import Spawn

STDERR_CAP = 16 * 1024
MAX_STDOUT_BYTES = 64 * 1024 * 1024  # read from one session; beyond it the server is killed
MAX_EVENTS = 10_000  # messages kept from one session; a flood beyond it is one violation
_READ_BYTES = 65536
_EXIT_GRACE_S = 0.1  # after stdin closes, how long a server may take to exit on its own
# After its stdout closed (or its stdin): how long to wait for the exit status and
# stderr's last words. The exit follows at once, but on a loaded machine the
# exiting process may not be scheduled for a while (0.1 s was seen too short);
# a server that exited costs nothing, only one that keeps running waits it out.
_EXITING_GRACE_S = 2.0
_STOP_GRACE_S = 0.5  # then SIGTERM: what it started may clean up before SIGKILL
_FIRST_ID_MIN, _FIRST_ID_SPAN = 1000, 1 << 30
_WAIT_SLICE_S = 3600.0


def same_id(answered: object, asked: object) -> bool:
    """Whether a reply's id is a request's: equal and of the same JSON type (in
    Python `true == 1` and `1.0 == 1`; a JSON-RPC id is a string or an integer)."""
    return type(answered) is type(asked) and answered == asked


class NoReply(Exception):
    """A wait ended without the reply: the reason, in words for the report."""


class Session:
    """A running server; use as a context manager (`close()` kills what is left)."""

    def __init__(self, spawn: Spawn) -> None:
        # Its own group: close() ends all it started.
        self._group = ProcessGroup(spawn.argv, cwd=spawn.cwd, env=spawn.env)
        self._proc = self._group.proc
        self._changed = threading.Condition()
        self.messages: list[Message] = []
        self.violations: list[str] = []
        self._stdout_done = False
        self._stopped = False  # kill(): every wait ends now
        self._stderr = bytearray()
        # Request ids start at a random number: a server that numbers its replies
        # 1, 2, 3... instead of echoing each request's id must not match them.
        self._next_id = _FIRST_ID_MIN + secrets.randbelow(_FIRST_ID_SPAN)
        self.sent_ids: set[object] = set()  # of every request sent: a reply to none is stray
        # request id (as JSON) -> its method and the protocolVersion of its _meta
        self.methods: dict[str, tuple[str, object]] = {}
        # What sub-tests sharing this process learn on the way (`subtests`):
        self.started = False  # `initialize`d and `notifications/initialized` sent
        self.negotiated: str | None = None  # the protocolVersion initialize answered
        self.supported: tuple[str, ...] | None = None  # server/discover's supportedVersions
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    # -- writing -------------------------------------------------------------

    def send_raw(self, line: bytes) -> None:
        """Write one line (a newline is added); a server that stopped reading is `NoReply`."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise NoReply(f"the server stopped reading its stdin{self._ended()}") from None

    def send(self, body: dict[str, Any]) -> None:
        if "id" in body:
            self.sent_ids.add(body["id"])
            if isinstance(body.get("method"), str):
                params = body.get("params")
                meta = params.get("_meta") if isinstance(params, dict) else None
                version = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
                self.methods[json.dumps(body["id"])] = (body["method"], version)
        self.send_raw(json.dumps(body, separators=(",", ":")).encode())

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params: dict[str, Any] | None, timeout: float) -> Message:
        """Send a request and wait for the reply with its id."""
        request_id = self.new_id()
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        self.send(body)
        return self.reply(request_id, timeout, what=method)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        self.send(body)

    # -- waiting -------------------------------------------------------------

    def reply(self, request_id: object, timeout: float, *, what: str) -> Message:
        """The reply whose id is `request_id`, within `timeout` seconds."""
        found = self.wait_for(
            lambda m: m.is_reply and same_id(m.body.get("id"), request_id), timeout
        )
        if found is None:
            raise NoReply(self.why_silent(f"no reply to {what}", timeout) + self._unmatched())
        if found.reply_problem is not None:
            raise NoReply(f"the reply to {what} is not JSON-RPC: {found.reply_problem}")
        return found

    def _unmatched(self) -> str:
        """A reply no request asked for, said: often why the wait was in vain."""
        for message in self.replies():
            answered = message.body.get("id")
            if not any(same_id(answered, asked) for asked in self.sent_ids):
                return f" (a reply came with id {json.dumps(answered)}, which no request had)"
        return ""

    def wait_for(self, wanted: Any, timeout: float) -> Message | None:
        """The first message (so far or within `timeout`) for which `wanted(m)` holds."""
        deadline = time.monotonic() + timeout
        seen = 0  # messages only ever get appended: look at each one once
        with self._changed:
            while True:
                for message in self.messages[seen:]:
                    if wanted(message):
                        return message
                seen = len(self.messages)
                left = deadline - time.monotonic()
                if left <= 0 or self._stdout_done or self._stopped:
                    return None
                # In slices: a lock cannot wait more than the platform's time_t.
                self._changed.wait(min(left, _WAIT_SLICE_S))

    def why_silent(self, what: str, timeout: float) -> str:
        if self._stopped:
            return f"{what}: the check was stopped"
        if self._stdout_done:
            return f"{what}: the server closed its stdout{self._ended()}"
        return f"{what} within {timeout:g}s"

    def replies(self) -> list[Message]:
        with self._changed:
            return [m for m in self.messages if m.is_reply]

    def results(self) -> list[tuple[str, object, Any]]:
        """(method, the protocolVersion its `_meta` named, result) of every result that
        answered a request of ours, in order."""
        found = []
        for message in self.replies():
            # json.dumps tells 1 from 1.0 and true: the id's JSON type must match too.
            asked = self.methods.get(json.dumps(message.body.get("id")))
            if asked is not None and "result" in message.body:
                found.append((*asked, message.body["result"]))
        return found

    @property
    def stderr(self) -> str:
        with self._changed:
            return self._stderr.decode("utf-8", "replace")

    def _ended(self) -> str:
        self._group.wait(_EXITING_GRACE_S)  # its stdout closed: it is probably exiting
        code = self._proc.poll()
        if code is None:
            return ""
        self._readers[1].join(timeout=_EXITING_GRACE_S)  # its last words on stderr
        last = self.stderr.strip().splitlines()
        tail = f"; stderr: {last[-1][:200]}" if last else ""
        return f" (it exited with code {code}{tail})"

    # -- reading (threads) ---------------------------------------------------

    def _read_stdout(self) -> None:
        reader = LineReader()
        pipe = self._proc.stdout
        assert pipe is not None
        total = 0
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), _READ_BYTES):
                total += len(chunk)
                if total > MAX_STDOUT_BYTES:  # a flood: it is not answering anything
                    with self._changed:
                        self.violations.append(f"more than {MAX_STDOUT_BYTES} bytes on stdout")
                    kill_group(self._proc.pid)
                    break
                self._take(reader.feed(chunk))
        self._take(reader.close())
        with self._changed:
            self._stdout_done = True
            self._changed.notify_all()

    def _take(self, events: list[Message | Violation]) -> None:
        if not events:
            return
        with self._changed:
            for event in events:
                if isinstance(event, Violation):
                    self.violations.append(event.text)
                elif len(self.messages) < MAX_EVENTS:
                    self.messages.append(event)
                elif len(self.messages) == MAX_EVENTS:
                    self.violations.append(f"more than {MAX_EVENTS} messages in one session")
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        pipe: IO[bytes] | None = self._proc.stderr
        assert pipe is not None
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), _READ_BYTES):
                with self._changed:
                    self._stderr += chunk
                    del self._stderr[:-STDERR_CAP]

    # -- ending --------------------------------------------------------------

    def close(self) -> None:
        """Close stdin (the stdio way to ask a server to stop), then end its group."""
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self._proc.stdin.close()
        self._group.wait(_EXIT_GRACE_S)
        self._group.stop(grace_s=_STOP_GRACE_S)
        for reader in self._readers:
            # A process that left the group may hold the pipes; its output is not waited for.
            reader.join(timeout=1.0)

    def kill(self) -> None:
        """End the server's group now (from another thread; `close()` still follows),
        and every wait with it: a child that left the group may keep stdout open."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        kill_group(self._proc.pid)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
