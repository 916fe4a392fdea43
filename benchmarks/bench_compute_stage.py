"""`ci-evals compute-stage` on a 100,000-file diff vs `git diff` alone.

The target (issue 2): the whole command — interpreter start, imports, loading
the 1,000-entry map, resolving BASE/HEAD, the merge base, the diff, matching
every path — takes at most 2x the wall time of

    git diff --name-only -z --no-renames BASE...HEAD

on the same repository. Both are run as subprocesses, interleaved, and the
medians of the repeats are compared. The in-process split (diff vs. select)
is printed too, to show where the time goes.

    .venv/bin/python benchmarks/bench_compute_stage.py [--files 100000] [--entries 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gen_repo import GeneratedRepo, build_repo
from ci_evals import git, selection
from ci_evals.matcher import GlobMatcher
from ci_evals.stage_map import load_stage_map

CI_EVALS = Path(sys.executable).with_name("ci-evals")


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _repo(path: Path, files: int, entries: int) -> GeneratedRepo:
    if not path.exists():
        return build_repo(path, files, entries)

    def sha(ref: str) -> str:
        return git.rev_parse(path, ref) or ""

    return GeneratedRepo(
        path, path / "stage_map.yaml", "plugin", tuple(range(files)), tuple(range(entries)),
        sha("base"), sha("main"),
    )  # type: ignore[arg-type]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--repo", type=Path, help="build the repository here, or reuse it if it exists"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-compute-stage-") as tmp:
        start = time.perf_counter()
        repo = _repo(args.repo or Path(tmp) / "repo", args.files, args.entries)
        print(
            f"repository: {len(repo.files)} files, {len(repo.entries)} entries "
            f"(built in {time.perf_counter() - start:.1f} s)"
        )
        git_argv = [
            "git", "-C", str(repo.path), "diff", "--name-only", "-z", "--no-renames",
            f"{repo.base}...{repo.head}",
        ]  # fmt: skip
        ours_argv = [str(CI_EVALS), "compute-stage", repo.base, "--head", repo.head]

        def run_git() -> None:
            subprocess.run(git_argv, stdout=subprocess.PIPE, check=True)

        def run_ours() -> None:
            result = subprocess.run(ours_argv, cwd=repo.path, capture_output=True, check=True)
            assert result.stdout.strip() == b"1", result  # every file changed: stage 1

        listed = subprocess.run(git_argv, stdout=subprocess.PIPE, check=True).stdout.count(b"\0")
        print(f"diff lists {listed} paths")
        run_ours()  # warm the page cache for both

        git_times: list[float] = []
        our_times: list[float] = []
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            git_times.append(median_seconds(run_git, 1))
            our_times.append(median_seconds(run_ours, 1))
        git_median = statistics.median(git_times)
        our_median = statistics.median(our_times)

        # Where our time goes, in process (no interpreter start).
        stage_map = load_stage_map(repo.map_path)
        paths = git.changed_paths(repo.path, repo.base, repo.head)
        matcher_build = median_seconds(lambda: GlobMatcher(stage_map.globs), 3)
        matcher = GlobMatcher(stage_map.globs)
        select = median_seconds(lambda: selection.select(stage_map, matcher, paths), 3)
        load = median_seconds(lambda: load_stage_map(repo.map_path), 3)

    print(f"git diff --name-only -z --no-renames BASE...HEAD: median {git_median:.3f} s")
    print(f"ci-evals compute-stage BASE --head HEAD:         median {our_median:.3f} s")
    print(f"  in process: load map {load:.3f} s, build matcher {matcher_build:.3f} s, ")
    print(f"              select over {len(paths)} paths {select:.3f} s")
    ratio = our_median / git_median
    verdict = "ok" if ratio <= 2.0 else "OVER TARGET"
    print(f"ratio compute-stage / git diff: {ratio:.2f}x (target <= 2x: {verdict})")
    print(f"repeats: {args.repeats}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
