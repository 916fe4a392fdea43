"""Stage-map speed: matching, `check-coverage`, the hook, and what the hook imports.

Measured against baselines on the same machine, medians of repeated runs:

1. matching 100,000 paths against 1,000 globs with `GlobMatcher` (a fresh
   matcher each run: its per-folder cache starts empty) — target <= 0.3 s;
   baseline: pathspec's `GitIgnoreSpec.check_file` on its default backend
   (which reports only the last match; one run, it is slow);
2. `ci-evals check-coverage` on the 100,000-file repository, as a subprocess —
   target <= 2x `git ls-files -z` + 0.5 s;
3. the hook on a 1,000-file repository, wall time including interpreter start —
   target <= 0.3 s; baseline: `python -c pass`;
4. `python -X importtime -m ci_evals check-coverage`: no agent SDK, docker,
   pydantic or HTTP client may be imported.

    .venv/bin/python benchmarks/bench_selection.py [--files 100000] [--entries 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pathspec

from benchmarks.gen_repo import build_repo, map_entries, plugin_paths
from ci_evals.matcher import GlobMatcher

PYTHON = sys.executable
CI_EVALS = Path(sys.executable).with_name("ci-evals")
FORBIDDEN = ("claude_agent_sdk", "docker", "pydantic", "httpx", "requests", "urllib3", "aiohttp")


Row = tuple[str, float, float, str]  # name, wall seconds (or ratio), CPU seconds (or ratio), target


def median_times(action: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall time and median CPU time (this process + its children) of `action`."""
    walls, cpus = [], []
    for _ in range(repeats):
        before = _cpu()
        start = time.perf_counter()
        action()
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu() - before)
    return statistics.median(walls), statistics.median(cpus)


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def ratio(name: str, a: tuple[float, float], b: tuple[float, float]) -> Row:
    return (name, a[0] / b[0], a[1] / b[1], "x")


def run_quiet(argv: list[str], cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=True, timeout=600)


def bench_matching(files: int, entries: int, repeats: int) -> list[Row]:
    paths = plugin_paths(files)
    globs = [glob for glob, _ in map_entries(paths, entries)]

    def ours() -> None:
        uncovered, dead = GlobMatcher(globs).unmatched(paths)
        assert not uncovered and not dead

    mine = median_times(ours, repeats)
    # pathspec needs ~10 s per 10,000 paths here: time a 10% sample once and scale.
    spec = pathspec.GitIgnoreSpec.from_lines(globs)
    sample = paths[:: max(1, len(paths) // 10_000)]
    wall, cpu = median_times(lambda: [spec.check_file(p) for p in sample], 1)
    scale = len(paths) / len(sample)
    baseline = (wall * scale, cpu * scale)
    return [
        (f"GlobMatcher, {files:,} paths x {entries:,} globs (all matches)", *mine, "<= 0.3 s"),
        ("pathspec GitIgnoreSpec default backend (last match only; 10% x10)", *baseline, ""),
        ratio("  ratio pathspec / GlobMatcher", baseline, mine),
    ]


def bench_check_coverage(work: Path, files: int, entries: int, repeats: int) -> list[Row]:
    repo = build_repo(work / "big", files, entries)
    ls_argv = ["git", "ls-files", "-z", "--cached"]
    ls_files = median_times(lambda: run_quiet(ls_argv, repo.path), repeats)
    ours = median_times(lambda: run_quiet([str(CI_EVALS), "check-coverage"], repo.path), repeats)
    target = 2 * ls_files[0] + 0.5
    return [
        (f"git ls-files -z ({files:,} files)", *ls_files, ""),
        ("ci-evals check-coverage (subprocess)", *ours, f"<= {target:.2f} s (2x + 0.5)"),
        ratio("  ratio check-coverage / git ls-files", ours, ls_files),
    ]


def bench_hook(work: Path, repeats: int) -> tuple[list[Row], Path]:
    repo = build_repo(work / "small", 1000, 100, checkout=True)
    bare = median_times(lambda: run_quiet([PYTHON, "-c", "pass"], repo.path), repeats)
    ours = median_times(lambda: run_quiet([str(CI_EVALS), "check-coverage"], repo.path), repeats)
    return [
        ("python -c pass (interpreter start)", *bare, ""),
        ("hook: ci-evals check-coverage, 1,000-file repo", *ours, "<= 0.3 s"),
    ], repo.path


def imported_modules(repo: Path) -> set[str]:
    result = subprocess.run(
        [PYTHON, "-X", "importtime", "-m", "ci_evals", "check-coverage"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    names = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: list[Row] = []
    rows += bench_matching(args.files, args.entries, args.repeat)
    with tempfile.TemporaryDirectory(prefix="ci-evals-bench-") as tmp:
        work = Path(tmp)
        rows += bench_check_coverage(work, args.files, args.entries, args.repeat)
        hook_rows, small = bench_hook(work, max(args.repeat, 10))
        rows += hook_rows
        modules = imported_modules(small)
    load = os.getloadavg()[0]
    print(f"\nstage-map benchmarks (medians of {args.repeat} runs; load average {load:.1f})\n")
    print(f"| {'measurement':<68} | {'wall':>8} | {'CPU':>8} | target")
    print(f"|{'-' * 70}|{'-' * 10}|{'-' * 10}|-------")
    for name, wall, cpu, target in rows:
        unit = "x" if target == "x" else "s"
        digits = 1 if unit == "x" else 3
        shown = [f"{value:.{digits}f}{unit}" for value in (wall, cpu)]
        print(f"| {name:<68} | {shown[0]:>8} | {shown[1]:>8} | {'' if unit == 'x' else target}")
    bad = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)
    verdict = "none" if not bad else ", ".join(bad)
    print(f"\nimported by check-coverage: {len(modules)} modules; forbidden ones: {verdict}")
    third_party = sorted({m.split(".")[0] for m in modules} & {"yaml", "pathspec", *FORBIDDEN})
    print(f"third-party packages imported: {', '.join(third_party)}")


if __name__ == "__main__":
    main()
