"""An HTTP server on 127.0.0.1 served by a daemon thread: the life cycle the stub
model and the forwarding proxy share.

A subclass builds its server (`_make_server`) and says what stopping must
undo besides the server itself (`_after_shutdown`: open connections, handler
threads, files). `stop()` is idempotent; `with Service(...) as s:` starts and
stops it.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeVar

_Self = TypeVar("_Self", bound="LocalHTTPService")


class LocalHTTPService(ABC):
    thread_name = "local-http"  # a subclass names its thread

    def __init__(self, port: int = 0) -> None:
        self._bind_port = port  # 0: a free one
        self._stopping = threading.Event()  # set while stopping: handlers give up
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections_lock = threading.Lock()
        self._connections: set[socket.socket] = set()  # open client connections

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
