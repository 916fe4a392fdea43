"""The replay server: a recording served back on 127.0.0.1, as the model answered it.

`POST /v1/messages` (and `/count_tokens`) is matched by its normalised key
(`key`) and answered with the next unserved exchange recorded under that key:
the same status, content type and bytes — an event stream chunked event by
event, a JSON body whole. Identical requests get their recorded responses in
recorded order, whichever scenario (`--jobs`) asks first. `HEAD`/`GET` (the
CLI's probe) get an empty 200; anything else a JSON 404.

A Messages request with no recorded exchange left *diverged*: it is answered
with a short `replay: ...` message ending the turn, so the CLI stops cleanly,
and kept for its caller's `misses()`, naming its position and how its key
differs from the nearest recorded one; the runner makes the stage an `error`.
An unrecorded `count_tokens` is answered 0 (it produces no answer).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ci_evals.endpoints.local_http import (
    EVENT_STREAM,
    LocalHandler,
    LocalHTTPService,
    LocalServer,
    RefusedBody,
    caller_of,
    error_body,
    loads_body,
    read_decoded_body,
)
from ci_evals.endpoints.replay.key import (
    differences,
    digest,
    distance,
    request_key,
    run_tmp_folders,
)
from ci_evals.endpoints.replay.recording import Exchange, Recording
from ci_evals.endpoints.replay.rewrite import moved
from ci_evals.text import display_path

if TYPE_CHECKING:
    from ci_evals.results.model import EndpointMiss

KEY = "replay-key"
KEY_PREFIX = KEY + "."  # `replay-key.c3`: caller c3 (`ReplayServer.new_caller`)
MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
_SHOWN_DIFFERENCES = 2


@dataclass(frozen=True)
class Divergence:
    """A request the recording has no answer for."""

    caller: str
    position: int  # its place among its caller's Messages requests (1-based)
    index: int  # its place among every Messages request of the replay (1-based)
    text: str  # one line: where it is and how it differs


class ReplayServer(LocalHTTPService):
    """Serve a `Recording`; `with ReplayServer(recording) as server: server.url`."""

    thread_name = "replay-model"

    def __init__(self, recording: Recording, port: int = 0) -> None:
        self.recording = recording
        self._queues: dict[str, deque[Exchange]] = {}
        for exchange in recording.exchanges:
            self._queues.setdefault(exchange.digest, deque()).append(exchange)
        self._recorded = {found: len(queue) for found, queue in self._queues.items()}
        self._lock = threading.Lock()
        self._divergences: list[Divergence] = []
        self._served = 0
        self._asked = itertools.count(1)
        self._positions: dict[str, itertools.count[int]] = {}
        self._callers = itertools.count(1)
        super().__init__(port)

    def _make_server(self, address: tuple[str, int]) -> ReplayHTTPServer:
        return ReplayHTTPServer(address, ReplayHandler, self)

    def _after_shutdown(self, httpd: ThreadingHTTPServer) -> None:
        for conn in self.open_connections():
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()  # joins the handler threads (block_on_close)

    # -- what callers use -----------------------------------------------------------

    def cli_env(self, caller: str = "") -> dict[str, str]:
        """The variables that point the Claude Code CLI (or the loop agent) here."""
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": f"{KEY_PREFIX}{caller}" if caller else KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def new_caller(self, place: int | None = None) -> ReplayCaller:
        return ReplayCaller(self, f"c{next(self._callers)}")

    @property
    def divergences(self) -> list[Divergence]:
        with self._lock:
            return list(self._divergences)

    @property
    def served(self) -> int:
        """How many recorded exchanges were served so far."""
        with self._lock:
            return self._served

    # -- used by the handler --------------------------------------------------------------

    def answer(self, route: str, body: object, caller: str) -> Exchange | Divergence | None:
        """The recorded exchange for this request; a `Divergence` when a Messages
        request has none; None for an unrecorded `count_tokens`."""
        key = request_key(route, body)
        found = digest(key)
        with self._lock:
            queue = self._queues.get(found)
            exchange = queue.popleft() if queue else None
            self._served += exchange is not None
            if route != MESSAGES:
                return exchange
            index = next(self._asked)  # every Messages request counts, answered or not
            position = next(self._positions.setdefault(caller, itertools.count(1)))
            if exchange is not None:
                return exchange
        text = self._describe(key, found, position, index)
        divergence = Divergence(caller, position, index, text)
        with self._lock:
            self._divergences.append(divergence)
        return divergence

    def _describe(self, key: dict[str, Any], found: str, position: int, index: int) -> str:
        where = f"replay: request #{position} of this stage (#{index} of the run)"
        source = display_path(self.recording.path)
        if found in self._recorded:
            first = next(e for e in self.recording.exchanges if e.digest == found)
            return (
                f"{where} was recorded {self._recorded[found]} time(s) ({source}:{first.line}) "
                f"and is asked once more{self.recording.cut_note()}"
            )
        distinct = {e.digest: e for e in reversed(self.recording.exchanges)}.values()
        nearest = min(sorted(distinct, key=lambda e: e.line), key=lambda e: distance(key, e.key))
        found_differences = list(differences(key, nearest.key))
        shown = "; ".join(f"{p or 'request'}: {how}" for p, how in found_differences[:2])
        more = len(found_differences) - _SHOWN_DIFFERENCES
        return (
            f"{where} has no recorded exchange; nearest {source}:{nearest.line}: {shown}"
            + (f" (and {more} more difference(s))" if more > 0 else "")
            + self.recording.cut_note()
        )


class ReplayCaller:
    """One caller (a stage and its reviewers): `env`, then its `misses()` (`EndpointCaller`)."""

    def __init__(self, server: ReplayServer, caller: str) -> None:
        self.server = server
        self.caller = caller
        self.env = server.cli_env(caller)

    def misses(self) -> list[EndpointMiss]:
        from ci_evals.results.model import EndpointMiss  # noqa: PLC0415 - pydantic, run only

        return [
            EndpointMiss(outcome="diverged", text=d.text)
            for d in self.server.divergences
            if d.caller == self.caller
        ]


class ReplayHTTPServer(LocalServer):
    """The socket server a `ReplayServer` runs; its handlers reach it as `replay`."""

    daemon_threads = False  # tracked, so server_close() can join them
    block_on_close = True

    def __init__(
        self, address: tuple[str, int], handler: type[ReplayHandler], replay: ReplayServer
    ) -> None:
        self.replay = replay
        super().__init__(address, handler, replay)


class ReplayHandler(LocalHandler):
    """One connection to the replay server: each request answered from the recording."""

    server: ReplayHTTPServer

    def do_HEAD(self) -> None:
        self.respond(200, b"", "text/plain")

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] in ("/", "/api/hello"):
            self.respond(200, b"", "text/plain")
        else:
            self._error(404, "not_found_error", f"replay: no such endpoint {self.path}")

    def do_POST(self) -> None:
        route = self.path.split("?", 1)[0]
        try:
            # Read, parsed and matched a few at a time: the key is a copy of the body.
            with self.server.replay.body_slot():
                raw = read_decoded_body(dict(self.headers.items()), self.rfile)
                if route not in (MESSAGES, COUNT_TOKENS):
                    self._error(404, "not_found_error", f"replay: no such endpoint {self.path}")
                    return
                body = loads_body(raw)
                del raw
                answer = self.server.replay.answer(
                    route, body, caller_of(dict(self.headers.items()), KEY_PREFIX)
                )
        except RefusedBody as exc:
            self.close_connection = True  # where the next request starts is unknown
            self._error(exc.status, exc.kind, f"replay: {exc}")
            return
        except ValueError as exc:
            self._error(400, "invalid_request_error", f"replay: request body is not JSON: {exc}")
            return
        try:
            if answer is None:
                self.respond(200, b'{"input_tokens": 0}', "application/json")
            elif isinstance(answer, Divergence):
                stream = isinstance(body, dict) and body.get("stream") is True
                model = body.get("model") if isinstance(body, dict) else None
                self._diverged(answer.text, str(model or "replay"), stream)
            else:
                here = run_tmp_folders(body)
                self._serve(answer, here[0] if here else None)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up on this request

    def _serve(self, exchange: Exchange, folder: str | None) -> None:
        """The recorded response, its run's temp folder replaced by `folder` (`rewrite`)."""
        if exchange.status == 0:  # recorded as no response: the connection ends
            self.hang_up()
            return
        body = moved(exchange.body, exchange.streamed, exchange.folders, folder)
        if not exchange.streamed:
            self.respond(exchange.status, body, exchange.content_type)
            return
        self.start_stream(exchange.status, exchange.content_type)
        for event in _events(body):
            self.chunk(event)
        self.chunk(b"")

    def _diverged(self, text: str, model: str, stream: bool) -> None:
        """A message saying so, ending the turn: the CLI stops cleanly."""
        message: dict[str, Any] = {
            "id": "msg_replay_diverged",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        if not stream:
            self.respond(200, json.dumps(message).encode(), "application/json")
            return
        start = {**message, "content": [], "stop_reason": None}
        events = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 0},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self.start_stream(200, EVENT_STREAM)
        for name, data in events:
            self.chunk(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.chunk(b"")

    def _error(self, status: int, kind: str, message: str) -> None:
        self.respond(status, error_body(kind, message), "application/json")


def _events(body: bytes) -> list[bytes]:
    """A recorded event stream cut after each event (its blank line), as it was sent."""
    pieces = body.split(b"\n\n")
    events = [piece + b"\n\n" for piece in pieces[:-1]]
    return events + ([pieces[-1]] if pieces[-1] else [])
