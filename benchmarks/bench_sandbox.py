"""The start-up cost of a bwrap sandbox vs a bare spawn, on the same machine.

- bare: `subprocess.run(["true"])`;
- bwrap: `BwrapSandbox.exec(["true"])` (env -i, bwrap with every namespace,
  the read-only system and /etc, one writable folder, capture of stdout and
  stderr);
- bwrap + relay: the same with a model endpoint, so the relay (a Python
  interpreter inside the sandbox, listening on 127.0.0.1:PORT) starts first;
- bwrap + relay + one request: the command is the sandbox's Python making one
  HTTP request through the relay to a local server on the host, vs the same
  Python making it directly on the host.

    .venv/bin/python benchmarks/bench_sandbox.py [--repeats 30]

Each figure is the median of REPEATS runs after one untimed warm-up; the
ratio is to the bare spawn (or, for the request, to the same request on the host).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import median_seconds
from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import BwrapSandbox, available

ENV = {"PATH": "/usr/bin:/bin"}
REQUEST = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10).read()"


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def _checked(box: BwrapSandbox, argv: list[str], cwd: Path) -> None:
    result = box.exec(argv, cwd=cwd, env=ENV, timeout=30)
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed in the sandbox: {result.stderr.decode()[-500:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    reason = available()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 1
    python = os.path.realpath(sys.executable)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = int(server.server_address[1])
    url = f"http://127.0.0.1:{port}/"

    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        mounts = SandboxSpec(writable=(ws,), readonly=())

        def timed(action: object) -> float:
            action()  # type: ignore[operator]  # warm-up
            return median_seconds(action, args.repeats)  # type: ignore[arg-type]

        bare = timed(lambda: subprocess.run(["true"], check=True))
        with BwrapSandbox(mounts) as box:
            rows.append(("bwrap -- true", timed(lambda: _checked(box, ["true"], ws)), bare))
        with BwrapSandbox(mounts, endpoint=("127.0.0.1", port)) as box:
            rows.append(("bwrap + relay -- true", timed(lambda: _checked(box, ["true"], ws)), bare))
            direct = timed(lambda: subprocess.run([python, "-I", "-c", REQUEST, url], check=True))
            inner = str(box.inner_url) + "/"
            through = timed(lambda: _checked(box, [python, "-I", "-c", REQUEST, inner], ws))
            rows.append(("python + 1 request, via relay", through, direct))
    server.shutdown()
    server.server_close()

    print(f"median of {args.repeats} runs; bare spawn of `true`: {bare * 1000:.1f} ms")
    for name, ours, base in rows:
        print(
            f"{name:32s} {ours * 1000:7.1f} ms  vs {base * 1000:6.1f} ms  "
            f"= {ours / base:5.1f}x  (+{(ours - base) * 1000:.1f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
