"""`ci-evals compute-stage` on a 100,000-file diff vs `git diff` alone.

The target (issue 2): the whole command — interpreter start, imports, loading
the 1,000-entry map, resolving BASE/HEAD, the merge base, the diff, matching
every path — takes at most 2x the wall time of

    git diff --name-only -z --no-renames BASE...HEAD

on the same repository. Both are run as subprocesses, interleaved, and the
medians of the repeats are compared. The in-process split (diff vs. select)
is printed too, to show where the time goes.

    .venv/bin/python benchmarks/bench_compute_stage.py [--files 100000] [--entries 1000]
        [--shape bench|wildcards|late|late-wildcard]

`--before REV` compares two versions instead, interleaved in one run: the
`ci_evals` package of commit REV (exported to a temporary folder) and this
checkout's, both as `python -m ci_evals` with `PYTHONPATH`, each on its own
clone of the repository (the map cache is keyed on the sources), for every
map shape in `--shapes`, in the plain, `--explain`, `--json` and Actions forms,
with `git diff` alone as the baseline of each shape:

    .venv/bin/python benchmarks/bench_compute_stage.py --before REV --repeats 7
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gen_repo import SHAPES, GeneratedRepo, build_repo
from benchmarks.timing import median_seconds
from ci_evals import git
from ci_evals.selection import decide as selection
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import StageMap, load_stage_map

CI_EVALS = Path(sys.executable).with_name("ci-evals")
# Subprocesses run as an installed package would: with compiled bytecode (pip
# writes .pyc at install; an editable checkout under PYTHONDONTWRITEBYTECODE
# would recompile every module on every run). Set in `main`.
ENV: dict[str, str] = {}


@dataclass
class Timing:
    """Wall and CPU seconds (user + sys of the process and its children) per run."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def run(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> bytes:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run(argv, cwd=cwd, env=env or ENV, capture_output=True, check=True).stdout
        self.wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        return out

    def text(self) -> str:
        wall, cpu = statistics.median(self.wall), statistics.median(self.cpu)
        return f"wall {wall:.3f} s, cpu {cpu:.3f} s"


def _site_packages() -> str:
    import sysconfig  # noqa: PLC0415

    return sysconfig.get_paths()["purelib"]


def _repo(path: Path, files: int, entries: int, shape: str = "bench") -> GeneratedRepo:
    if not path.exists():
        return build_repo(path, files, entries, shape=shape)

    def sha(ref: str) -> str:
        return git.rev_parse(path, ref) or ""

    return GeneratedRepo(
        path, path / "stage_map.yaml", "plugin", tuple(range(files)), tuple(range(entries)),
        sha("base"), sha("main"),
    )  # type: ignore[arg-type]  # fmt: skip


