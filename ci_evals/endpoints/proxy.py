"""A per-run forwarding endpoint that holds the real API key, so the agent never does.

The agent's CLI gets `cli_env()`: `ANTHROPIC_BASE_URL` pointing here (127.0.0.1)
and a random per-run token worthless anywhere else; the proxy checks it, drops
it and sends the real credential upstream. It is also where the run's hard
budget is enforced (a request forwarded only once its worst case is reserved
in `ledger`, settled on the usage reported), the one layer that retries a
request (`faults`; the CLI is told not to), and where exchanges are recorded
(capped, key and token scrubbed). The real credential is never in `repr`, the
recording or the log. Each route, status and rule: docs/run.md (*The model proxy*).
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import itertools
import json
import logging
import re
import secrets
import select
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ci_evals.backoff import RetryPolicy, requested_wait
from ci_evals.endpoints.exchange_log import MAX_EXCHANGE_BYTES, ExchangeLog
from ci_evals.endpoints.faults import RETRIED_STATUSES, EndpointFault, Faults, status_fault
from ci_evals.endpoints.ledger import (
    BadRequest,
    Charge,
    Ledger,
    Metered,
    Stopped,
    Unpriceable,
    loads_request,
    worst_case,
)
from ci_evals.endpoints.local_http import (
    MAX_JSON_VALUES,
    LocalHandler,
    LocalHTTPService,
    LocalServer,
    RefusedBody,
    error_body,
    json_values,
    read_body,
)
from ci_evals.endpoints.pricing import PricedUsage, Pricing, asks_long_context

if TYPE_CHECKING:
    from ci_evals.results.model import EndpointMiss

log = logging.getLogger(__name__)

BUDGET_STATUS = 402
FORWARDED_ROUTES = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
BUDGETED_ROUTE = "/v1/messages"
PROBE_ROUTES = frozenset({"/", "/api/hello"})
AUTH_HEADERS = frozenset({"x-api-key", "authorization"})
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED_UP = (
    HOP_BY_HOP | AUTH_HEADERS | {"host", "content-length", "accept-encoding", "expect"}
)
_NOT_FORWARDED_DOWN = HOP_BY_HOP | {"content-length"}
_READ_SIZE = 64 * 1024
# Upstream errors that mean the request never left: nothing can have been billed.
_NOT_SENT = (ConnectionRefusedError, ConnectionAbortedError, socket.gaierror)
_REDACTED = "[redacted]"
# A caller's tag after the run token (`<token>.c12`): ours, so digits only.
_CALLER = re.compile(r"c\d{1,9}")
# What is kept of a response nobody records: an error's body for its one-line
# fault, a JSON message for its usage (far above any real message).
_KEEP_ERROR_BYTES = 64 * 1024
_KEEP_JSON_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class ProxySettings:
    """How one run's proxy reaches the API and what it allows.

    Give `api_key` (sent as `x-api-key`) or `auth_token` (sent as
    `Authorization: Bearer`), not both; neither hidden from `repr`.
    """

    upstream: str  # "https://api.anthropic.com"; tests: "http://127.0.0.1:PORT"
    api_key: str | None = field(default=None, repr=False)
    auth_token: str | None = field(default=None, repr=False)
    budget_usd: float | None = None  # the whole run's hard budget; None: no budget
    max_concurrency: int = 4
    max_retries: int = 4  # for upstream 429, 5xx and refused connections (`faults`)
    max_retry_wait_s: float = 60.0
    retry_base_s: float = 0.5  # first backoff without retry-after (then x2, with jitter)
    upstream_timeout_s: float = 600.0  # per socket read, like the CLI's API_TIMEOUT_MS
    record_path: Path | None = None  # JSON lines, one per exchange

    def __post_init__(self) -> None:
        parts = urlsplit(self.upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, not {self.upstream!r}")
        if self.api_key is not None and self.auth_token is not None:
            raise ValueError("give api_key or auth_token, not both")
        if self.budget_usd is not None and self.budget_usd < 0:
            raise ValueError("budget_usd must not be negative")
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if self.max_retries < 0 or self.max_retry_wait_s < 0 or self.retry_base_s < 0:
            raise ValueError("max_retries, max_retry_wait_s and retry_base_s must not be negative")

    @property
    def retry(self) -> RetryPolicy:
        """Upstream 429/5xx: `retry-after(-ms)` honoured, else jittered backoff; both capped."""
        return RetryPolicy(
            attempts=self.max_retries + 1,
            first_s=self.retry_base_s,
            cap_s=self.max_retry_wait_s,
            jitter=True,
        )


class SSEUsage:
    """Reads `usage` and `model` from a Messages API event stream fed in pieces."""

    def __init__(self) -> None:
        self.usage: PricedUsage | None = None
        self.model: str | None = None
        self.error: str | None = None  # an `error` event's type, if the stream had one
        self.error_message: str | None = None
        self.output_bytes = 0  # content the deltas carried: a bound on the tokens received
        self.stopped = False  # message_stop seen: the usage is final
        self._pending = b""

    def feed(self, data: bytes) -> None:
        self._pending += data
        while True:
            cut = _event_end(self._pending)
            if cut is None:
                return
            end, skip = cut
            self._event(self._pending[:end])
            self._pending = self._pending[end + skip :]

    def _event(self, raw: bytes) -> None:
        data = [
            line[5:].lstrip(b" ")
            for line in raw.replace(b"\r\n", b"\n").split(b"\n")
            if line.startswith(b"data:")
        ]
        if not data:
            return
        try:
            payload = json.loads(b"\n".join(data))
        except ValueError:
            return  # not ours to judge; the client sees the same bytes
        if isinstance(payload, dict):
            self.observe(payload)

    def observe(self, payload: Mapping[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, Mapping):
                self._take(message.get("usage"))
                if isinstance(message.get("model"), str):
                    self.model = message["model"]
        elif kind == "message_delta":
            self._take(payload.get("usage"))
        elif kind == "message":  # a whole (non-streamed) message
            self._take(payload.get("usage"))
            if isinstance(payload.get("model"), str):
                self.model = payload["model"]
        elif kind == "content_block_delta":
            self.output_bytes += _delta_bytes(payload.get("delta"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            error = payload.get("error")
            self.error = str(error.get("type")) if isinstance(error, Mapping) else "error"
            if isinstance(error, Mapping) and isinstance(error.get("message"), str):
                self.error_message = error["message"]

    def received(self, max_tokens: int | None) -> PricedUsage | None:
        """What a stream cut short proved was used: `message_start`'s input, and as
        many output tokens as it reported or as bytes of content arrived, if more
        (a token is never shorter than a byte), never past the request's
        `max_tokens`; None if it said nothing."""
        if self.usage is None:
            return None
        output = max(self.usage.output_tokens, self.output_bytes)
        if max_tokens is not None:
            output = min(output, max(max_tokens, self.usage.output_tokens))
        return self.usage.updated({"output_tokens": output})

    def _take(self, usage: object) -> None:
        if isinstance(usage, Mapping):
            self.usage = (self.usage or PricedUsage()).updated(usage)


def _delta_bytes(delta: object) -> int:
    """Bytes of content one `content_block_delta` carried."""
    if not isinstance(delta, Mapping):
        return 0
    fields = ("text", "partial_json", "thinking", "signature")
    return sum(len(delta[k].encode()) for k in fields if isinstance(delta.get(k), str))


def _event_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first complete SSE event ends (a blank line), and the separator's length."""
    found = [(i, len(sep)) for sep in (b"\n\n", b"\r\n\r\n") if (i := buffer.find(sep)) >= 0]
    return min(found) if found else None


