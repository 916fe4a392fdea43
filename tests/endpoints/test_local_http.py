"""The local model servers read a request body within limits (`local_http.read_body`).

The stub, the replay server and the forwarding proxy run as threads of ci-evals,
outside the sandbox's memory limit, and whatever the agent runs can reach them.
Each is started in a child process here and sent real HTTP requests: a gzip
bomb, a Content-Length past the limit, a chunked body past it. Each is refused
with a 413 at once, and the child's peak memory barely moves.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.endpoints.local_http import MAX_REQUEST_BYTES

# Starts the three servers, prints their ports (and the proxy's token), then
# answers each line on stdin with its peak RSS in KiB.
CHILD = """
import json, resource, sys
from pathlib import Path
from ci_evals.endpoints.proxy import ForwardingProxy, ProxySettings
from ci_evals.endpoints.replay.recording import load_recording
from ci_evals.endpoints.replay.server import ReplayServer
from ci_evals.endpoints.stub_model import StubServer, loads_script

folder = Path(sys.argv[1])
stub = StubServer(loads_script("rules:\\n  - name: r\\n    turns: [{text: hi}]\\n")).start()
replay = ReplayServer(load_recording(folder)).start()
proxy = ForwardingProxy(ProxySettings(upstream="http://127.0.0.1:9", api_key="k")).start()
print(json.dumps({"stub": stub.port, "replay": replay.port, "proxy": proxy.port,
                  "token": proxy.token}), flush=True)
for _ in sys.stdin:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
"""

EXCHANGE = {
    "path": "/v1/messages",
    "request_body": {"model": "m", "messages": []},
    "status": 200,
    "response_headers": {"content-type": "application/json"},
    "response_body": "{}",
}


class Servers:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self.ports = json.loads(proc.stdout.readline())

    def peak_kib(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("rss\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def headers(self, name: str) -> bytes:
        key = self.ports["token"] if name == "proxy" else "k"
        return f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\n".encode()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    folder: Path = tmp_path_factory.mktemp("recording")
    (folder / "model-exchanges.jsonl").write_text(json.dumps(EXCHANGE) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield Servers(proc)
    finally:
        proc.kill()  # the child this fixture started, by its own handle
        proc.wait()


def exchange(port: int, request: bytes, body: bytes = b"") -> bytes:
    """Send `request` (head and blank line) and what we can of `body`; the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(request)
        with contextlib.suppress(OSError):  # refused before the body was read: closed
            sock.sendall(body)
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


def gzip_bomb(inflated: int) -> bytes:
    """`inflated` zero bytes, gzipped (about a thousandth of the size)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(inflated >> 20)) + packer.flush()


BOMB = 8 * MAX_REQUEST_BYTES  # 512 MiB once inflated


@pytest.mark.parametrize("name", ["stub", "replay", "proxy"])
def test_a_body_past_the_limit_is_refused_at_once_in_bounded_memory(
    servers: Servers, name: str
) -> None:
    port, head = servers.ports[name], servers.headers(name)
    before = servers.peak_kib()

    too_long = head + f"Content-Length: {MAX_REQUEST_BYTES + 1}\r\n\r\n".encode()
    answer = exchange(port, too_long)  # nothing follows: a reader that waits for it hangs
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]

    chunked = head + b"Transfer-Encoding: chunked\r\n\r\n"
    answer = exchange(port, chunked, b"%x\r\n" % (MAX_REQUEST_BYTES + 1))
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"too large" in answer

    if name != "proxy":  # the proxy forwards a body as sent; it never inflates one
        bomb = gzip_bomb(BOMB)
        framed = f"Content-Length: {len(bomb)}\r\nContent-Encoding: gzip\r\n\r\n".encode()
        answer = exchange(port, head + framed, bomb)
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"too large once inflated" in answer
    grown_mib = (servers.peak_kib() - before) / 1024
    assert grown_mib < 1.5 * MAX_REQUEST_BYTES / (1 << 20), grown_mib


@pytest.mark.parametrize("name", ["stub", "replay"])
def test_a_gzipped_body_within_the_limit_is_still_read(servers: Servers, name: str) -> None:
    body = zlib.compress(json.dumps({"model": "m", "messages": []}).encode(), wbits=31)
    head = servers.headers(name) + f"Content-Length: {len(body)}\r\n".encode()
    answer = exchange(
        servers.ports[name], head + b"Content-Encoding: gzip\r\nConnection: close\r\n\r\n", body
    )
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
