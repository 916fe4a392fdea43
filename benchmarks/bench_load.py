"""Benchmark a run's load: N scenarios x 5 stages on the stub model, N from 4 up to 400.

    .venv/bin/python benchmarks/bench_load.py [--max 10] [--jobs 1,4]

The demo suite of the runner tests (tests/run_helpers.py: five stages, each a
plugin slash command whose stub answer writes one file, fixtures for every
stage; the example's shape without its reviewers), with N scenarios, run from
stage 1 by `ci-evals run` as a subprocess with the real Claude Code CLI under
the default sandbox (bubblewrap), for N in 4, 10, 50, 100, 400 up to `--max`
(the default, 10, takes a few minutes; 100 about an hour on 2 busy cores).
Per N and per `--jobs`: the wall time per stage run (wall / stage runs), the
CPU time per stage run (user + system of ci-evals and every process it
waited for: on a shared machine the steadier measure, since the wall time
follows the machine's load), the peak resident memory of the whole process
tree (ci-evals and every CLI it started, sampled from /proc every 50 ms), and
that every stage passed; then
`ci-evals report RUN_DIR` and `report RUN_DIR --html DIR` (median of 3). The
ratios are against the smallest N: time per stage and peak memory should stay
flat (~1), the reports grow linearly (their time per scenario ~1).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.processes import ci_evals, watched  # noqa: E402
from ci_evals.results.model import read_results  # noqa: E402
from tests.run_helpers import make_suite  # noqa: E402

SIZES = (4, 10, 50, 100, 400)
STAGES = 5


@dataclass
class Measured:
    scenarios: int
    jobs: int
    stage_runs: int
    per_stage_s: float
    cpu_per_stage_s: float
    peak_mib: float
    report_s: float
    html_s: float


def timed(*args: str) -> float:
    """The wall time of one `ci-evals ARGS` that must exit 0 or 1 (the verdict)."""
    started = time.perf_counter()
    proc = ci_evals(*args)
    _, err = proc.communicate()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"ci-evals {' '.join(args)} exited {proc.returncode}: {err.decode()}")
    return time.perf_counter() - started


def measure(base: Path, scenarios: int, jobs: int) -> Measured:
    names = tuple(f"s{i:03d}" for i in range(scenarios))
    suite, stub = make_suite(base / "suite", scenarios=names)
    out = base / "run"
    run = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}",
        "--jobs", str(jobs), "--out", str(out),
    )  # fmt: skip
    cpu_before = _children_cpu()
    wall, (peak,) = watched([run])
    cpu = _children_cpu() - cpu_before
    result = read_results(out)
    stages = [stage for scenario in result.scenarios for stage in scenario.stages]
    not_passed = [s.status for s in stages if s.status != "completed"]
    if len(stages) != scenarios * STAGES or not_passed:
        raise SystemExit(f"N={scenarios} --jobs {jobs}: not every stage completed: {not_passed}")
    med = statistics.median
    report = med(timed("report", str(out)) for _ in range(3))
    html = med(timed("report", str(out), "--html", str(base / f"site{i}")) for i in range(3))
    runs = len(stages)
    return Measured(scenarios, jobs, runs, wall / runs, cpu / runs, peak, report, html)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int, default=10, help="the largest N: 4, 10, 50, 100, 400")
    parser.add_argument("--min", type=int, default=4, help="the smallest N (the ratios' base)")
    parser.add_argument("--jobs", default="1,4")
    args = parser.parse_args()
    sizes = [n for n in SIZES if args.min <= n <= args.max]
    jobs_list = [int(j) for j in args.jobs.split(",")]
    print(
        f"N scenarios x {STAGES} stages, stub model, bwrap; machine: {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    rows: list[Measured] = []
    for scenarios in sizes:
        for jobs in jobs_list:
            with tempfile.TemporaryDirectory(prefix="bench-load-") as temp:
                row = measure(Path(temp), scenarios, jobs)
            rows.append(row)
            first = next(r for r in rows if r.jobs == jobs)
            ratio = row.scenarios / first.scenarios
            print(
                f"N={scenarios:3d} --jobs {jobs}: {row.stage_runs:4d} stage runs, "
                f"{row.per_stage_s:.2f} s/stage ({row.per_stage_s / first.per_stage_s:.2f}x), "
                f"CPU {row.cpu_per_stage_s:.2f} s/stage "
                f"({row.cpu_per_stage_s / first.cpu_per_stage_s:.2f}x), "
                f"peak tree RSS {row.peak_mib:5.0f} MiB ({row.peak_mib / first.peak_mib:.2f}x), "
                f"report {row.report_s:.2f} s, --html {row.html_s:.2f} s "
                f"(per scenario {row.report_s / first.report_s / ratio:.2f}x, "
                f"{row.html_s / first.html_s / ratio:.2f}x); load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    print(
        f"ratios against N={sizes[0]} at the same --jobs: per stage and peak memory flat = 1.00x, "
        "reports linear = 1.00x per scenario"
    )


if __name__ == "__main__":
    main()