def _select(
    stage_map: StageMap, matcher: GlobMatcher, paths: list[str], *, prune: bool
) -> selection.Selection:
    selector = selection.Selector(stage_map, matcher, prune=prune)
    selector.add(paths)
    return selector.finish()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--repo", type=Path, help="build the repository here, or reuse it if it exists"
    )
    parser.add_argument("--shape", choices=SHAPES, default="bench", help="the map's shape")
    parser.add_argument("--before", metavar="REV", help="compare with commit REV's ci_evals")
    parser.add_argument(
        "--shapes", default=",".join(SHAPES), help="with --before: the map shapes, comma-separated"
    )
    args = parser.parse_args()
    if args.before:
        compare(args)
        return

    with tempfile.TemporaryDirectory(prefix="bench-compute-stage-") as tmp:
        ENV.update(os.environ, PYTHONPYCACHEPREFIX=str(Path(tmp) / "pyc"))
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        start = time.perf_counter()
        repo = _repo(args.repo or Path(tmp) / "repo", args.files, args.entries, args.shape)
        print(
            f"repository: {len(repo.files)} files, {len(repo.entries)} entries "
            f"(built in {time.perf_counter() - start:.1f} s)"
        )
        git_argv = [
            "git", "-C", str(repo.path), "diff", "--name-only", "-z", "--no-renames",
            f"{repo.base}...{repo.head}",
        ]  # fmt: skip
        commands = {
            "git diff --name-only -z --no-renames BASE...HEAD": git_argv,
            "ci-evals compute-stage BASE --head HEAD": [
                str(CI_EVALS), "compute-stage", repo.base, "--head", repo.head,
            ],
            "  the same, fresh clone (no map cache yet)": [
                str(CI_EVALS), "compute-stage", repo.base, "--head", repo.head,
            ],
            "  in GitHub Actions (step outputs, matches_json)": [
                str(CI_EVALS), "compute-stage", repo.base, "--head", repo.head,
            ],
            "  in GitHub Actions, fresh clone (a PR's CI job)": [
                str(CI_EVALS), "compute-stage", repo.base, "--head", repo.head,
            ],
            "  --json (every path's record on stdout, ~9 MB)": [
                str(CI_EVALS), "compute-stage", repo.base, "--head", repo.head, "--json",
            ],
            "  fixed part: the same with BASE = HEAD (no diff)": [
                str(CI_EVALS), "compute-stage", repo.head, "--head", repo.head,
            ],
            "  of which python start: python -c pass": [sys.executable, "-c", "pass"],
        }  # fmt: skip
        timings = {name: Timing() for name in commands}
        ours = "ci-evals compute-stage BASE --head HEAD"
        assert timings[ours].run(commands[ours], repo.path).strip() == b"1"  # warm caches
        timings[ours].wall.clear()
        timings[ours].cpu.clear()
        load_before = os.getloadavg()[0]
        outputs = Path(tmp) / "github_output"
        actions_env = {**ENV, "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs)}
        envs = {
            "  in GitHub Actions (step outputs, matches_json)": actions_env,
            "  in GitHub Actions, fresh clone (a PR's CI job)": actions_env,
        }
        # A fresh clone has no map cache: the run loads the map and writes it.
        cache = repo.path / ".git" / "ci-evals"
        for _ in range(args.repeats):  # interleaved, so drift hits all alike
            for name, argv in commands.items():
                outputs.unlink(missing_ok=True)
                if "fresh clone" in name:
                    shutil.rmtree(cache, ignore_errors=True)
                timings[name].run(argv, repo.path, envs.get(name))
        load_after = os.getloadavg()[0]

        # In process, a fresh matcher each time (its caches start cold, as in the CLI).
        stage_map = load_stage_map(repo.map_path)
        paths = git.changed_paths(repo.path, repo.base, repo.head)
        relative = [p.removeprefix("plugin/") for p in paths]
        ranks = [e.stage * len(stage_map.entries) + i for i, e in enumerate(stage_map.entries)]
        matching = median_seconds(
            lambda: GlobMatcher(stage_map.globs).lowest_many(relative, ranks), 3
        )
        # compute-stage's matcher: the entries, then the globals that reach root.
        globs = stage_map.selection_globs
        select = median_seconds(lambda: selection.select(stage_map, GlobMatcher(globs), paths), 3)
        unpruned = median_seconds(
            lambda: _select(stage_map, GlobMatcher(globs), paths, prune=False), 3
        )
        chosen = selection.select(stage_map, GlobMatcher(globs), paths)
        # The rules alone: every answer precomputed (a global's rank is 0).
        answers = GlobMatcher(globs).lowest_many(relative, ranks + [0] * (len(globs) - len(ranks)))
        known = SimpleNamespace(
            globs=globs,
            matches=GlobMatcher(globs).matches,  # for paths outside root: none here
            lowest_many=lambda _paths, _ranks, cut=0: answers,
        )
        rules = median_seconds(lambda: _select(stage_map, known, paths, prune=False), 5)  # type: ignore[arg-type]
        assert chosen.from_stage == 1
        records = median_seconds(
            lambda: tuple(_select(stage_map, known, paths, prune=False).matches),  # type: ignore[arg-type]
            3,
        )

    for name, timing in timings.items():
        print(f"{name:<52} {timing.text()}")
    print(f"in process, {len(paths)} paths: GlobMatcher.lowest_many {matching:.3f} s; ")
    print(f"  selection.select (pruned: the plain answer; records not read) {select:.3f} s")
    print(f"  the same unpruned (every path's rank, as before) {unpruned:.3f} s")
    print(f"  selection.select with matches precomputed (rules alone) {rules:.3f} s")
    print(f"  the same, then reading every record (as --json does) {records:.3f} s")
    git_t, our_t = timings["git diff --name-only -z --no-renames BASE...HEAD"], timings[ours]
    ratio = statistics.median(our_t.wall) / statistics.median(git_t.wall)
    cpu_ratio = statistics.median(our_t.cpu) / statistics.median(git_t.cpu)
    verdict = "ok" if ratio <= 2.0 else "OVER TARGET"
    print(f"ratio compute-stage / git diff: wall {ratio:.2f}x (target <= 2x: {verdict}), "
          f"cpu {cpu_ratio:.2f}x")  # fmt: skip
    for label, name in (
        ("fresh clone", "  the same, fresh clone (no map cache yet)"),
        ("in Actions", "  in GitHub Actions (step outputs, matches_json)"),
        ("in Actions, fresh clone", "  in GitHub Actions, fresh clone (a PR's CI job)"),
        ("--json", "  --json (every path's record on stdout, ~9 MB)"),
    ):
        wall = statistics.median(timings[name].wall) / statistics.median(git_t.wall)
        cpu = statistics.median(timings[name].cpu) / statistics.median(git_t.cpu)
        print(f"  {label}: wall {wall:.2f}x, cpu {cpu:.2f}x")
    print(
        f"repeats: {args.repeats}; load average {load_before:.1f} -> {load_after:.1f} "
        f"on {os.cpu_count()} cores; python {sys.version.split()[0]}"
    )


FORMS = {
    "plain": [],
    "--explain": ["--explain"],
    "--json": ["--json"],
    "Actions": [],  # the plain form with GITHUB_ACTIONS: step outputs, matches_json
}


def _clone(repo: GeneratedRepo, dest: Path) -> GeneratedRepo:
    """A local clone (objects hard-linked) with the same index and map: its own map cache."""
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(repo.path), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "read-tree", "main"], check=True)
    (dest / "plugin").mkdir()
    shutil.copy(repo.map_path, dest / "stage_map.yaml")
    return GeneratedRepo(
        dest, dest / "stage_map.yaml", repo.root, repo.files, repo.entries, repo.base, repo.head
    )


