"""A local HTTP forwarder that keeps every request body: what reached "the model".

The stub model records what each request matched, not its text; a test that
must show a file's content never reached the model (an agent-written
`CLAUDE.md`) puts this between the CLI and the stub. Faked only at the network:
the CLI talks HTTP to it, it talks HTTP to the stub.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class BodyCapture:
    """Forward to `127.0.0.1:upstream_port`; `bodies` holds each request body received."""

    def __init__(self, upstream_port: int) -> None:
        self.bodies: list[bytes] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                capture.bodies.append(body)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body or None, headers)
                    reply = upstream.getresponse()
                    data = reply.read()
                finally:
                    upstream.close()
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() not in _HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET = do_HEAD = _forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def text(self) -> str:
        """Every body received, decoded, one after the other."""
        return "\n".join(body.decode(errors="replace") for body in self.bodies)

    def __enter__(self) -> BodyCapture:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
