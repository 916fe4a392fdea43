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
from ci_evals.selection.matcher import GlobMatcher

PYTHON = sys.executable
CI_EVALS = Path(sys.executable).with_name("ci-evals")
# Subprocesses run as an installed package would: with compiled bytecode (pip
# writes .pyc at install; an editable checkout under PYTHONDONTWRITEBYTECODE
# would recompile every module on every run). Filled in `main`.
ENV: dict[str, str] = {}
COLD = {"CI_EVALS_NO_MAP_CACHE": "1"}  # the map cache off: parse and validate the YAML
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


def run_quiet(argv: list[str], cwd: Path, extra: dict[str, str] | None = None) -> None:
    env = {**ENV, **(extra or {})}
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=True, timeout=600)


def bench_matching(files: int, entries: int, repeats: int) -> list[Row]:
    paths = plugin_paths(files)
    globs = [glob for glob, _ in map_entries(paths, entries)]

    def ours() -> None:
        uncovered, dead = GlobMatcher(globs).unmatched(paths)
        assert not uncovered and not dead

    mine = median_times(ours, repeats)
    ranks = list(range(1, len(globs) + 1))
    lowest = median_times(lambda: GlobMatcher(globs).lowest_many(paths, ranks), repeats)
    # pathspec needs ~10 s per 10,000 paths here: time a 10% sample once and scale.
    spec = pathspec.GitIgnoreSpec.from_lines(globs)
    sample = paths[:: max(1, len(paths) // 10_000)]
    wall, cpu = median_times(lambda: [spec.check_file(p) for p in sample], 1)
    scale = len(paths) / len(sample)
    baseline = (wall * scale, cpu * scale)
    return [
        (f"GlobMatcher, {files:,} paths x {entries:,} globs (all matches)", *mine, "<= 0.3 s"),
        ("  the same, lowest_many (compute-stage's form: min rank per path)", *lowest, "<= 0.3 s"),
        ("pathspec GitIgnoreSpec default backend (last match only; 10% x10)", *baseline, ""),
        ratio("  ratio pathspec / GlobMatcher", baseline, mine),
    ]


def bench_check_coverage(work: Path, files: int, entries: int, repeats: int) -> list[Row]:
    repo = build_repo(work / "big", files, entries)
    ls_argv = ["git", "ls-files", "-z", "--cached"]
    ls_files = median_times(lambda: run_quiet(ls_argv, repo.path), repeats)
    command = [str(CI_EVALS), "check-coverage"]
    run_quiet(command, repo.path)  # writes the map cache
    ours = median_times(lambda: run_quiet(command, repo.path), repeats)
    cold = median_times(lambda: run_quiet(command, repo.path, COLD), repeats)
    target = 2 * ls_files[0] + 0.5
    return [
        (f"git ls-files -z ({files:,} files)", *ls_files, ""),
        ("ci-evals check-coverage (subprocess)", *ours, f"<= {target:.2f} s (2x + 0.5)"),
        ("  the same, map cache off", *cold, f"<= {target:.2f} s (2x + 0.5)"),
        ratio("  ratio check-coverage / git ls-files", ours, ls_files),
    ]


def bench_hook(work: Path, repeats: int) -> tuple[list[Row], Path]:
    repo = build_repo(work / "small", 1000, 100, checkout=True)
    bare = median_times(lambda: run_quiet([PYTHON, "-c", "pass"], repo.path), repeats)
    command = [str(CI_EVALS), "check-coverage"]
    run_quiet(command, repo.path)  # writes the map cache
    ours = median_times(lambda: run_quiet(command, repo.path), repeats)
    cold = median_times(lambda: run_quiet(command, repo.path, COLD), repeats)
    return [
        ("python -c pass (interpreter start)", *bare, ""),
        ("hook: ci-evals check-coverage, 1,000-file repo", *ours, "<= 0.3 s"),
        ("  the same, map cache off (first commit after a map change)", *cold, "<= 0.3 s"),
    ], repo.path


def imported_modules(repo: Path, extra: dict[str, str]) -> set[str]:
    result = subprocess.run(
        [PYTHON, "-X", "importtime", "-m", "ci_evals", "check-coverage"],
        cwd=repo,
        env={**ENV, **extra},
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
        ENV.update(os.environ, PYTHONPYCACHEPREFIX=str(work / "pyc"))
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        rows += bench_check_coverage(work, args.files, args.entries, args.repeat)
        hook_rows, small = bench_hook(work, max(args.repeat, 10))
        rows += hook_rows
        modules = imported_modules(small, COLD)  # the worst case: YAML and pathspec too
        warm_modules = imported_modules(small, {})
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
    for label, found in (("map cache off", modules), ("from the map cache", warm_modules)):
        third_party = sorted({m.split(".")[0] for m in found} & {"yaml", "pathspec", *FORBIDDEN})
        shown = ", ".join(third_party) or "none"
        print(f"{label}: {len(found)} modules; third-party packages imported: {shown}")


if __name__ == "__main__":
    main()
