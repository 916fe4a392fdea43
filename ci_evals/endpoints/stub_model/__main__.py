"""Serve a stub script alone: `python -m ci_evals.endpoints.stub_model SCRIPT [--port N]`.

Prints the URL (and the environment to point the CLI at it), then one line per
request, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from ci_evals.endpoints.stub_model.script import load_script
from ci_evals.endpoints.stub_model.server import RequestRecord, StubServer
from ci_evals.errors import error_handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ci_evals.endpoints.stub_model",
        description="Serve a stub-model script as a local Anthropic Messages API.",
    )
    parser.add_argument("script", type=Path, help="the stub script (YAML)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: free)")
    args = parser.parse_args(argv)
    with error_handler("stub-model") as code:
        script = load_script(args.script)

        def log(record: RequestRecord) -> None:
            print(record.describe(), file=sys.stderr, flush=True)

        with StubServer(script, port=args.port, on_request=log) as server:
            # The environment first: whoever reads the URL and then stops the
            # server (Ctrl-C) has had both.
            for key, value in server.cli_env().items():
                print(f"  {key}={value}", file=sys.stderr, flush=True)
            print(server.url, flush=True)
            threading.Event().wait()  # until Ctrl-C
    return code[0]


if __name__ == "__main__":
    sys.exit(main())
