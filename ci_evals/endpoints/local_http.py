"""An HTTP server on 127.0.0.1 served by a daemon thread: the life cycle, the
request reading and the replies the stub model, the replay server and the
forwarding proxy share.

A subclass builds its server (`_make_server`) and says what stopping must
undo besides the server itself (`_after_shutdown`: open connections, handler
threads, files). `stop()` is idempotent; `with Service(...) as s:` starts and
stops it.

The servers run in ci-evals' own process, outside any sandbox's memory limit,
and whatever runs in the sandbox can reach them: every request body is read by
`read_body` and parsed by `loads_body` within bounds (bytes, values, bodies in
flight: `body_slot`). The bounds and why: docs/stub-model.md.

Every reply goes out through `LocalHandler`: `respond` (a whole body, its
length said), `start_stream` and `chunk` (an event stream, chunked as it is
made), `hang_up` (a connection dropped on purpose); an error's body is the
API's shape (`error_body`).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket
import sys
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeVar

_Self = TypeVar("_Self", bound="LocalHTTPService")

# What one request body may be, as sent and inflated: a long-context request with
# images is a few MiB; the API itself refuses a Messages request past 32 MB.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# What one parsed body may hold: the CLI's requests measured hold about 400 values
# for a stub stage's (45 KB) and a 1M-token conversation with thousands of tool calls
# under 100,000; each value costs the parse up to about 100 bytes (a small dict).
MAX_JSON_VALUES = 500_000
# Bodies one service reads and parses at once (the CLI's parallel subagents send a
# few together, each parsed in milliseconds), and how long one more waits for a turn.
MAX_BODIES_IN_FLIGHT = 4
SLOT_WAIT_S = 10.0
# A JSON string, escapes and all (unrolled: no backtracking per character).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# A chunk-size line as clients send it: hex digits only (no sign, no extensions).
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,8}\r?\n")
_MAX_LINE = 1024  # a chunk-size or trailer line
_MAX_TRAILERS = 64
_INFLATE_STEP = 1024 * 1024
# What the API streams its answer as (`start_stream`).
EVENT_STREAM = "text/event-stream; charset=utf-8"


def error_body(kind: str, message: str, request_id: str | None = None) -> bytes:
    """An error as the API words it: `{"type": "error", "error": {"type": KIND,
    "message": ...}}`, and the `request_id` the API adds, when there is one."""
    payload: dict[str, object] = {"type": "error", "error": {"type": kind, "message": message}}
    if request_id is not None:
        payload["request_id"] = request_id
    return json.dumps(payload).encode()


class RefusedBody(Exception):
    """A request body not read: `status` (413 or 400) and the API's error type."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        kinds = {413: "request_too_large", 503: "overloaded_error"}
        self.kind = kinds.get(status, "invalid_request_error")


def json_values(body: bytes) -> int:
    """An upper bound on the values (containers and scalars) `json.loads(body)` builds:
    its `[`, `{` and `,` outside strings, plus one. The bytes are counted first (fast,
    in C); only a body over the limit that way has its strings taken out to count."""

    def structural(data: bytes) -> int:
        return data.count(b"[") + data.count(b"{") + data.count(b",") + 1

    found = structural(body)
    return found if found <= MAX_JSON_VALUES else structural(_STRING.sub(b'""', body))


def loads_body(body: bytes, *, limit: int = MAX_JSON_VALUES) -> object:
    """`json.loads(body)`, refused (413) before parsing when it could build more than
    `limit` values; a body that is not JSON (or nests past the interpreter's limit)
    raises `ValueError`."""
    if json_values(body) > limit:
        raise RefusedBody(413, f"the JSON body holds more than {limit} values")
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_body(
    headers: Mapping[str, str], rfile: io.BufferedIOBase, *, limit: int = MAX_REQUEST_BYTES
) -> bytes:
    """A request's body as sent (Content-Length or chunked), within `limit` bytes."""
    lowered = {k.lower(): v for k, v in headers.items()}
    encoding = lowered.get("transfer-encoding")
    if encoding is not None and encoding.strip().lower() != "chunked":
        raise RefusedBody(400, f"unsupported Transfer-Encoding {encoding!r}")
    if encoding is not None:
        return _read_chunks(rfile, limit)
    length = lowered.get("content-length", "0").strip() or "0"
    if not (length.isascii() and length.isdigit()):
        raise RefusedBody(400, f"invalid Content-Length {length!r}")
    if int(length) > limit:
        raise RefusedBody(413, "request body too large")
    body = rfile.read(int(length))
    if len(body) != int(length):
        raise RefusedBody(400, "the body is shorter than its Content-Length")
    return body


