"""Benchmark how much `results.json` rewriting a run costs, per number of scenarios.

    .venv/bin/python benchmarks/bench_results_writes.py [--sizes 10,50,100,400]

A run of N scenarios x 5 stages at 4 jobs, each stage 1.3 s (the stub's pace
at --jobs 4, issue 34): every stage start and end is an update of the run's
record. The baseline rewrites the whole file at each update, as the runner did
(its bytes are counted from the file's size at each update, not written: at
400 scenarios they are tens of GB); `ResultsWriter` writes at its bounded pace,
for real, into a temp folder, on a virtual clock. Prints per N the updates,
the writes and bytes of each, the ratio, and the writer's wall time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ci_evals.results.model import dump_results  # noqa: E402
from ci_evals.results.writer import ResultsWriter  # noqa: E402
from tests.results.test_writer import Clock, run_of  # noqa: E402

STAGE_S = 1.3 / 4  # a stage's share of the wall clock at --jobs 4


def measure(scenarios: int) -> None:
    result = run_of(scenarios)
    size = len(dump_results(result))
    updates = scenarios * 5 * 2
    # The baseline's file grows from a fraction of its size to all of it: its
    # average is close to the final size (the records are there from the start,
    # only their fields fill in), so the bytes are updates x size.
    baseline_bytes = updates * size
    clock = Clock()
    with tempfile.TemporaryDirectory() as folder:
        writer = ResultsWriter(Path(folder), clock)
        began = time.perf_counter()
        for scenario in result.scenarios:
            for stage in scenario.stages:
                for status in ("running", "completed"):
                    stage.status = status  # type: ignore[assignment]
                    clock.now += STAGE_S / 2
                    writer.write(result)
                    writer.flush_due(result)
        writer.write(result, now=True)
        wall = time.perf_counter() - began
    print(
        f"N={scenarios:4d}  file {size / 1e6:7.2f} MB  run {clock.now / 60:6.1f} min  "
        f"updates {updates:5d}  baseline {updates:5d} writes {baseline_bytes / 1e9:8.2f} GB  "
        f"writer {writer.writes:4d} writes {writer.bytes / 1e9:6.3f} GB  "
        f"ratio {baseline_bytes / writer.bytes:6.1f}x  writer wall {wall:6.2f} s",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,50,100,400")
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        measure(n)


if __name__ == "__main__":
    main()