def compare(args: argparse.Namespace) -> None:
    """`--before REV`: REV's compute-stage vs this checkout's, interleaved (see the docstring)."""
    shapes = [shape for shape in args.shapes.split(",") if shape]
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="bench-compute-stage-") as tmp:
        ENV.update(os.environ, PYTHONPYCACHEPREFIX=str(Path(tmp) / "pyc"))
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        before_tree = Path(tmp) / "before"
        before_tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(here), "archive", args.before, "ci_evals"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before_tree)], input=archive, check=True)
        trees = {"before": before_tree, "after": here}
        outputs = Path(tmp) / "github_output"
        runs: list[tuple[str, str, str, list[str], Path, dict[str, str]]] = []
        timings: dict[tuple[str, str, str], Timing] = {}
        answers: dict[tuple[str, str, str], bytes] = {}
        for shape in shapes:
            start = time.perf_counter()
            repo = _repo(Path(tmp) / shape, args.files, args.entries, shape)
            print(
                f"{shape}: {len(repo.entries)} entries "
                f"(built in {time.perf_counter() - start:.1f} s)"
            )
            git_argv = [
                "git", "-C", str(repo.path), "diff", "--name-only", "-z", "--no-renames",
                f"{repo.base}...{repo.head}",
            ]  # fmt: skip
            runs.append((shape, "git diff", "", git_argv, repo.path, ENV))
            for version, tree in trees.items():
                clone = _clone(repo, Path(tmp) / f"{shape}-{version}")
                # `-S` with site-packages on PYTHONPATH: an editable install's import
                # finder (loaded by a .pth file) would otherwise shadow PYTHONPATH and
                # run this checkout's package as "before" too.
                env = {**ENV, "PYTHONPATH": f"{tree}{os.pathsep}{_site_packages()}"}
                for form, extra in FORMS.items():
                    argv = [
                        sys.executable, "-S", "-m", "ci_evals", "compute-stage", repo.base,
                        "--head", repo.head, *extra,
                    ]  # fmt: skip
                    form_env = env
                    if form == "Actions":
                        form_env = {**env, "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(outputs)}
                    runs.append((shape, form, version, argv, clone.path, form_env))
        for shape, form, version, argv, cwd, env in runs:  # warm caches, write the map caches
            outputs.unlink(missing_ok=True)
            answers[shape, form, version] = Timing().run(argv, cwd, env)
            timings[shape, form, version] = Timing()
        load_before = os.getloadavg()[0]
        for _ in range(args.repeats):  # interleaved, so drift hits all alike
            for shape, form, version, argv, cwd, env in runs:
                outputs.unlink(missing_ok=True)
                timings[shape, form, version].run(argv, cwd, env)
        load_after = os.getloadavg()[0]
    for shape in shapes:
        for form in FORMS:
            if answers[shape, form, "before"] != answers[shape, form, "after"]:
                print(f"  {shape} {form}: the output DIFFERS between before and after")
    print(f"\n{'shape':<14} {'form':<10} {'before':>26} {'after':>26}")
    for shape in shapes:
        git_t = timings[shape, "git diff", ""]
        git_wall = statistics.median(git_t.wall)
        print(f"{shape:<14} {'git diff':<10} {git_wall * 1000:>7.0f} ms wall, "
              f"{statistics.median(git_t.cpu) * 1000:.0f} ms CPU")  # fmt: skip
        for form in FORMS:
            cells = []
            for version in trees:
                t = timings[shape, form, version]
                wall, cpu = statistics.median(t.wall), statistics.median(t.cpu)
                cells.append(f"{wall * 1000:.0f} ms ({wall / git_wall:.2f}x) {cpu * 1000:.0f} CPU")
            print(f"{'':<14} {form:<10} {cells[0]:>26} {cells[1]:>26}")
    # On a machine whose speed drifts (shared hosts swing 1.5x within a minute),
    # each round's own ratio to the `git diff` run just before it cancels the
    # drift the medians above keep: the median and the range of those ratios.
    print("\nper round, wall / that round's git diff: median [min-max]")
    for shape in shapes:
        git_walls = timings[shape, "git diff", ""].wall
        for form in FORMS:
            cells = []
            for version in trees:
                ratios = [
                    wall / base
                    for wall, base in zip(
                        timings[shape, form, version].wall, git_walls, strict=True
                    )
                ]
                cells.append(
                    f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
                )
            print(f"{shape:<14} {form:<10} {cells[0]:>26} {cells[1]:>26}")
    answer = {shape: answers[shape, "plain", "after"].strip().decode() for shape in shapes}
    print(f"answers (plain): {answer}")
    print(
        f"repeats: {args.repeats}; load average {load_before:.1f} -> {load_after:.1f} "
        f"on {os.cpu_count()} cores; python {sys.version.split()[0]}"
    )


if __name__ == "__main__":
    main()
