"""`ci-evals mcp-check` of one server: one shared process plus a fresh one per risky sub-test.

The target (issues 11, 21): at most 2 s on the host for a stdlib server, 3 s for
one built on the `mcp` package. Measured, as medians of REPEATS runs after one
untimed warm-up, for two servers:

- `sdk`: tests/data/mcp/sdk_server.py, built with the official `mcp` package
  (its interpreter start and imports cost ~0.5 s of CPU per process);
- `stdlib`: tests/data/mcp/stdlib_server.py, the standard library only.

and for each:

- `one session`: the baseline, one server process started, `initialize`d
  (or `server/discover`ed), one `tools/list`, closed: the least a single
  sub-test can cost;
- `fresh per sub-test`: every sub-test on a process of its own, all at once
  (how mcp-check ran before issue 21: the same sub-test functions);
- `check, serial`: `run_check` with one fresh process at a time beside the shared one;
- `check`: `run_check` as mcp-check runs it (the shared process and the fresh
  ones at once);
- `mcp-check`: the whole command as a subprocess (interpreter, imports, table);
- `mcp-check, bwrap`: the same with `--isolation bwrap`.

    .venv/bin/python benchmarks/bench_mcp_check.py [--repeats 5] [--protocol REV]

Ratios are to `one session` of the same server, on the same machine. On a
machine with few cores the sdk server's figure is bounded below by its start-up
CPU: N sessions x ~0.5 s / cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import median_seconds
from ci_evals.mcp import subtests
from ci_evals.mcp.check import run_check
from ci_evals.mcp.session import Session
from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import available
from ci_evals.sandbox.local import LocalSandbox

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mcp"
SERVERS = {"sdk": DATA / "sdk_server.py", "stdlib": DATA / "stdlib_server.py"}
ENV = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
CI_EVALS = Path(sys.executable).with_name("ci-evals")


def one_session(box: LocalSandbox, argv: list[str], options: subtests.Options) -> None:
    with Session(box.spawn(argv, cwd=DATA, env=ENV)) as session:
        subtests.start(session, options)
        subtests.call(session, options, "tools/list", None)


def fresh_per_sub_test(box: LocalSandbox, argv: list[str], options: subtests.Options) -> None:
    tests = subtests.for_revision(options.revision)

    def one(test: subtests.SubTest) -> bool:
        with Session(box.spawn(argv, cwd=DATA, env=ENV)) as session:
            return test(session, options).passed

    with ThreadPoolExecutor(max_workers=len(tests)) as pool:
        list(pool.map(one, tests.values()))


def check(box: LocalSandbox, argv: list[str], options: subtests.Options, jobs: int) -> None:
    report = run_check(box, argv, cwd=DATA, env=ENV, options=options, jobs=jobs)
    assert report.required_passed, report.as_json()


def command(argv: list[str], revision: str, *extra: str) -> None:
    done = subprocess.run(
        [str(CI_EVALS), "mcp-check", "--protocol", revision, *extra, "--", *argv],
        cwd=DATA,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def measures(
    box: LocalSandbox,
    argv: list[str],
    options: subtests.Options,
    revision: str,
    count: int,
    *,
    bwrap: bool,
) -> dict[str, Callable[[], None]]:
    runs: dict[str, Callable[[], None]] = {
        "one session": lambda: one_session(box, argv, options),
        "fresh per sub-test": lambda: fresh_per_sub_test(box, argv, options),
        "check, serial": lambda: check(box, argv, options, jobs=1),
        "check": lambda: check(box, argv, options, jobs=count),
        "mcp-check": lambda: command(argv, revision),
    }
    if bwrap:
        runs["mcp-check, bwrap"] = lambda: command(argv, revision, "--isolation", "bwrap")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--protocol", default="2025-11-25")
    args = parser.parse_args()
    options = subtests.Options(revision=args.protocol)
    count = len(subtests.for_revision(args.protocol))
    processes = len(subtests.chains(args.protocol))
    print(
        f"MCP {args.protocol}: {count} sub-tests on {processes} processes; "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'server':<8} {'measure':<20} {'median s':>9} {'x one session':>14}")
    bwrap_why = available()
    box = LocalSandbox(SandboxSpec(writable=()))
    try:
        for name, path in SERVERS.items():
            argv = [sys.executable, str(path)]
            runs = measures(box, argv, options, args.protocol, count, bwrap=bwrap_why is None)
            base = None
            for label, action in runs.items():
                action()  # warm-up: bytecode, page cache
                seconds = median_seconds(action, args.repeats)
                base = base or seconds
                print(f"{name:<8} {label:<20} {seconds:>9.3f} {seconds / base:>14.1f}")
    finally:
        box.close()
    if bwrap_why is not None:
        print(f"(no bwrap figures: {bwrap_why})")


if __name__ == "__main__":
    main()