class ForwardingProxy(LocalHTTPService):
    """The run's model endpoint on 127.0.0.1; `with ForwardingProxy(settings) as proxy:`."""

    def __init__(self, settings: ProxySettings, *, prices: Pricing | None = None) -> None:
        self.settings = settings
        self.prices = prices or Pricing()
        self.token = secrets.token_urlsafe(32)
        parts = urlsplit(settings.upstream)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._upstream_port = parts.port or (443 if self._https else 80)
        self._host_header = parts.netloc.rsplit("@", 1)[-1]
        self._base_path = parts.path.rstrip("/")
        self._ssl = ssl.create_default_context() if self._https else None
        self._secrets = [s for s in (self.token, settings.api_key, settings.auth_token) if s]
        self._lock = threading.Lock()
        self.ledger = Ledger(settings.budget_usd)
        self._slots = threading.BoundedSemaphore(settings.max_concurrency)
        self._idle: list[http.client.HTTPConnection] = []
        self._busy: set[http.client.HTTPConnection] = set()
        self._handlers: set[threading.Thread] = set()
        self._exchange_log = (
            ExchangeLog(settings.record_path) if settings.record_path is not None else None
        )
        self.faults = Faults()
        self._callers = itertools.count(1)
        super().__init__()

    # -- lifecycle -------------------------------------------------------------------

    thread_name = "model-proxy"

    def _before_start(self) -> None:
        if self._exchange_log is not None:
            self._exchange_log.open()

    def _make_server(self, address: tuple[str, int]) -> ProxyHTTPServer:
        return ProxyHTTPServer(address, ProxyHandler, self)

    def _after_shutdown(self, httpd: ThreadingHTTPServer) -> None:
        """Abort what is in flight, join every handler thread, close the recording."""
        while True:
            # Unblock handlers: keep-alive reads from the CLI, reads from upstream.
            # Repeated, since a handler may have opened a connection meanwhile.
            with self._lock:
                handlers = list(self._handlers)
                upstream = [c.sock for c in self._busy if c.sock is not None]
            sockets = self.open_connections() + upstream
            if not handlers:
                break
            for sock in sockets:
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)
            for handler in handlers:
                handler.join(timeout=0.1)
        httpd.server_close()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._exchange_log is not None:
            self._exchange_log.close()

    # -- what callers use --------------------------------------------------------------

    def cli_env(self, caller: str = "") -> dict[str, str]:
        """What the agent's CLI gets: this endpoint and the per-run token (tagged
        with `caller`), nothing real; and no retries of its own (`faults`)."""
        token = f"{self.token}.{caller}" if caller else self.token
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": token,
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }

    def new_caller(self, place: int | None = None) -> ProxyCaller:
        """A new caller (a stage and its reviewers): its token, later its faults."""
        caller = f"c{next(self._callers)}"
        return ProxyCaller(self.cli_env(caller), self.faults, caller)

    @property
    def spent_usd(self) -> float:
        return self.ledger.spent_usd

    @property
    def usage(self) -> PricedUsage:
        """Token totals of every response forwarded so far."""
        return self.ledger.metered().usage

    @property
    def requests(self) -> int:
        """Requests forwarded upstream (each counted once, however many attempts)."""
        return self.ledger.metered().requests

    @property
    def budget_refusals(self) -> int:
        return self.ledger.metered().refused

    @property
    def budget_exhausted(self) -> bool:
        """The spend has reached the budget: no further Messages request is forwarded."""
        return self.ledger.exhausted

    def metered(self) -> Metered:
        """Everything forwarded so far: requests, refusals, tokens and what they cost."""
        return self.ledger.metered()

    # -- used by the handler -------------------------------------------------------------

    def _caller(self, headers: Mapping[str, str]) -> str | None:
        """The caller a request's token names ('' for the plain run token), or None
        when it carries no valid token."""
        expected = self.token.encode()
        offered = [headers.get("x-api-key", "")]
        bearer = headers.get("authorization", "")
        if bearer[:7].lower() == "bearer ":
            offered.append(bearer[7:].strip())
        found: str | None = None
        # Compare every candidate, so timing does not tell which header was tried.
        for candidate in offered:
            token, _, caller = candidate.partition(".")
            matches = hmac.compare_digest(token.encode(), expected)
            if matches and (caller == "" or _CALLER.fullmatch(caller)) and found is None:
                found = caller
        return found

    def _acquire_slot(self) -> bool:
        while not self._slots.acquire(timeout=0.1):
            if self._stopping.is_set():
                return False
        return True

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """An upstream connection (reused when one is idle) and whether it was reused."""
        if self._stopping.is_set():
            raise ConnectionAbortedError("the proxy is stopping")
        with self._lock:
            if self._idle:
                conn = self._idle.pop()
                self._busy.add(conn)
                return conn, True
        timeout = self.settings.upstream_timeout_s
        fresh: http.client.HTTPConnection
        if self._ssl is not None:
            fresh = http.client.HTTPSConnection(
                self._host, self._upstream_port, timeout=timeout, context=self._ssl
            )
        else:
            fresh = http.client.HTTPConnection(self._host, self._upstream_port, timeout=timeout)
        with self._lock:
            self._busy.add(fresh)
        return fresh, False

    def _release(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        with self._lock:
            self._busy.discard(conn)
            if reusable and not self._stopping.is_set():
                self._idle.append(conn)
                return
        conn.close()

    def _send(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """One upstream attempt; a reused connection the server closed meanwhile is
        replaced once by a fresh one."""
        for _ in range(2):
            conn, reused = self._connection()
            try:
                conn.request(method, self._base_path + path, body=body, headers=headers)
                return conn, conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._release(conn, reusable=False)
                if not reused or self._stopping.is_set():
                    raise
            except BaseException:
                self._release(conn, reusable=False)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _upstream_headers(self, incoming: Mapping[str, str]) -> dict[str, str]:
        named = {n.strip().lower() for n in incoming.get("connection", "").split(",")}
        headers = {
            name: value
            for name, value in incoming.items()
            if name.lower() not in _NOT_FORWARDED_UP and name.lower() not in named
        }
        headers["Host"] = self._host_header
        headers["Accept-Encoding"] = "identity"
        if self.settings.api_key is not None:
            headers["x-api-key"] = self.settings.api_key
        elif self.settings.auth_token is not None:
            headers["Authorization"] = f"Bearer {self.settings.auth_token}"
        return headers

    def _write_record(self, record: Mapping[str, Any]) -> None:
        if self._exchange_log is not None:
            self._exchange_log.write(record, self._scrub)  # capped (`exchange_log`)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        return text


class ProxyCaller:
    """One caller of the proxy (a stage and its reviewers): its token, its faults
    (`FaultReportingCaller` in `endpoints.base`). The proxy answers every request, so
    nothing goes unanswered (`misses` is empty)."""

    def __init__(self, env: Mapping[str, str], faults: Faults, caller: str) -> None:
        self.env = env
        self._faults = faults
        self.caller = caller

    def misses(self) -> list[EndpointMiss]:
        return []

    def fault(self, since: float) -> EndpointFault | None:
        return self._faults.last(self.caller, since)


class ProxyHTTPServer(LocalServer):
    """The socket server a `ForwardingProxy` runs. Handler threads are daemons (never
    block exit) but tracked, so stop() joins them."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[ProxyHandler], proxy: ForwardingProxy
    ) -> None:
        self.proxy = proxy
        super().__init__(address, handler, proxy)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._handle_tracked,
            args=(request, client_address),
            name="model-proxy-request",
            daemon=True,
        )
        with self.proxy._lock:  # started under the lock: stop() never joins an unstarted one
            self.proxy._handlers.add(thread)
            thread.start()

    def _handle_tracked(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.proxy._lock:
                self.proxy._handlers.discard(threading.current_thread())


class ProxyHandler(LocalHandler):
    """One connection to the proxy: probes answered here, each POST an `_Exchange`."""

    server: ProxyHTTPServer  # one debug line per exchange instead of the access log, no headers

    def do_HEAD(self) -> None:
        self._probe()

    def do_GET(self) -> None:
        self._probe()

    def do_POST(self) -> None:
        _Exchange(self).run()

    def _probe(self) -> None:
        if self.path.split("?", 1)[0] in PROBE_ROUTES:
            self.respond(200, b"", "text/plain")
        else:
            body = error_body("not_found_error", f"ci-evals proxy: no route {self.path}")
            self.respond(404, body, "application/json")


class _Exchange:
    """One POST: checked, forwarded (with retries), streamed back, accounted, recorded."""

    def __init__(self, handler: ProxyHandler) -> None:
        self.handler = handler
        self.proxy = handler.server.proxy
        self.started = time.time()
        self.headers = {k.lower(): v for k, v in handler.headers.items()}
        self.route = handler.path.split("?", 1)[0]
        # Asks for the 1M window: priced at the long-context premium past 200K input.
        self.long_context = asks_long_context(self.headers.get("anthropic-beta", ""))
        self.body = b""
        self.request: dict[str, Any] | None = None  # the body, read by `loads_request`
        self.outcome = "forwarded"
        self.status = 0
        self.response_headers: dict[str, str] = {}
        self.response = bytearray()  # its first `keep_limit` bytes
        self.response_bytes = 0  # all of it
        self.caller = ""  # whose token it carried (`ForwardingProxy.new_caller`)
        self.charge: Charge = "usage"  # how it was charged (`ledger.Charge`)
        self.upstream_broke = False  # the upstream side of a relayed response failed
        self.attempts: list[dict[str, Any]] = []
        self.parser = SSEUsage()
        self.cost = 0.0
        self.reserved = 0.0  # the worst case held for it in the budget (`ledger`)
        self.input_bound = 0.0  # of it, the input's part
        self.admitted = False  # counted and reserved: it must be settled once
        self.settled = False
        self.maybe_sent = False  # no response, but upstream may have had (and billed) it
        self.streamed = False
        self.error: str | None = None

    def run(self) -> None:
        handler = self.handler
        try:
            caller = self.proxy._caller(self.headers)
            if caller is None:
                handler.close_connection = True  # the body is not read: no keep-alive
                message = "ci-evals proxy: invalid or missing token"
                self._refuse(401, "authentication_error", message)
                self.outcome = "refused_auth"
            elif self.route not in FORWARDED_ROUTES:
                handler.close_connection = True
                self._refuse(404, "not_found_error", f"ci-evals proxy: no route {handler.path}")
                self.outcome = "not_found"
            elif not self._read_and_parse():
                self.outcome = "bad_request"
            else:
                self.caller = caller
                if self._admit():
                    self._forward()
        finally:  # whatever went wrong, a reservation is settled and the exchange recorded
            self._finish()

    def _read_and_parse(self) -> bool:
        """The body read and parsed, a few requests at a time (`LocalHTTPService.body_slot`:
        what one holds is bounded, so is how many do); 503 when no turn comes."""
        try:
            with self.proxy.body_slot():
                return self._read_body() and self._parse_body()
        except RefusedBody as exc:
            self.handler.close_connection = True  # the body is not read: no keep-alive
            self._refuse(exc.status, exc.kind, f"ci-evals proxy: {exc}")
            return False

    def _parse_body(self) -> bool:
        """Refuse (400) a body the budget could read differently from the API, and (413)
        one that could build more values than any request holds (`local_http.json_values`)."""
        if json_values(self.body) > MAX_JSON_VALUES:
            message = f"ci-evals proxy: the JSON body holds more than {MAX_JSON_VALUES} values"
            self._refuse(413, "request_too_large", message)
            return False
        try:
            self.request = loads_request(self.body)
        except BadRequest as exc:
            self._refuse(400, "invalid_request_error", f"ci-evals proxy: {exc}")
            return False
        return True

    def _admit(self) -> bool:
        """Reserve the request's worst case in the budget, or refuse it (`ledger`)."""
        proxy = self.proxy
        if self.route != BUDGETED_ROUTE:
            proxy.ledger.count_unbudgeted()
            self.admitted = True
            return True
        try:
            bound = worst_case(self.body, proxy.prices, self.long_context)
            worst, input_bound = bound.cost_usd, bound.input_cost_usd
        except Unpriceable as exc:
            if proxy.settings.budget_usd is not None:
                message = f"ci-evals proxy: cannot bound this request's cost for the budget: {exc}"
                self._refuse(400, "invalid_request_error", message)
                self.outcome = "refused_unpriced"
                return False
            worst = input_bound = 0.0  # no budget to keep; the API will judge the request
        try:
            refusal = proxy.ledger.admit(worst, proxy._stopping, self._client_gone)
        except Stopped:
            self.error = "stopped"
            self.handler.close_connection = True
            return False
        if refusal is not None:
            self._refuse(BUDGET_STATUS, "billing_error", refusal)
            self.outcome = "refused_budget"
            return False
        self.reserved, self.input_bound, self.admitted = worst, input_bound, True
        return True

    def _client_gone(self) -> bool:
        """The client hung up (its socket reads as closed): nothing is to be sent for it."""
        sock = self.handler.connection
        poller = select.poll()  # not select(): no FD_SETSIZE limit
        try:
            poller.register(sock, select.POLLIN)
            if not poller.poll(0):
                return False  # nothing to read: still there, waiting for its answer
            return not sock.recv(1, socket.MSG_PEEK)  # EOF: gone; data: a pipelined request
        except OSError:
            return True

    def _read_body(self) -> bool:
        """Read the body (`local_http.read_body`: framed strictly, capped); 400 or 413 if not."""
        try:
            self.body = read_body(self.headers, self.handler.rfile)
        except RefusedBody as exc:
            self.handler.close_connection = True  # where the next request starts is unknown
            self._refuse(exc.status, exc.kind, f"ci-evals proxy: {exc}")
            return False
        return True

    def _refuse(self, status: int, kind: str, message: str) -> None:
        body = error_body(kind, message)
        self.status = status
        self.response += body
        self.handler.respond(status, body, "application/json")

    def _forward(self) -> None:
        proxy, settings, handler = self.proxy, self.proxy.settings, self.handler
        headers = proxy._upstream_headers(dict(handler.headers.items()))
        while True:
            if not proxy._acquire_slot():
                self.error = "stopped"
                handler.close_connection = True
                return
            try:
                began = time.monotonic()
                try:
                    conn, response = proxy._send(handler.command, handler.path, headers, self.body)
                except (OSError, http.client.HTTPException) as exc:
                    self.attempts.append({"status": None, "error": type(exc).__name__})
                    sent = not isinstance(exc, _NOT_SENT)
                    lost = "the connection was lost after the request left" if sent else ""
                    self.error = f"{lost or 'upstream unreachable'}: {type(exc).__name__}: {exc}"
                    retries_left = len(self.attempts) <= settings.max_retries
                    if isinstance(exc, _NOT_SENT) and retries_left:  # it never left: try again
                        proxy.faults.failed(self.caller, self._unreached(), retry_stage=False)
                        if self._backoff(began, None):
                            continue
                        return
                    self.maybe_sent = sent
                    self.outcome = "upstream_error"
                    self._refuse(502, "api_error", f"ci-evals proxy: {self.error}")
                    return
                self.attempts.append({"status": response.status, "seconds": 0.0})
                retries_left = len(self.attempts) <= settings.max_retries
                if response.status in RETRIED_STATUSES and retries_left:
                    with contextlib.suppress(OSError, http.client.HTTPException):
                        said = response.read(_KEEP_ERROR_BYTES)
                        # Said while it is retried: a stage that runs out of time
                        # meanwhile was ended by the endpoint (`faults`).
                        text = status_fault(response.status, said, len(self.attempts))
                        proxy.faults.failed(self.caller, text, retry_stage=False)
                    proxy._release(conn, reusable=False)  # its body may be unread
                    if self._backoff(began, requested_wait(response.headers)):
                        continue
                    return
                self._relay(conn, response)
                self.attempts[-1]["seconds"] = time.monotonic() - began
                return
            finally:
                proxy._slots.release()

    def _backoff(self, began: float, requested: float | None) -> bool:
        """Wait before the next try (the server's wait, or the policy's); False
        when the proxy stops meanwhile."""
        wait = self.proxy.settings.retry.wait(len(self.attempts), requested)
        self.attempts[-1].update(seconds=time.monotonic() - began, wait=wait)
        if self.proxy._stopping.wait(wait):
            self.error = "stopped"
            self.handler.close_connection = True
            return False
        return True

    def _relay(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
        """Send the response on as it arrives; read usage on the way."""
        handler = self.handler
        self.status = response.status
        self.response_headers = {k.lower(): v for k, v in response.getheaders()}
        named = {n.strip().lower() for n in self.response_headers.get("connection", "").split(",")}
        length = None if response.chunked else response.getheader("content-length")
        handler.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _NOT_FORWARDED_DOWN and name.lower() not in named:
                handler.send_header(name, value)
        if length is not None:
            handler.send_header("Content-Length", length)
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        self.streamed = self.response_headers.get("content-type", "").startswith(
            "text/event-stream"
        )
        self._answered()
        # A body of a known length goes on as it comes; any other in chunks.
        send = handler.chunk if length is None else handler.send_now
        client_ok = True
        upstream_ok = False
        try:
            handler.wfile.flush()
            while True:
                data = self._read_upstream(response)
                if not data:
                    upstream_ok = True
                    break
                self._keep(data)
                if self.streamed:
                    self.parser.feed(data)
                if self.parser.stopped or (length is not None and not response.length):
                    # Charged before the client has it all: its next request sees the spend.
                    self._settle()
                send(data)
            if length is None:
                self._settle()
                handler.chunk(b"")
        except (OSError, http.client.HTTPException) as exc:
            client_ok = False
            self.error = f"stream broken: {type(exc).__name__}: {exc}"
            handler.close_connection = True
        finally:
            reusable = upstream_ok and client_ok and not response.will_close
            response.close()  # read1 leaves a Content-Length response open at its end
            self.proxy._release(conn, reusable=reusable)

    @property
    def keep_limit(self) -> int:
        """How much of the response is kept: what the recording can hold (one byte
        more, so an answer past it is cut there as a marker), else what reading a
        JSON message's usage or an error's one line needs; a stream is parsed as it
        passes."""
        if self.proxy.settings.record_path is not None:
            return MAX_EXCHANGE_BYTES + 1
        ok = 200 <= self.status < 300
        return _KEEP_JSON_BYTES if ok and not self.streamed else _KEEP_ERROR_BYTES

    def _keep(self, data: bytes) -> None:
        self.response_bytes += len(data)
        room = self.keep_limit - len(self.response)
        if room > 0:
            self.response += data[:room]

    def _answered(self) -> None:
        """A 2xx began: the API answers again, and what it does next decides."""
        if 200 <= self.status < 300:
            self.proxy.faults.succeeded(self.caller)

    def _read_upstream(self, response: http.client.HTTPResponse) -> bytes:
        """The next piece of the response; a failure is the upstream's (`upstream_broke`)."""
        try:
            return response.read1(_READ_SIZE)
        except (OSError, http.client.HTTPException):
            self.upstream_broke = True
            raise

    def _settle(self) -> None:
        """Release the reservation and charge what the response cost, once: its
        usage; for a stream cut short, what it proved was used (`SSEUsage.received`);
        for a stream that brought no output, its input's bound; its whole
        reservation only when nothing is known (`charge` says which; `ledger`)."""
        if self.settled or not self.admitted:
            return
        self.settled = True
        self.cost = self.reserved  # if anything below fails
        self.charge = "reservation"
        usage: PricedUsage | None = None
        try:
            complete = self._read_message()
            usage = self.parser.usage
            ok = 200 <= self.status < 300
            if ok and self.streamed and not complete:
                usage = self.parser.received(self._max_tokens())  # cut short: what it proved
            model = self.parser.model or self._request_model()
            prices = self.proxy.prices
            cost = 0.0 if usage is None else prices.cost(model, usage, self.long_context)
            if self._no_output_arrived(usage):
                # A stream delivers output as it is made: none reached us, none is
                # charged; what its input was it never said, so its bound is.
                cost, self.charge = self.input_bound, "input"
            # No answer to a request that may have reached upstream (it closed, it
            # timed out), or a 2xx not a message that said nothing: the cost is unknown.
            elif (
                self.maybe_sent
                or (ok and usage is None)
                or (ok and not complete and not self.streamed)
            ):
                cost = max(cost, self.reserved)
            else:
                self.charge = "usage" if complete or not ok else "received"
            self.cost = cost
        finally:  # the reservation is released, whatever failed above
            self.proxy.ledger.settle(self.reserved, self.cost, usage, charge=self.charge)

    def _no_output_arrived(self, usage: PricedUsage | None) -> bool:
        """A streamed request that brought nothing of its answer: its connection lost
        after it left, or its stream cut before `message_start` said anything."""
        asked_stream = (self.request or {}).get("stream") is True
        nothing = usage is None and self.parser.output_bytes == 0
        began = self.maybe_sent or (200 <= self.status < 300 and self.streamed)
        return asked_stream and nothing and began

    def _read_message(self) -> bool:
        """Whether the response is complete: a stream's message_stop, or a JSON
        body that is a message (read for its usage); unreadable is incomplete."""
        if self.streamed or not 200 <= self.status < 300:
            return self.parser.stopped
        if self.response_bytes > len(self.response):
            return False  # past what is kept: its usage unread, its cost unknown
        try:
            payload = json.loads(bytes(self.response))
        except (ValueError, RecursionError):  # nested too deep for json, not JSON
            return False
        if not isinstance(payload, dict):
            return False
        self.parser.observe(payload)
        return payload.get("type") == "message"

    def _finish(self) -> None:
        self._settle()  # a broken stream: charged what it proved, or its reservation
        self._tell_fault()
        usage = self.parser.usage
        model = self.parser.model or self._request_model()
        if self.proxy.settings.record_path is not None:
            self.proxy._write_record(self.record(model, usage))
        log.debug(
            "%s %s -> %s (%s, %d attempts, $%.6f)",
            self.handler.command,
            self.proxy._scrub(self.handler.path),
            self.status,
            self.outcome,
            len(self.attempts),
            self.cost,
        )

    def _tell_fault(self) -> None:
        """Keep how this caller's request failed at the API, or that it succeeded."""
        faults, caller = self.proxy.faults, self.caller
        if self.outcome == "upstream_error":
            faults.failed(caller, self._unreached(), retry_stage=True)
        elif self.status in RETRIED_STATUSES or self.status >= 500:
            text = status_fault(self.status, bytes(self.response), len(self.attempts))
            faults.failed(caller, text, retry_stage=False)  # retried here as far as it goes
        elif self.parser.error is not None:
            said = ": ".join(t for t in (self.parser.error, self.parser.error_message) if t)
            faults.failed(
                caller, f"the model API's stream ended in an error: {said}", retry_stage=True
            )
        elif self.upstream_broke or (
            self.streamed
            and 200 <= self.status < 300
            and not self.parser.stopped
            and self.error is None
        ):
            got = f"{self.response_bytes:,} bytes"
            why = f" ({self.error})" if self.error else ""
            text = f"the model API's stream was cut before message_stop after {got}{why}"
            faults.failed(caller, text, retry_stage=True)
        elif self.status and self.error != "stopped":
            faults.succeeded(caller)  # it answered (a 400, our 402 too): no fault of the API

    def _unreached(self) -> str:
        tries = len(self.attempts)
        said = "gave no answer" if self.maybe_sent else "was not reached"
        return f"the model API {said}: {self.error}" + (f" ({tries} tries)" if tries > 1 else "")

    def _max_tokens(self) -> int | None:
        value = (self.request or {}).get("max_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _request_model(self) -> str | None:
        model = (self.request or {}).get("model")
        return model if isinstance(model, str) else None

    def record(self, model: str | None, usage: PricedUsage | None) -> dict[str, Any]:
        """The recording's line for this exchange (what a replay endpoint needs to answer)."""
        request_body: Any = self.request  # within MAX_DEPTH: json.dumps copes
        if request_body is None and self.body:
            request_body = self.body.decode("utf-8", errors="replace")
        return {
            "time": datetime.fromtimestamp(self.started, timezone.utc).isoformat(),
            "duration_s": round(time.time() - self.started, 6),
            "method": self.handler.command,
            "path": self.handler.path,
            "request_headers": {k: v for k, v in self.headers.items() if k not in AUTH_HEADERS},
            "request_body": request_body,
            "outcome": self.outcome,
            "status": self.status,
            "response_headers": self.response_headers,
            "response_body": bytes(self.response).decode("utf-8", errors="replace"),
            "model": model,
            "usage": usage.as_dict() if usage is not None else None,
            "cost_usd": self.cost,
            "reserved_usd": self.reserved,
            # usage: as reported; received: a stream cut short, what it proved; input:
            # a stream with no output, its input's bound; reservation: nothing known.
            "charged": self.charge if self.admitted else None,
            "response_bytes": self.response_bytes,
            "attempts": self.attempts,
            "error": self.error,
        }
