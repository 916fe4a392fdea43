"""A Docker socket proxy for fault tests: a Unix socket between ci-evals and the real
engine (`DOCKER_HOST=unix://<proxy.path>`) that passes every byte through, or:

- `drop()`: the engine is gone — every open connection is cut and every new one
  closed as soon as it is accepted (what a stopped or restarting dockerd does);
- `blip(n)`: open connections cut, the next `n` dropped, then all pass again
  (an engine restart: it comes back);
- `stall()`: connections stay open and are accepted, but no byte moves either
  way until `resume()` (a dockerd hung on a lock).

The fault is only at this boundary: ci-evals talks to the real engine through it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
from pathlib import Path

ENGINE = "/var/run/docker.sock"


class DockerProxy:
    def __init__(self, folder: Path, engine: str = ENGINE) -> None:
        self.path = folder / "docker.sock"
        self.engine = engine
        self._mode = "pass"
        self._drops_left = 0
        self._lock = threading.Lock()
        self._moved = threading.Condition(self._lock)
        self._open: set[socket.socket] = set()
        self.accepted = 0  # connections accepted (dropped ones included)
        self.dropped = 0
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(64)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def env(self) -> dict[str, str]:
        """The environment of a ci-evals process that talks to the engine through us."""
        return {**os.environ, "DOCKER_HOST": self.url}

    # -- faults ------------------------------------------------------------------------

    def drop(self) -> None:
        self._set("drop", cut=True)

    def blip(self, connections: int) -> None:
        self._set("blip", cut=True, drops=connections)

    def stall(self) -> None:
        self._set("stall")

    def resume(self) -> None:
        self._set("pass")

    def _set(self, mode: str, *, cut: bool = False, drops: int = 0) -> None:
        with self._lock:
            self._mode, self._drops_left = mode, drops
            if cut:
                for sock in list(self._open):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
            self._moved.notify_all()

    # -- relaying ----------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                drop = self._mode == "drop" or (self._mode == "blip" and self._drops_left > 0)
                if self._mode == "blip" and self._drops_left > 0:
                    self._drops_left -= 1
                    if self._drops_left == 0:
                        self._mode = "pass"
                if drop:
                    self.dropped += 1
            if drop:
                client.close()
                continue
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.engine)
        except OSError:
            client.close()
            return
        with self._lock:
            self._open |= {client, upstream}
        peers = {client: upstream, upstream: client}
        try:
            with selectors.DefaultSelector() as selector:
                for sock in peers:
                    selector.register(sock, selectors.EVENT_READ)
                while peers and selector.get_map():
                    for key, _ in selector.select(timeout=0.5):
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        try:
                            data = sock.recv(65536)
                        except OSError:
                            data = b""
                        if not self._wait_to_move():
                            return
                        if not data:  # half-close: pass the EOF on, keep the other way
                            selector.unregister(sock)
                            with contextlib.suppress(OSError):
                                peers[sock].shutdown(socket.SHUT_WR)
                            continue
                        try:
                            peers[sock].sendall(data)
                        except OSError:
                            return
        finally:
            with self._lock:
                self._open -= {client, upstream}
            client.close()
            upstream.close()

    def _wait_to_move(self) -> bool:
        """Hold the bytes while stalled; False once the connection is to be cut."""
        with self._lock:
            while self._mode == "stall" and not self._closed:
                self._moved.wait(0.5)
            return not self._closed and self._mode != "drop"

    def close(self) -> None:
        self._closed = True
        self._set("pass", cut=True)
        with contextlib.suppress(OSError):
            self._listener.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def __enter__(self) -> DockerProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
