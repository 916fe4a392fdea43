"""The local model servers read a request body within limits (`local_http.read_body`).

The stub, the replay server and the forwarding proxy run as threads of ci-evals,
outside the sandbox's memory limit, and whatever the agent runs can reach them.
Each is started in a child process here and sent real HTTP requests: a gzip
bomb, a Content-Length past the limit, a chunked body past it, a body within
the limit that would parse into millions of objects. Each is refused with a
413 at once, and the child's peak memory barely moves; past a few bodies at
once, one more is answered 503.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.endpoints.local_http import MAX_BODIES_IN_FLIGHT, MAX_REQUEST_BYTES

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


# Within every byte limit, and all but empty: about 10 million dicts once parsed (1.4 GB).
MANY = b"[" + b"{}," * (MAX_REQUEST_BYTES // 3 - 2) + b"{}]"


@pytest.mark.parametrize("name", ["stub", "replay", "proxy"])
def test_a_body_of_millions_of_values_is_refused_before_it_is_parsed(
    servers: Servers, name: str
) -> None:
    port, head = servers.ports[name], servers.headers(name)
    before = servers.peak_kib()
    # gzipped to the stub and the replay (65 KB sent); the proxy forwards bodies as sent
    body = MANY if name == "proxy" else zlib.compress(MANY, 9, wbits=31)
    coding = b"" if name == "proxy" else b"Content-Encoding: gzip\r\n"
    framed = head + coding + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    answer = exchange(port, framed, body)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"more than 500000 values" in answer
    grown_mib = (servers.peak_kib() - before) / 1024
    assert grown_mib < 3 * MAX_REQUEST_BYTES / (1 << 20), grown_mib  # the bytes, not 1.4 GB


@pytest.mark.slow
def test_past_a_few_bodies_at_once_one_more_is_answered_503(servers: Servers) -> None:
    """Bodies still arriving hold their server's turns; one more waits, then gets a 503
    (the CLI retries it), and the turns come back once they are done."""
    held: list[socket.socket] = []
    answers: dict[str, bytes] = {}
    try:
        for name in ("stub", "replay", "proxy"):
            head = servers.headers(name) + b"Content-Length: 100\r\n\r\n{"
            for _ in range(MAX_BODIES_IN_FLIGHT):
                sock = socket.create_connection(("127.0.0.1", servers.ports[name]), timeout=30)
                sock.sendall(head)  # one byte of a hundred: the body is being read
                held.append(sock)

        time.sleep(1)  # each server's handlers take their turns as their bodies start

        def one_more(name: str) -> None:
            request = servers.headers(name) + b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"
            answers[name] = exchange(servers.ports[name], request)

        threads = [
            threading.Thread(target=one_more, args=(n,)) for n in servers.ports if n != "token"
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for sock in held:
            sock.close()
    for name in ("stub", "replay", "proxy"):
        assert answers[name].startswith(b"HTTP/1.1 503 "), (name, answers[name][:200])
        assert b"too many request bodies at once" in answers[name]
    body = json.dumps({"model": "m", "messages": []}).encode()
    request = (
        servers.headers("replay")
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    )
    assert exchange(servers.ports["replay"], request, body).startswith(b"HTTP/1.1 200 ")


LOAD = """
import resource, sys
from pathlib import Path
from ci_evals.endpoints.replay.recording import load_recording
from ci_evals.errors import UserError
try:
    load_recording(Path(sys.argv[1]))
except UserError as exc:
    print(exc.message)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_a_recording_of_millions_of_values_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """Three lines within the line limit whose request bodies parse into millions of
    dicts (1.7 GB and a minute before): refused at the first, in one line."""
    from ci_evals.endpoints.replay.recording import MAX_LINE_BYTES  # noqa: PLC0415

    values = b"{}," * (MAX_LINE_BYTES // 3 - 100)
    line = b'{"path": "/v1/messages", "status": 200, "response_headers": {}, ' \
        b'"response_body": "", "request_body": {"x": [' + values + b'{}]}}\n'  # fmt: skip
    (tmp_path / "model-exchanges.jsonl").write_bytes(line * 3)
    proc = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    message, peak_kib = proc.stdout.splitlines()
    assert message == (
        "not a recorded exchange: more than 500000 JSON values, which no request holds"
    )
    assert int(peak_kib) / 1024 < 400, peak_kib  # the file's bytes and the interpreter
