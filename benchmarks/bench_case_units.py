"""Selection of case units on a ten-case plugin's history: how many case runs it saves.

Builds a real git repository holding `helpdesk` (`tests/case_units_repo.py`:
four skills, two commands, an agent, a README, a manifest, ten `claude plugin
eval` cases), drafts its suite, stub and stage map with `ci-evals init` (as
drafted, not edited), then commits a seeded history with the mix a plugin's
repository shows: edits to a skill, a command or the agent, to a case's prompt
or graders, to the README, version bumps in the manifest, and now and then an
edit to the suite. For every commit it asks what `compute-stage` answers
(in process: `selection.diff.compute`, then `selection.units`) and counts
case runs per commit:

- units: the cases the change selects (all ten when it selects every case);
- everything: ten on every commit;
- `on.paths`: ten when the commit touches the plugin's folder, else none
  (GitHub's paths filter on the plugin; it misses the suite);
- the ideal: the cases a change truly reaches (those naming the component
  changed, the case whose files changed, none for the README or a version
  bump, all for the suite).

Exit 1 when the units ever run fewer cases than the ideal on a commit (a
missed case), else 0. Prints the totals, their ratios to everything, and the
median time of one selection.

    .venv/bin/python benchmarks/bench_case_units.py [--commits 200] [--seed 7] [--repo DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ci_evals.selection import diff as diff_range
from ci_evals.selection.stage_map import load_stage_map
from ci_evals.selection.units import select_units
from tests.case_units_repo import CASES, PLUGIN, SKILL_CASES, plugin_repo

ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}
# The kinds of change, with how often a plugin's history shows each (weights).
KINDS = {"component": 45, "case": 30, "readme": 10, "version": 10, "suite": 5}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=_env()
    )
    return done.stdout


def _env() -> dict[str, str]:
    import os  # noqa: PLC0415

    return {**os.environ, **ENV}


def _component_files(repo: Path) -> dict[str, tuple[str, ...]]:
    """Each file of a skill, command or agent -> the cases that truly reach it."""
    found: dict[str, tuple[str, ...]] = {}
    for glob, cases in SKILL_CASES.items():
        if glob.endswith("/**"):
            folder = repo / PLUGIN / glob.removesuffix("/**")
            for path in sorted(folder.rglob("*")):
                found[path.relative_to(repo).as_posix()] = cases
        else:
            found[f"{PLUGIN}/{glob}"] = cases
    return found


def _commit(repo: Path, rng: random.Random, n: int, components: dict[str, tuple[str, ...]]):
    """One change of a random kind; returns (its kind, the cases it truly reaches)."""
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    if kind == "component":
        path = rng.choice(sorted(components))
        truth: tuple[str, ...] = components[path]
        _append(repo / path, f"edit {n}\n")
    elif kind == "case":
        case = rng.choice(CASES)
        path = rng.choice(
            [f"{PLUGIN}/evals/{case}/prompt.md", f"{PLUGIN}/evals/{case}/graders/said.md"]
        )
        _append(repo / path, f"Also mind detail {n}.\n")
        truth = (case,)
    elif kind == "readme":
        _append(repo / PLUGIN / "README.md", f"note {n}\n")
        truth = ()
    elif kind == "version":
        manifest = repo / PLUGIN / ".claude-plugin" / "plugin.json"
        data = json.loads(manifest.read_text(encoding="utf-8"))
        data["version"] = f"1.0.{n}"
        manifest.write_text(json.dumps(data) + "\n", encoding="utf-8")
        truth = ()
    else:
        suite = repo / "ci-evals.yaml"
        text = suite.read_text(encoding="utf-8")
        budget = f"budget_usd: {5 + n}.0"  # never the same twice: a real change
        suite.write_text(
            "\n".join(
                budget if line.startswith("budget_usd:") else line for line in text.split("\n")
            ),
            encoding="utf-8",
        )
        truth = CASES
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", f"{kind} {n}")
    return kind, truth


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo", type=Path, help="build the repository here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-case-units-") as tmp:
        repo = args.repo or Path(tmp) / "repo"
        repo.mkdir(parents=True)
        _git(repo, "init", "-q", "-b", "main")
        _build(repo)
        return _measure(repo, args.commits, random.Random(args.seed))


def _build(repo: Path) -> None:
    import os  # noqa: PLC0415

    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        plugin_repo(repo)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    subprocess.run(
        [sys.executable, "-m", "ci_evals", "init", PLUGIN],
        cwd=repo,
        check=True,
        capture_output=True,
        env=_env(),
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "ci-evals init")


def _measure(repo: Path, commits: int, rng: random.Random) -> int:
    components = _component_files(repo)
    stage_map = load_stage_map(repo / "stage_map.yaml", warn=False)
    totals = {"units": 0, "everything": 0, "on.paths": 0, "ideal": 0}
    by_kind: dict[str, list[int]] = {}
    missed: list[str] = []
    seconds: list[float] = []
    for n in range(1, commits + 1):
        kind, truth = _commit(repo, rng, n, components)
        start = time.perf_counter()
        selection = diff_range.compute(repo, stage_map, "HEAD~1")
        units = select_units(stage_map, selection)
        seconds.append(time.perf_counter() - start)
        assert units is not None
        ran = set(CASES) if units.ids is None else set(units.ids)
        touched = _git(repo, "diff", "--name-only", "HEAD~1", "HEAD").split()
        totals["units"] += len(ran)
        totals["everything"] += len(CASES)
        totals["on.paths"] += len(CASES) if any(p.startswith(PLUGIN + "/") for p in touched) else 0
        totals["ideal"] += len(truth)
        by_kind.setdefault(kind, []).append(len(ran))
        if not set(truth) <= ran:
            missed.append(f"commit {n} ({kind}): ran {sorted(ran)}, needed {sorted(truth)}")
    everything = totals["everything"]
    print(
        f"{commits} commits of a ten-case plugin (helpdesk), the map as `ci-evals init` drafted it"
    )
    print(f"{'case runs':<12} {'total':>7} {'vs everything':>14}")
    for name, total in totals.items():
        print(f"{name:<12} {total:>7} {total / everything:>13.2f}x")
    print(
        f"units / on.paths: {totals['units'] / max(totals['on.paths'], 1):.2f}x; "
        f"units / ideal: {totals['units'] / max(totals['ideal'], 1):.2f}x"
    )
    for kind, runs in sorted(by_kind.items()):
        print(f"  {kind:<10} {len(runs):>4} commits, {statistics.mean(runs):5.2f} cases each")
    median = statistics.median(seconds) * 1000
    print(f"one selection (diff + stage + units, in process): median {median:.1f} ms")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
