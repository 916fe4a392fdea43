"""Benchmark shards on one machine: K = 1, 2, 4 shards as separate processes.

    .venv/bin/python benchmarks/bench_shards.py [--scenarios 16] [--repeat 3]
                                                [--from-stage 5] [--shards 1,2,4] [--rounds 1]

The demo suite of the runner tests (tests/run_helpers.py: the stub's answer
depends only on the stage's command, never on the order requests arrive in),
`--scenarios` scenarios x `--repeat` repeats, stages `--from-stage`..5 on
the stub model with the real Claude Code CLI. K = 1 is the unsharded run
(`ci-evals run`); for K > 1, `ci-evals plan --shards K`, then every
`run --shard I/K` started at once (CI's matrix, here sharing this machine's
cores), then `ci-evals merge`. Per K: the shards' wall time (the first start
to the last end), the merge's, the peak resident memory of each shard's
process tree (ci-evals and every CLI it started, sampled from /proc every
50 ms) and the check that the merged results equal the unsharded run's (but
for ids and timings: tests/shard_helpers.py). Ratios are against K = 1 on
this machine, now; with `--rounds N`, medians over N rounds, K interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.processes import ci_evals, watched  # noqa: E402
from ci_evals.results.model import read_results  # noqa: E402
from tests.run_helpers import make_suite  # noqa: E402
from tests.shard_helpers import comparable  # noqa: E402

Measured = tuple[float, float, list[float], bool]  # shards' wall, merge wall, peaks, equal


def one_round(
    suite: Path, stub: Path, base: Path, counts: list[int], common: list[str]
) -> dict[int, Measured]:
    """Every K once, K = 1 (the reference) first."""
    run = ["run", "--suite", str(suite), "--model", f"stub:{stub}", *common]
    measured: dict[int, Measured] = {}
    whole = base / "k1"
    wall, peaks = watched([ci_evals(*run, "--out", str(whole))])
    reference = comparable(read_results(whole))
    measured[1] = (wall, 0.0, peaks, True)
    for count in (k for k in counts if k > 1):
        plan = ci_evals("plan", "--suite", str(suite), *common, "--shards", str(count))
        out, _ = plan.communicate()
        specs = [entry["shard"] for entry in json.loads(out)["include"]]
        folders = [base / f"k{count}-s{i}" for i in range(1, len(specs) + 1)]
        procs = [
            ci_evals(*run, "--shard", s, "--out", str(f))
            for s, f in zip(specs, folders, strict=True)
        ]
        wall, peaks = watched(procs)
        merged = base / f"k{count}-merged"
        started = time.perf_counter()
        merge = ci_evals("merge", *map(str, folders), "--out", str(merged))
        _, err = merge.communicate()
        if merge.returncode != 0:
            raise SystemExit(f"merge of {count} shards failed: {err.decode()}")
        merge_wall = time.perf_counter() - started
        equal = comparable(read_results(merged)) == reference
        measured[count] = (wall, merge_wall, peaks, equal)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--from-stage", type=int, default=5, choices=range(1, 6))
    parser.add_argument("--shards", default="1,2,4", help="shard counts, 1 first (the reference)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    counts = sorted({1, *(int(k) for k in args.shards.split(","))})
    common = ["--from-stage", str(args.from_stage), "--repeat", str(args.repeat)]
    load_before = os.getloadavg()[0]
    results: dict[int, list[Measured]] = {k: [] for k in counts}
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as temp:
        names = tuple(f"s{i:02d}" for i in range(args.scenarios))
        suite, stub = make_suite(Path(temp) / "suite", scenarios=names)
        for n in range(args.rounds):
            base = Path(temp) / f"round{n}"
            base.mkdir()
            for count, value in one_round(suite, stub, base, counts, common).items():
                results[count].append(value)
    units = args.scenarios * args.repeat
    stages = units * (6 - args.from_stage)
    print(
        f"{args.scenarios} scenarios x {args.repeat} repeats = {units} units, "
        f"{stages} stub stages (stages {args.from_stage}-5), --jobs 1 per shard; "
        f"median of {args.rounds} round(s)"
    )
    med = statistics.median
    reference = med(r[0] for r in results[1])
    for count in counts:
        rows = results[count]
        wall, merge = med(r[0] for r in rows), med(r[1] for r in rows)
        peaks = [max(r[2][i] for r in rows) for i in range(len(rows[0][2]))]
        equal = all(r[3] for r in rows)
        print(
            f"  K={count}: shards' wall {wall:.1f} s ({reference / wall:.2f}x K=1), "
            f"merge {merge:.2f} s, peak RSS per shard {max(peaks):.0f} MiB "
            f"(sum {sum(peaks):.0f}), merged == unsharded: {'yes' if equal else 'NO'}"
        )
    print(
        f"  (machine: {os.cpu_count()} cores, load {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after)"
    )


if __name__ == "__main__":
    main()
