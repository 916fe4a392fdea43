"""The stub's HTTP server: a stdlib ThreadingHTTPServer on 127.0.0.1 in a background thread.

`POST /v1/messages` is answered from the script (streamed SSE, chunked, on a
keep-alive connection like the real API). `POST /v1/messages/count_tokens`
gets zero; `HEAD`/`GET` (the CLI's `/api/hello` probe) get an empty 200;
anything else a JSON 404. Every request is recorded (`requests`); with
`record_path`, every Messages API exchange is also written there as one JSON
line, in the format of the forwarding proxy's `--record` (docs/replay.md),
capped as the proxy's (`exchange_log`), so a stub run can be replayed like a
run on the real API.

Stopping is clean: hanging handlers wait on an event that `stop()` sets, open
keep-alive sockets are shut down so their threads leave `readline`, and the
handler threads are joined.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals.endpoints.exchange_log import ExchangeLog
from ci_evals.endpoints.local_http import (
    EVENT_STREAM,
    LocalHandler,
    LocalHTTPService,
    LocalServer,
    RefusedBody,
    caller_of,
    loads_body,
    read_decoded_body,
)
from ci_evals.endpoints.stub_model import sse
from ci_evals.endpoints.stub_model.request import parse_request
from ci_evals.endpoints.stub_model.responder import Reply, Responder
from ci_evals.endpoints.stub_model.script import Script

if TYPE_CHECKING:
    from ci_evals.results.model import EndpointMiss

KEY = "stub-model-key"
KEY_PREFIX = KEY + "."  # `stub-model-key.c3`: caller c3 (`StubServer.new_caller`)
# Outcomes that mean the script and the suite disagree (docs/stub-model.md).
MISSED = ("unmatched", "exhausted")


@dataclass(frozen=True)
class RequestRecord:
    """One request the stub received, and what it did about it.

    `outcome`: `turn`, `fault`, `exhausted`, `unmatched`, `nonessential`
    (see `Reply`), or `other` for paths that are not the Messages API.
    """

    index: int
    time: float  # time.time() when the request arrived
    method: str
    path: str
    model: str | None
    outcome: str
    rule: str | None
    turn: int | None
    agent: str | None
    command: str | None
    subagent: bool
    session_id: str
    stream: bool
    status: int  # the HTTP status sent (0 for hang/disconnect before headers)
    # Who asked: the tag in the API key a `new_caller()` handed out ('' for the plain
    # `cli_env()` key), so a runner can tell its stages' requests apart.
    caller: str = ""
    # For `unmatched` and `exhausted`: the text the stub answered with instead.
    note: str | None = None

    def describe(self) -> str:
        """One log line."""
        who = self.agent or self.command or ("subagent" if self.subagent else "main")
        where = f"rule={self.rule!r} turn={self.turn}" if self.rule else "rule=None"
        return f"#{self.index} {self.method} {self.path} [{who}] {where} -> {self.outcome}"


def _answer_text(reply: Reply) -> str:
    return " ".join(str(b.get("text", "")) for b in reply.blocks if b.get("type") == "text")


class StubServer(LocalHTTPService):
    """Serve a stub `Script` on 127.0.0.1 (port 0: a free one) until stopped.

    Use as a context manager: `with StubServer(script) as server: server.url`.
    """

    def __init__(
        self,
        script: Script,
        port: int = 0,
        on_request: Callable[[RequestRecord], None] | None = None,
        record_path: Path | None = None,
    ) -> None:
        self.script = script
        self.record_path = record_path
        self._exchange_log = ExchangeLog(record_path) if record_path is not None else None
        self.responder = Responder(script)
        self._on_request = on_request
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._indexes = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._callers = itertools.count(1)
        self._places: dict[str, int] = {}  # caller -> its unit's place in the plan
        super().__init__(port)

    # -- lifecycle -------------------------------------------------------------

    thread_name = "stub-model"

    def _make_server(self, address: tuple[str, int]) -> StubModelHTTPServer:
        return StubModelHTTPServer(address, StubModelHandler, self)

    def _before_start(self) -> None:
        if self._exchange_log is not None:
            self._exchange_log.open()

    def _after_shutdown(self, httpd: ThreadingHTTPServer) -> None:
        for conn in self.open_connections():
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()  # joins the handler threads (block_on_close)
        if self._exchange_log is not None:
            self._exchange_log.close()

    # -- what callers use ----------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the records of every request received so far, in arrival order."""
        with self._lock:
            return list(self._records)

    def unmatched(self, caller: str | None = None) -> list[RequestRecord]:
        """Requests no rule fit, or that asked for a turn past a rule's last
        (only `caller`'s, when given: see `new_caller`)."""
        return [
            r
            for r in self.requests
            if r.outcome in MISSED and (caller is None or r.caller == caller)
        ]

    def cli_env(self, caller: str = "") -> dict[str, str]:
        """The environment variables that point the Claude Code CLI at this stub.

        Only the model endpoint; the caller owns the rest of the CLI's
        environment (HOME, TMPDIR, IS_SANDBOX, ...). With `caller`, the API key
        carries that tag and every request it sends is recorded with it.
        """
        return {
            "ANTHROPIC_BASE_URL": self.url,
            # The CLI needs a key; the stub reads only the tag after the prefix.
            "ANTHROPIC_API_KEY": f"{KEY_PREFIX}{caller}" if caller else KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def new_caller(self, place: int | None = None) -> StubCaller:
        """A new caller: its environment, and later the requests of it no rule answered.
        `place`: its unit's place in the run's plan, which picks a rule's variants."""
        caller = f"c{next(self._callers)}"
        if place is not None:
            self._places[caller] = place
        return StubCaller(self, caller)

    # -- used by the handler ----------------------------------------------------------

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)
        if self._on_request is not None:
            self._on_request(record)

    def _write_exchange(self, line: Mapping[str, Any]) -> None:
        if self._exchange_log is not None:
            self._exchange_log.write(line)  # capped (`exchange_log`)

    def _next_index(self) -> int:
        return next(self._indexes)

    def _next_message_id(self) -> str:
        return f"msg_stub_{next(self._message_ids):06d}"


