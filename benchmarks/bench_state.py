"""Benchmark: the saved stage state (`after/`) vs `cp -r`, first stage and later stages.

    .venv/bin/python benchmarks/bench_state.py [--files N] [--mb N] [--changed N] [--repeats N]

Defaults: 10,000 files, 200 MB, 50 changed, 5 repeats.

Generates a workspace of FILES files totalling MB megabytes (the fixture
generator of bench_workspace), then reports medians of REPEATS rounds of:

- `cp -r WORKSPACE DEST` (the baseline, measured in the same rounds);
- `save_state` for the first stage of a scenario (everything copied);
- `save_state` for a later stage that changed CHANGED files (the rest
  hard-linked from the previous stage's saved state);
- `copy_state` (what a reviewer or command grader gets: a full copy plus
  a small plugin copy).

Ratios are medians of per-round ratios against `cp -r`. The page cache is
warmed first, so the figures measure the tool, not the disk.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_workspace import make_fixture

from ci_evals.fs.state import copy_state, save_state


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--changed", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-state-") as tmp:
        base = Path(tmp)
        live = base / "live"
        make_fixture(live, args.files, args.mb)
        plugin = base / "plugin"
        (plugin / "agents").mkdir(parents=True)
        (plugin / "agents" / "review.md").write_text("review\n")
        files = sorted(p for p in live.rglob("*") if p.is_file())
        changed = {p.relative_to(live).as_posix() for p in files[: args.changed]}
        rows: dict[str, list[float]] = {"cp -r": [], "first": [], "later": [], "copy": []}
        for round_ in range(args.repeats + 1):  # round 0 warms the page cache
            out = base / f"r{round_}"
            out.mkdir()
            cp = timed(lambda: subprocess.run(["cp", "-r", str(live), str(out / "cp")], check=True))  # noqa: B023
            first = timed(lambda: save_state(live, out / "s1"))  # noqa: B023
            later = timed(
                lambda: save_state(live, out / "s2", previous=out / "s1", changed=changed)  # noqa: B023
            )
            copy = timed(lambda: copy_state(out / "s2", plugin, out / "grader"))  # noqa: B023
            if round_:
                for key, value in zip(rows, (cp, first, later, copy), strict=True):
                    rows[key].append(value)
            shutil.rmtree(out)
        baseline = rows["cp -r"]
        print(
            f"{args.files} files, {args.mb} MB, {args.changed} changed; medians of {args.repeats}"
        )
        for key, values in rows.items():
            ratio = statistics.median(v / b for v, b in zip(values, baseline, strict=True))
            print(f"  {key:<6} {statistics.median(values) * 1000:8.1f} ms   {ratio:5.2f}x cp -r")


if __name__ == "__main__":
    main()
