"""Benchmark the runner on the stub model (real CLI): harness overhead and --jobs speed-up.

    .venv/bin/python benchmarks/bench_runner.py [--repeats 5]

1. Harness overhead of one stub stage beyond the CLI's own `duration_ms`:
   - baseline: a plain `claude_agent_sdk.query()` (the SDK's own transport),
     wall clock minus `duration_ms` — the CLI's start-up and the SDK's share;
   - ci-evals: a whole `Runner.run()` of one stage (workspace, snapshots,
     isolated spawn, trajectory, process sweep, results.json), wall clock minus
     `duration_ms`. The difference between the two is what ci-evals adds.
2. `ci-evals run --jobs 4` vs `--jobs 1` on 4 stub scenarios (stages 4-5),
   as subprocesses: wall-clock speed-up, and peak resident memory of the whole
   process tree (ci-evals + every CLI), sampled from /proc every 50 ms.

Prints medians; the machine's load matters, so compare numbers from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query  # noqa: E402

from ci_evals.agents.environment import agent_environment  # noqa: E402
from ci_evals.agents.registry import get_agent  # noqa: E402
from ci_evals.endpoints.stub_model import StubServer, load_script  # noqa: E402
from ci_evals.results.model import read_results  # noqa: E402
from ci_evals.run.runner import Runner, RunPlan  # noqa: E402
from ci_evals.suite.load import load_suite  # noqa: E402
from tests.run_helpers import make_suite  # noqa: E402


def baseline_sdk_stage(stub: Path, plugin: Path, work: Path) -> tuple[float, float]:
    """Plain SDK query of stage 5: (wall seconds, CLI duration_ms / 1000)."""

    async def go() -> tuple[float, float]:
        with StubServer(load_script(stub)) as server:
            env = agent_environment(
                os.environ, private_root=work / "agent", endpoint=server.cli_env()
            )
            (work / "ws").mkdir(parents=True, exist_ok=True)
            options = ClaudeAgentOptions(
                cwd=str(work / "ws"),
                plugins=[{"type": "local", "path": str(plugin)}],
                permission_mode="bypassPermissions",
                max_turns=10,
                env=env,
            )
            started = time.perf_counter()
            duration = 0.0
            async for message in query(prompt="/demo:s5 Acme", options=options):
                if isinstance(message, ResultMessage):
                    duration += message.duration_ms / 1000
            return time.perf_counter() - started, duration

    return asyncio.run(go())


def runner_stage(suite_file: Path, stub: Path, run_dir: Path) -> tuple[float, float]:
    """A whole Runner.run() of stage 5: (wall seconds, CLI duration_ms / 1000)."""
    suite = load_suite(suite_file)
    with StubServer(load_script(stub)) as server:
        plan = RunPlan(
            suite=suite,
            from_stage=suite.stage(5),
            scenarios=suite.scenarios,
            run_dir=run_dir,
            run_id=run_dir.name,
            model=None,
            environ=dict(os.environ),
            endpoint=server.cli_env(),
        )
        agent = get_agent("claude")
        started = time.perf_counter()
        asyncio.run(Runner(plan, agent).run())
        wall = time.perf_counter() - started
    records = (run_dir / "acme" / "5-s5" / "trajectory.jsonl").read_text().splitlines()
    duration = sum(
        json.loads(line)["duration_ms"] / 1000
        for line in records
        if json.loads(line)["type"] == "ResultMessage"
    )
    return wall, duration


def tree_rss_mib(marker: str, root_pid: int) -> float:
    """Resident memory of `root_pid` plus every process whose environ/cmdline has `marker`."""
    total = 0
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            blob = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
            if int(entry.name) != root_pid and needle not in blob:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def run_jobs(suite_file: Path, stub: Path, out: Path, jobs: int) -> tuple[float, float]:
    """`ci-evals run --jobs N` as a subprocess: (wall seconds, peak tree RSS MiB)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ci_evals", "run", "--suite", str(suite_file),
         "--model", f"stub:{stub}", "--from-stage", "4", "--jobs", str(jobs), "--out", str(out)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_mib(str(out), proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = proc.wait()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    if code != 0:
        raise SystemExit(f"ci-evals run --jobs {jobs} exited {code}")
    result = read_results(out)
    assert all(s.status == "completed" for sc in result.scenarios for s in sc.stages)
    return wall, peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as temp:
        base = Path(temp)
        suite_file, stub = make_suite(base / "one")
        plugin = base / "one" / "plugin"

        sdk_over, ours_over, sdk_walls, ours_walls = [], [], [], []
        for i in range(args.repeats):
            # Alternate the order, so a change in the machine's load hits both alike.
            order = ("sdk", "ours") if i % 2 == 0 else ("ours", "sdk")
            for which in order:
                if which == "sdk":
                    wall, duration = baseline_sdk_stage(stub, plugin, base / f"sdk-{i}")
                    sdk_walls.append(wall)
                    sdk_over.append(wall - duration)
                else:
                    wall, duration = runner_stage(suite_file, stub, base / f"run-{i}")
                    ours_walls.append(wall)
                    ours_over.append(wall - duration)
        med = statistics.median
        print(f"one stub stage, median of {args.repeats}:")
        for name, walls_, over in (
            ("plain SDK query", sdk_walls, sdk_over),
            ("ci-evals Runner", ours_walls, ours_over),
        ):
            print(f"  {name}: wall {med(walls_):.3f} s, beyond duration_ms {med(over):.3f} s")
        paired = [ours - sdk for ours, sdk in zip(ours_over, sdk_over, strict=True)]
        print(f"  added by ci-evals, median of paired differences: {med(paired):+.3f} s")

        suite4, stub4 = make_suite(base / "four", scenarios=("a1", "b2", "c3", "d4"))
        walls: dict[int, list[float]] = {1: [], 4: []}
        peaks: dict[int, list[float]] = {1: [], 4: []}
        for i in range(max(1, args.repeats // 2)):
            for jobs in (1, 4):
                wall, peak = run_jobs(suite4, stub4, base / f"jobs{jobs}-{i}", jobs)
                walls[jobs].append(wall)
                peaks[jobs].append(peak)
        print("4 scenarios x stages 4-5 (8 stub stages), ci-evals run as a subprocess:")
        for jobs in (1, 4):
            wall, peak = med(walls[jobs]), max(peaks[jobs])
            print(f"  --jobs {jobs}: wall {wall:.2f} s, peak RSS {peak:.0f} MiB")
        print(f"  speed-up --jobs 4 over --jobs 1: {med(walls[1]) / med(walls[4]):.2f}x")
        print(f"  (machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