class StubCaller:
    """One caller of a `StubServer` (a stage and its reviewers): `env` for its
    CLIs, `misses()` for what the script had no answer to (`EndpointCaller` in
    `ci_evals.endpoints.base`)."""

    def __init__(self, server: StubServer, caller: str) -> None:
        self.server = server
        self.caller = caller
        self.env = server.cli_env(caller)

    def misses(self) -> list[EndpointMiss]:
        from ci_evals.results.model import EndpointMiss  # noqa: PLC0415 - pydantic, run only

        return [
            EndpointMiss(
                outcome="exhausted" if r.outcome == "exhausted" else "unmatched",
                rule=r.rule,
                turn=r.turn,
                subagent=r.subagent,
                text=r.note or r.outcome,
            )
            for r in self.server.unmatched(self.caller)
        ]


class StubModelHTTPServer(LocalServer):
    """The socket server a `StubServer` runs; its handlers reach the stub as `stub`."""

    daemon_threads = False  # tracked, so server_close() can join them
    block_on_close = True

    def __init__(
        self, address: tuple[str, int], handler: type[StubModelHandler], stub: StubServer
    ) -> None:
        self.stub = stub
        super().__init__(address, handler, stub)


class StubModelHandler(LocalHandler):
    """One connection to the stub: each request answered from the script and recorded."""

    server: StubModelHTTPServer  # records replace the access log

    def setup(self) -> None:
        super().setup()
        self._sent = bytearray()  # what the current Messages request was sent (recording)
        self._sent_headers: dict[str, str] = {}

    # -- verbs ---------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self._other(200, b"")

    def do_GET(self) -> None:
        self._other(200, b"") if self.path.startswith("/api/hello") else self._not_found()

    def do_POST(self) -> None:
        route = self.path.split("?", 1)[0]
        try:
            with self.server.stub.body_slot():  # read and parsed a few at a time
                body = read_decoded_body(dict(self.headers.items()), self.rfile)
                decoded = loads_body(body) if route == "/v1/messages" else None
        except RefusedBody as exc:
            self.close_connection = True  # where the next request starts is unknown
            self._other(exc.status, sse.status_error_body(exc.status, f"stub: {exc}", "req_stub"),
                        content_type="application/json")  # fmt: skip
            return
        except ValueError as exc:
            self._not_json(exc)
            return
        if route == "/v1/messages/count_tokens":
            self._other(200, b'{"input_tokens": 0}', content_type="application/json")
        elif route == "/v1/messages":
            self._messages(decoded)
        else:
            self._not_found()

    # -- helpers ---------------------------------------------------------------------

    def _other(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self._record_plain(status)
        self.respond(status, body, content_type)

    def _not_found(self) -> None:
        body = sse.status_error_body(404, f"stub: no such endpoint {self.path}", "req_stub")
        self._other(404, body, content_type="application/json")

    def _record_plain(self, status: int) -> None:
        stub = self.server.stub
        stub._record(
            RequestRecord(
                index=stub._next_index(),
                time=time.time(),
                method=self.command,
                path=self.path,
                model=None,
                outcome="other",
                rule=None,
                turn=None,
                agent=None,
                command=None,
                subagent=False,
                session_id=self.headers.get("X-Claude-Code-Session-Id", ""),
                stream=False,
                status=status,
            )
        )

    def _not_json(self, exc: ValueError) -> None:
        self._other(
            400,
            sse.status_error_body(400, f"stub: request body is not JSON: {exc}", "req_stub"),
            content_type="application/json",
        )

    def _messages(self, decoded: object) -> None:
        stub = self.server.stub
        arrived = time.time()
        if not isinstance(decoded, dict):
            self._not_json(ValueError("not a JSON object"))
            return
        headers = dict(self.headers.items())
        self._sent = bytearray()
        self._sent_headers = {}
        request = parse_request(decoded, headers)
        reply = stub.responder.reply(request, stub._places.get(caller_of(headers, KEY_PREFIX)))
        status = self._status_of(reply)
        stub._record(
            RequestRecord(
                index=stub._next_index(),
                time=arrived,
                method=self.command,
                path=self.path,
                model=request.model,
                outcome=reply.outcome,
                rule=reply.rule,
                turn=reply.turn,
                agent=reply.agent,
                command=request.command,
                subagent=request.subagent,
                session_id=request.session_id,
                stream=request.stream,
                status=status,
                caller=caller_of(headers, KEY_PREFIX),
                note=_answer_text(reply) if reply.outcome in MISSED else None,
            )
        )
        if reply.delay and stub._stopping.wait(reply.delay):
            self.close_connection = True
            return
        try:
            self._send_reply(reply, request.model, request.stream)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the CLI gave up on this request (its timeout)
        finally:
            if stub.record_path is not None:
                stub._write_exchange(self._exchange(arrived, decoded, headers, reply, status))

    def _exchange(
        self,
        arrived: float,
        body: dict[str, Any],
        headers: Mapping[str, str],
        reply: Reply,
        status: int,
    ) -> dict[str, Any]:
        """The recording's line (the forwarding proxy's keys; no key in the headers)."""
        return {
            "time": datetime.fromtimestamp(arrived, timezone.utc).isoformat(),
            "duration_s": round(time.time() - arrived, 6),
            "method": self.command,
            "path": self.path,
            "request_headers": {
                k.lower(): v
                for k, v in headers.items()
                if k.lower() not in ("x-api-key", "authorization")
            },
            "request_body": body,
            "outcome": reply.outcome,
            "status": status if self._sent_headers else 0,
            "response_headers": self._sent_headers,
            "response_body": bytes(self._sent).decode("utf-8", errors="replace"),
            "model": body.get("model"),
            "usage": dataclasses.asdict(reply.usage),
            "cost_usd": 0.0,
            "reserved_usd": 0.0,
            "attempts": [],
            "error": None,
        }

    def send_header(self, keyword: str, value: str) -> None:
        self._sent_headers[keyword.lower()] = value  # for the recording
        super().send_header(keyword, value)

    @staticmethod
    def _status_of(reply: Reply) -> int:
        fault = reply.fault
        if fault is None or fault.kind in ("malformed_sse", "disconnect"):
            return 200
        return fault.http_status  # 0 for a hang: nothing is sent

    def _send_reply(self, reply: Reply, model: str, stream: bool) -> None:
        stub = self.server.stub
        fault = reply.fault
        message_id = stub._next_message_id()
        request_id = message_id.replace("msg_", "req_", 1)
        if fault is not None and fault.kind == "hang":
            stub._stopping.wait(fault.hang_seconds)
            self.close_connection = True
            return
        if fault is not None and fault.kind == "http_status":
            body = sse.status_error_body(fault.http_status, fault.message, request_id)
            self._respond_recorded(fault.http_status, body, request_id)
            return
        if not stream:
            self._send_json(reply, model, message_id, request_id)
            return
        self.start_stream(200, EVENT_STREAM, {"request-id": request_id})
        if fault is not None and fault.kind == "malformed_sse":
            self.chunk(sse.MALFORMED_EVENT)
            self.chunk(b"")
            return
        events = sse.message_events(message_id, model, reply.blocks, reply.stop_reason, reply.usage)
        for data in events:
            self.chunk(data)
            if fault is not None and fault.kind == "disconnect":
                # Cut the stream after message_start, as a dropped connection would.
                self.hang_up()
                return
        self.chunk(b"")  # the terminating zero-length chunk

    def _send_json(self, reply: Reply, model: str, message_id: str, request_id: str) -> None:
        fault = reply.fault
        if fault is not None and fault.kind == "disconnect":
            self.hang_up()
            return
        if fault is not None and fault.kind == "malformed_sse":
            body = sse.MALFORMED_JSON
        else:
            body = sse.message_json(message_id, model, reply.blocks, reply.stop_reason, reply.usage)
        self._respond_recorded(200, body, request_id)

    def _respond_recorded(self, status: int, body: bytes, request_id: str) -> None:
        """A Messages API reply with a JSON body, kept for the recording."""
        self.respond(status, body, "application/json", {"request-id": request_id})
        self._sent += body

    def chunk(self, data: bytes) -> None:
        self._sent += data  # for the recording
        super().chunk(data)
