"""What the stub model costs per model turn, and its share of a real CLI stage.

1. Per request, over one keep-alive connection like the CLI's: a CLI-sized
   request (~42 KB of JSON: 12 tools, an environment block) answered with a
   text + Write turn by the stub (parse, match, template, stream SSE), vs a
   baseline stdlib server that reads the same body and writes pre-encoded
   bytes. Medians and the ratio.
2. The real bundled CLI running a two-turn Write stage against the stub:
   `duration_ms` (whole query, CLI side), `duration_api_ms` (time waiting for
   the model — here the stub), and our wall time including CLI start.

    .venv/bin/python benchmarks/bench_stub_model.py [--requests 300] [--queries 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.endpoints.stub_model.script import StubUsage
from ci_evals.endpoints.stub_model.sse import message_events
from tests.stub_helpers import run_query

SCRIPT = """
rules:
  - match: {command: bench:run}
    turns:
      - text: "Writing the plan for {args}"
        tools:
          - write: {path: plan/lab.md, content: "# Lab plan for {args}\\n"}
      - text: done
"""


def cli_sized_request() -> dict[str, Any]:
    """A request shaped and sized like the CLI's first turn (~42 KB)."""
    tool = {
        "name": "Tool",
        "description": "x" * 2500,
        "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
    env = "# Environment\n - Primary working directory: /work/space\n" + "y" * 9000
    prompt = (
        "<command-message>bench:run</command-message>\n<command-name>/bench:run</command-name>\n"
        "<command-args>Acme Corp</command-args>\n"
    )
    return {
        "model": "claude-opus-5-5",
        "system": [{"type": "text", "text": "You are a Claude agent."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": prompt + "Plan it."}]},
            {"role": "system", "content": [{"type": "text", "text": env}]},
        ],
        "tools": [dict(tool, name=f"Tool{i}") for i in range(12)],
        "stream": True,
        "max_tokens": 128000,
    }


def baseline_server(answer: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def median_request_seconds(port: int, payload: bytes, repeats: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        conn.request("POST", "/v1/messages?beta=true", body=payload)
        conn.getresponse().read()
        times.append(time.perf_counter() - start)
    conn.close()
    return statistics.median(times)


def bench_requests(repeats: int) -> None:
    payload = json.dumps(cli_sized_request()).encode()
    blocks = [
        {"type": "text", "text": "Writing the plan for Acme Corp"},
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "Write",
            "input": {"file_path": "/work/space/plan/lab.md", "content": "# Lab plan\n"},
        },
    ]
    answer = b"".join(message_events("msg_1", "m", blocks, "tool_use", StubUsage()))
    base = baseline_server(answer)
    with StubServer(loads_script(SCRIPT)) as stub:
        # Interleave the two, so load on the shared machine hits both alike.
        stub_times, base_times = [], []
        for _ in range(5):
            stub_times.append(median_request_seconds(stub.port, payload, repeats // 5))
            base_times.append(median_request_seconds(base.server_address[1], payload, repeats // 5))
    base.shutdown()
    base.server_close()
    stub_ms = statistics.median(stub_times) * 1000
    base_ms = statistics.median(base_times) * 1000
    print(f"request of {len(payload) / 1024:.0f} KB, {repeats} requests each, keep-alive:")
    print(f"  stub (match + template + SSE) median {stub_ms:.2f} ms")
    print(f"  baseline (fixed bytes)        median {base_ms:.2f} ms")
    print(f"  ratio {stub_ms / base_ms:.2f}x, stub's own work {stub_ms - base_ms:.2f} ms per turn")


def bench_cli(queries: int) -> None:
    script = loads_script(SCRIPT.replace("command: bench:run", "prompt_contains: plan it"))
    durations, api, wall = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-stub-") as tmp, StubServer(script) as stub:
        for i in range(queries):
            base = Path(tmp) / f"q{i}"
            (base / "ws").mkdir(parents=True)
            start = time.perf_counter()
            run = run_query(stub, "plan it", base / "ws", base)
            wall.append(time.perf_counter() - start)
            durations.append(run.result.duration_ms)
            api.append(run.result.duration_api_ms)
            assert (base / "ws" / "plan" / "lab.md").exists()
    print(f"real CLI, two-turn Write stage, {queries} queries (medians):")
    print(f"  wall (incl. CLI start, SDK) {statistics.median(wall) * 1000:.0f} ms")
    print(f"  duration_ms (CLI)           {statistics.median(durations):.0f} ms")
    print(f"  duration_api_ms (the stub)  {statistics.median(api):.0f} ms for 2 turns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--queries", type=int, default=5)
    args = parser.parse_args()
    bench_requests(args.requests)
    bench_cli(args.queries)


if __name__ == "__main__":
    main()