def _read_chunks(rfile: io.BufferedIOBase, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        line = rfile.readline(_MAX_LINE)
        if not _CHUNK_SIZE.fullmatch(line):  # a sign, an extension, junk, too long
            raise RefusedBody(400, f"invalid chunk size line {line[:40]!r}")
        size = int(line, 16)
        total += size
        if total > limit:
            raise RefusedBody(413, "request body too large")
        if size == 0:
            break
        chunk = rfile.read(size)
        if len(chunk) != size or rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n"):
            raise RefusedBody(400, "a chunk is not the size its line says")
        chunks.append(chunk)
    for _ in range(_MAX_TRAILERS):
        line = rfile.readline(_MAX_LINE)
        if line in (b"\r\n", b"\n"):
            return b"".join(chunks)
        if not line.endswith(b"\n"):
            break  # the connection ended, or a line too long
    raise RefusedBody(400, "the chunked body has no end")


def read_decoded_body(
    headers: Mapping[str, str], rfile: io.BufferedIOBase, *, limit: int = MAX_REQUEST_BYTES
) -> bytes:
    """`read_body`, then inflated as its `Content-Encoding` says (gzip or none),
    never past `limit` bytes however small the compressed body."""
    raw = read_body(headers, rfile, limit=limit)
    lowered = {k.lower(): v for k, v in headers.items()}
    coding = lowered.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return raw
    if coding != "gzip":
        raise RefusedBody(400, f"unsupported Content-Encoding {coding!r}")
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    out: list[bytes] = []
    total = 0
    pending = raw
    try:
        while not inflater.eof:
            piece = inflater.decompress(pending, _INFLATE_STEP)  # at most a step at a time
            pending = inflater.unconsumed_tail
            if not piece and not pending:
                break
            total += len(piece)
            if total > limit:
                raise RefusedBody(413, "request body too large once inflated")
            out.append(piece)
        if not inflater.eof:
            raise RefusedBody(400, "the gzip body is cut short")
    except zlib.error as exc:
        raise RefusedBody(400, f"the body is not gzip: {exc}") from None
    return b"".join(out)


class LocalHTTPService(ABC):
    thread_name = "local-http"  # a subclass names its thread

    def __init__(self, port: int = 0) -> None:
        self._bind_port = port  # 0: a free one
        self._stopping = threading.Event()  # set while stopping: handlers give up
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections_lock = threading.Lock()
        self._connections: set[socket.socket] = set()  # open client connections
        self._bodies = threading.BoundedSemaphore(MAX_BODIES_IN_FLIGHT)

    @contextlib.contextmanager
    def body_slot(self) -> Iterator[None]:
        """A turn to read and parse one request body (`MAX_BODIES_IN_FLIGHT` at once);
        `RefusedBody(503)` when none frees up within `SLOT_WAIT_S` or the service stops.
        What the servers hold per body is bounded; this bounds how many at once."""
        if not self._bodies.acquire(timeout=SLOT_WAIT_S):
            raise RefusedBody(503, "too many request bodies at once; retry")
        try:
            if self._stopping.is_set():
                raise RefusedBody(503, "the server is stopping")
            yield
        finally:
            self._bodies.release()

    @abstractmethod
    def _make_server(self, address: tuple[str, int]) -> ThreadingHTTPServer:
        """The server, with this service's request handler."""

    def _before_start(self) -> None:  # noqa: B027 - a hook most services leave empty
        """What must be ready before the first request (e.g. a recording file)."""

    def _after_shutdown(self, httpd: ThreadingHTTPServer) -> None:
        """After the serving thread ended: end what is in flight, close the server."""
        httpd.server_close()

    def start(self: _Self) -> _Self:
        if self._httpd is not None:
            raise RuntimeError(f"{self.thread_name} already started")
        self._before_start()
        self._stopping.clear()
        self._httpd = self._make_server(("127.0.0.1", self._bind_port))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{self.thread_name}:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._stopping.set()
        httpd.shutdown()
        thread.join()
        self._after_shutdown(httpd)
        self._httpd = None
        self._thread = None

    def __enter__(self: _Self) -> _Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def open_connections(self) -> list[socket.socket]:
        """The client connections open now (`_after_shutdown` ends them)."""
        with self._connections_lock:
            return list(self._connections)

    def _track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError(f"{self.thread_name} not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class LocalServer(ThreadingHTTPServer):
    """The server of a `LocalHTTPService`: its handlers reach the service through it."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        service: LocalHTTPService,
    ) -> None:
        self.service = service
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up is normal (timeouts, killed CLIs); anything else is a bug.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def caller_of(headers: Mapping[str, str], prefix: str) -> str:
    """The caller's tag in a request's API key (`x-api-key`, or a bearer token):
    what follows `prefix` (`stub-model-key.c3`: `c3`); '' for none. A service
    that tells its callers apart hands each an API key `prefix + tag`."""
    lowered = {key.lower(): value for key, value in headers.items()}
    key = lowered.get("x-api-key") or lowered.get("authorization", "").removeprefix("Bearer ")
    return key.removeprefix(prefix) if key.startswith(prefix) else ""


class LocalHandler(BaseHTTPRequestHandler):
    """A request handler whose connection its service can end when it stops."""

    server: LocalServer

    protocol_version = "HTTP/1.1"  # keep-alive, as the CLI expects
    # Each SSE event is its own small write; with Nagle on, the client's delayed
    # ACK stalls every turn by ~40 ms.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.server.service._track(self.connection, open_=True)

    def finish(self) -> None:
        self.server.service._track(self.connection, open_=False)
        with contextlib.suppress(OSError):  # the peer went away; nothing to flush to
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # each service records its exchanges its own way

    def respond(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A whole reply: its status, `Content-Type`, `Content-Length`, `headers`, and
        the body (but to a `HEAD`, which asks for the headers alone)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def start_stream(
        self, status: int, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        """The headers of a reply sent as it is made (an event stream): its body
        follows in `chunk`s, the last one empty."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        """One chunk of a chunked body, sent at once (`b""` ends the body)."""
        self.send_now(b"%x\r\n%s\r\n" % (len(data), data))

    def send_now(self, data: bytes) -> None:
        """`data` on the wire at once: a piece of a body as it is made."""
        self.wfile.write(data)
        self.wfile.flush()

    def hang_up(self) -> None:
        """Drop the connection now, as a server that fails mid-answer would."""
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)
