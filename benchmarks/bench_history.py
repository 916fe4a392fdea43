"""Selection on a marketplace's history: how many stage runs the drafted maps save.

Builds a real git repository: a marketplace of several plugins (three phased
commands each, an agent, a skill, a template, README, LICENSE, CHANGELOG,
`.claude-plugin/plugin.json`, an entry in `.claude-plugin/marketplace.json`),
drafts a suite per plugin with `ci-evals init --plugin NAME` (the maps as
drafted, not edited), then commits a history with the mix public marketplaces
show — version bumps (manifest and entry), other plugins' entries, README and
changelog edits, display names, the `renames` map extended for one plugin,
real changes to a stage's files, an entry's loading keys changed with no
folder change, new plugins, suite edits — and asks
`compute-stage` (in process: `selection.diff.compute`) for every commit and
every plugin, first parent to commit.

Stage runs per (commit, plugin), n the plugin's stages, s the answer: n - s + 1
(0 for `none`). Compared with:
- everything: n on every commit;
- `on.paths`: n when the commit touches the plugin's folder, else 0 (GitHub's
  paths filter on the plugin: it misses a change to its marketplace entry or
  its suite, so it can run less than needed);
- the ideal: from what the generator changed, the lowest stage each change
  truly affects (a command's file its stage, what a command names that
  command's, documents and metadata none, a loading key of the entry or a
  `renames` entry naming the plugin 1);
- the maps as `init` drafted them before (the whole marketplace file global,
  no `ignore_metadata`, documents at stage 1).

Done when the drafted maps run <= 1.1x `on.paths` and never less than the
ideal on any commit (exit 1 otherwise).

A public history is replayed with today's maps (`--public`): a (commit,
plugin) before the plugin's folder exists counts for none (no suite of it can
be asked there), and every map decides each commit inside one
`git.shared_reads()`, so the marketplace file and the tree's links are read
once per commit, not once per plugin.

    .venv/bin/python benchmarks/bench_history.py [--plugins 6] [--commits 300] [--seed 7]
        [--repo DIR]
    .venv/bin/python benchmarks/bench_history.py --public DIR   # a fetched marketplace, by hand
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.selection import diff as diff_range
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import StageMap, load_stage_map

STAGES = ("plan", "build", "review")
# Plugin-relative file -> the lowest stage a change to it truly affects (None: no stage).
TRUTH: dict[str, int | None] = {
    "commands/plan.md": 1,
    "agents/planner.md": 1,
    "commands/build.md": 2,
    "skills/build-kit/SKILL.md": 2,
    "skills/build-kit/reference.md": 2,
    "commands/review.md": 3,
    "templates/review-template.md": 3,
    "README.md": None,
    "LICENSE": None,
    "CHANGELOG.md": None,
}
MARKET = ".claude-plugin/marketplace.json"
MANIFEST = ".claude-plugin/plugin.json"


def _files(name: str) -> dict[str, str]:
    return {
        "commands/plan.md": "---\ndescription: Plan\n---\nLaunch the planner agent; write "
        "plan.md.\n",
        "agents/planner.md": "---\nname: planner\ndescription: plans\n---\nPlan carefully.\n",
        "commands/build.md": "---\ndescription: Build\n---\nRead plan.md; with the build-kit "
        "skill write build.md.\n",
        "skills/build-kit/SKILL.md": "---\nname: build-kit\ndescription: kit\n---\nSee "
        "reference.md.\n",
        "skills/build-kit/reference.md": "Reference.\n",
        "commands/review.md": "---\ndescription: Review\n---\nRead build.md; fill "
        "templates/review-template.md into review.md.\n",
        "templates/review-template.md": "# Review\n",
        "README.md": f"# {name}\n\nA plugin.\n",
        "LICENSE": "MIT License\n",
        "CHANGELOG.md": "## 1.0.0\n",
        MANIFEST: json.dumps({"name": name, "version": "1.0.0"}, indent=2) + "\n",
    }


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


class Marketplace:
    """The generated repository and what each commit truly changed, per plugin."""

    def __init__(self, repo: Path, plugins: int, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        self.names = [f"plugin-{i}" for i in range(plugins)]
        self.extra = 0  # plugins added later: no suite, other plugins' business
        self.doc: dict[str, object] = {
            "name": "bench-marketplace",
            "owner": {"name": "bench"},
            "metadata": {"description": "generated", "version": "1.0.0"},
            "plugins": [self._entry(name) for name in self.names],
        }
        self.truth: list[dict[str, int | None]] = []  # per commit: plugin -> ideal stage

    @staticmethod
    def _entry(name: str) -> dict[str, object]:
        return {
            "name": name,
            "source": f"./plugins/{name}",
            "description": f"{name} does things",
            "version": "1.0.0",
            "category": "development",
        }

    def write(self, path: str, text: str) -> None:
        target = self.repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    def _market(self) -> None:
        self.write(MARKET, json.dumps(self.doc, indent=2) + "\n")

    def _entry_of(self, name: str) -> dict[str, object]:
        plugins = self.doc["plugins"]
        assert isinstance(plugins, list)
        return next(p for p in plugins if p["name"] == name)

    def build(self) -> None:
        _git(self.repo, "init", "-q", "-b", "main")
        for name in self.names:
            for path, text in _files(name).items():
                self.write(f"plugins/{name}/{path}", text)
        self.write("README.md", "# The marketplace\n")
        self._market()
        self.commit("marketplace", {})

    def commit(self, message: str, truth: dict[str, int | None]) -> None:
        _git(self.repo, "add", "-A")
        _git(self.repo, "commit", "-q", "--allow-empty", "-m", message)
        self.truth.append(truth)

    def _bump(self, name: str) -> None:
        entry = self._entry_of(name)
        major, minor, patch = map(int, str(entry["version"]).split("."))
        version = f"{major}.{minor}.{patch + 1}"
        entry["version"] = version
        self.write(
            f"plugins/{name}/{MANIFEST}",
            json.dumps({"name": name, "version": version}, indent=2) + "\n",
        )
        self._market()

    def _touch(self, name: str, path: str) -> None:
        target = self.repo / "plugins" / name / path
        target.write_text(target.read_text() + f"edit {self.rng.random():.6f}\n")

    def step(self) -> None:
        """One commit of the mix; records each plugin's ideal stage for it."""
        rng, names = self.rng, self.names
        name = rng.choice(names)
        roll = rng.random()
        code = [p for p, stage in TRUTH.items() if stage is not None]
        if roll < 0.25:
            self._bump(name)
            self.commit(f"{name}: bump version", {})
        elif roll < 0.45:
            path = rng.choice(code)
            self._touch(name, path)
            self.commit(f"{name}: change {path}", {name: TRUTH[path]})
        elif roll < 0.55:
            path = rng.choice(code)
            self._touch(name, path)
            self._bump(name)
            self.commit(f"{name}: change {path} and bump", {name: TRUTH[path]})
        elif roll < 0.65:
            self._touch(name, "README.md")
            self.commit(f"{name}: README", {})
        elif roll < 0.70:
            self._touch(name, rng.choice(("CHANGELOG.md", "LICENSE")))
            self.commit(f"{name}: changelog or licence", {})
        elif roll < 0.75:
            self._entry_of(name)["description"] = f"{name}, described anew {rng.random():.4f}"
            self._market()
            self.commit(f"{name}: describe", {})
        elif roll < 0.78:
            # The CLI's schema: shown in UI, "not used for namespacing or lookup".
            self._entry_of(name)["displayName"] = f"{name.title()} {rng.randrange(100)}"
            self._market()
            self.commit(f"{name}: display name", {})
        elif roll < 0.80:
            self.write("README.md", f"# The marketplace\n\n{rng.random()}\n")
            self.commit("top README", {})
        elif roll < 0.83:
            # An old name now loading this plugin (claude-plugins-official extends its
            # `renames` map so): the loader follows it to this plugin, no other.
            renames = self.doc.setdefault("renames", {})
            assert isinstance(renames, dict)
            renames[f"{name}-old-{len(renames)}"] = name
            self._market()
            self.commit(f"{name}: renames", {name: 1})
        elif roll < 0.88:
            new = f"added-{self.extra}"
            self.extra += 1
            for path, text in _files(new).items():
                self.write(f"plugins/{new}/{path}", text)
            plugins = self.doc["plugins"]
            assert isinstance(plugins, list)
            plugins.append(self._entry(new))
            self._market()
            self.commit(f"add {new}", {})
        elif roll < 0.93:
            # What loads the plugin changes with no file under its folder.
            entry = self._entry_of(name)
            entry["strict"] = not entry.get("strict", True)
            self._market()
            self.commit(f"{name}: strict", {name: 1})
        elif roll < 0.97:
            pair = rng.sample(names, 2)
            path = rng.choice(code)
            for one in pair:
                self._touch(one, path)
            self.commit(f"{' and '.join(pair)}: change {path}", dict.fromkeys(pair, TRUTH[path]))
        else:
            suite = self.repo / "evals" / name / "ci-evals.yaml"
            text = suite.read_text()
            was, now = ("5.0", "5.5") if "budget_usd: 5.0" in text else ("5.5", "5.0")
            suite.write_text(text.replace(f"budget_usd: {was}", f"budget_usd: {now}", 1))
            self.commit(f"{name}: suite budget", {name: 1})


def draft(repo: Path, names: list[str]) -> None:
    """`ci-evals init --plugin NAME` per plugin, in `evals/NAME/`, as a user would."""
    for name in names:
        folder = repo / "evals" / name
        folder.mkdir(parents=True)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "ci_evals",
                "init",
                "../..",
                "--plugin",
                name,
                "--into",
                ".",
                "--stages",
                ",".join(STAGES),
            ],
            cwd=folder,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"init --plugin {name} failed: {proc.stderr.strip()}")


def before_map(drafted: Path, target: Path) -> None:
    """The map as `init` drafted it before: the marketplace file global, no
    `ignore_metadata`, documents at stage 1."""
    data = yaml.safe_load(drafted.read_text())
    market = data.pop("marketplace", None)
    data.pop("ignore_metadata", None)
    if market is not None:
        data["global"].append(market["file"])
    for entry in data["entries"]:
        if entry["stage"] == "none":
            entry["stage"] = data["stages"][0]
    target.write_text(yaml.safe_dump(data, sort_keys=False))


@dataclass
class Tally:
    runs: int = 0
    below_ideal: list[str] = field(default_factory=list)
    above_paths: list[str] = field(default_factory=list)  # answers running more than on.paths


def replay(
    repo: Path,
    maps: dict[str, dict[str, StageMap]],
    commits: list[str],
    ideal: Callable[[int, str], int | None] | None,
) -> dict[str, int | Tally]:
    """Every plugin's answer for every commit (first parent to commit), tallied."""
    out: dict[str, int | Tally] = {
        "everything": 0,
        "on.paths": 0,
        "ideal": 0,
        "answers": 0,
        "on.paths below ideal": 0,
        "plugin absent": 0,
    }
    tallies = {kind: Tally() for kind in next(iter(maps.values()))}
    matchers = {
        id(stage_map): GlobMatcher(stage_map.selection_globs)
        for kinds in maps.values()
        for stage_map in kinds.values()
    }
    for position, commit in enumerate(commits):
        with git.shared_reads():  # one commit's reads, shared by every plugin's map
            _replay_commit(repo, maps, commit, position, ideal, out, tallies, matchers)
    out.update(tallies)
    return out


def _replay_commit(
    repo: Path,
    maps: dict[str, dict[str, StageMap]],
    commit: str,
    position: int,
    ideal: Callable[[int, str], int | None] | None,
    out: dict[str, int | Tally],
    tallies: dict[str, Tally],
    matchers: dict[int, GlobMatcher],
) -> None:
    parent = f"{commit}^1"
    # What `compute-stage PARENT --head COMMIT` does, with the range and the
    # diff computed once for every map (`diff.decide_change`).
    change = diff_range.resolve(repo, parent, commit, deepen_tries=0)
    assert isinstance(change, diff_range.Range), change
    changed = [path for chunk in diff_range.diff_chunks(repo, change) for path in chunk]
    present = _present(repo, commit, [next(iter(k.values())).root for k in maps.values()])
    for name, kinds in maps.items():
        n = len(next(iter(kinds.values())).stages)
        root = next(iter(kinds.values())).root + "/"
        if root != "/" and root[:-1] not in present:
            # Before the plugin's folder exists (a public history replayed with
            # today's maps) no suite of it exists to ask: counted for none.
            out["plugin absent"] += 1  # type: ignore[operator]
            continue
        out["everything"] += n  # type: ignore[operator]
        if any(path.startswith(root) for path in changed):
            out["on.paths"] += n  # type: ignore[operator]
        best = None if ideal is None else ideal(position, name)
        ideal_runs = 0 if best is None else n - best + 1
        out["ideal"] += ideal_runs  # type: ignore[operator]
        paths_runs = n if any(path.startswith(root) for path in changed) else 0
        if paths_runs < ideal_runs:  # a change on.paths cannot see (entry, suite)
            out["on.paths below ideal"] += 1  # type: ignore[operator]
        for kind, stage_map in kinds.items():
            chosen = diff_range.decide_change(
                repo, stage_map, change, [changed], matcher=matchers[id(stage_map)]
            )
            runs = 0 if chosen.from_stage is None else n - chosen.from_stage + 1
            tallies[kind].runs += runs
            if runs < ideal_runs:
                tallies[kind].below_ideal.append(f"{commit[:10]} {name}: {chosen.detail}")
            if runs > paths_runs:
                tallies[kind].above_paths.append(
                    f"{commit[:10]} {name}: {runs} runs ({chosen.reason}): {chosen.detail}"
                )
            out["answers"] += 1  # type: ignore[operator]


def _present(repo: Path, commit: str, roots: list[str]) -> set[str]:
    """The plugin folders among `roots` that are folders at `commit` (one ls-tree)."""
    specs = [f":(literal){root}" for root in roots if root]
    if not specs:
        return set()
    listed = _git(repo, "ls-tree", "-z", "--full-tree", commit, "--", *specs)
    entries = (entry.split("\t", 1) for entry in listed.split("\0") if entry)
    return {path for meta, path in entries if meta.split(" ")[1] == "tree"}


def report(out: dict[str, int | Tally], kinds: list[str], show: int = 0) -> bool:
    everything = out["everything"]
    on_paths = out["on.paths"]
    assert isinstance(everything, int) and isinstance(on_paths, int)
    print(
        f"answers: {out['answers']} compute-stage answers "
        f"({out['plugin absent']} (commit, plugin) pairs before the plugin's folder existed: none)"
    )
    print(f"stage runs: everything {everything}, on.paths {on_paths}, ideal {out['ideal']}")
    if out["ideal"]:
        print(f"  on.paths ran less than the ideal on {out['on.paths below ideal']} answer(s)")
    ok = True
    for kind in kinds:
        tally = out[kind]
        assert isinstance(tally, Tally)
        saved = 1 - tally.runs / everything if everything else 0.0
        ratio = tally.runs / on_paths if on_paths else float("inf")
        print(
            f"  {kind:>14}: {tally.runs} stage runs, saved {saved:.1%} of everything, "
            f"{ratio:.2f}x on.paths, below the ideal on {len(tally.below_ideal)} answer(s)"
        )
        for line in tally.below_ideal[:5]:
            print(f"      below ideal: {line}")
        for line in tally.above_paths[:show]:
            print(f"      above on.paths: {line}")
    drafted = out["drafted"]
    assert isinstance(drafted, Tally)
    if on_paths and drafted.runs > 1.1 * on_paths:
        print(f"NOT MET: drafted {drafted.runs} > 1.1 x on.paths {on_paths}")
        ok = False
    if drafted.below_ideal and "ideal" in out and out["ideal"]:
        print("NOT MET: the drafted maps ran less than the ideal")
        ok = False
    if ok:
        print("met: drafted <= 1.1x on.paths, never below the ideal")
    return ok


def generated(args: argparse.Namespace) -> int:
    work = Path(args.repo) if args.repo else Path(tempfile.mkdtemp(prefix="bench-history-"))
    if work.exists() and any(work.iterdir()):
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    market = Marketplace(work, args.plugins, rng)
    market.build()
    draft(work, market.names)
    market.commit("evals", {})
    start = time.perf_counter()
    for _ in range(args.commits):
        market.step()
    took = time.perf_counter() - start
    print(f"history: {args.commits} commits, {args.plugins} plugins ({took:.1f} s)")
    commits = _git(work, "rev-list", "--first-parent", "--reverse", "HEAD").split()[2:]
    truth = market.truth[2:]
    maps = {}
    for name in market.names:
        drafted = work / "evals" / name / "stage_map.yaml"
        before_map(drafted, drafted.with_name("stage_map_before.yaml"))
        maps[name] = {
            "drafted": load_stage_map(drafted, warn=False),
            "drafted before": load_stage_map(
                drafted.with_name("stage_map_before.yaml"), warn=False
            ),
        }
    start = time.perf_counter()
    out = replay(work, maps, commits, lambda i, name: truth[i].get(name))
    print(f"replayed in {time.perf_counter() - start:.1f} s")
    ok = report(out, ["drafted before", "drafted"])
    if not args.repo:
        shutil.rmtree(work)
    return 0 if ok else 1


def public(args: argparse.Namespace) -> int:
    """A fetched marketplace (a clone, never committed here): draft every plugin that
    drafts, replay its whole first-parent history. No ideal is known there."""
    repo = Path(args.public).resolve()
    doc = json.loads((repo / MARKET).read_text())
    maps: dict[str, dict[str, StageMap]] = {}
    refused = 0
    for entry in doc.get("plugins", []):
        name = entry.get("name")
        if not isinstance(name, str) or not isinstance(entry.get("source"), str):
            continue
        folder = repo / ".ci-evals-bench" / name
        if not (folder / "stage_map.yaml").exists():
            folder.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ci_evals",
                    "init",
                    "../..",
                    "--plugin",
                    name,
                    "--into",
                    ".",
                ],
                cwd=folder,
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                refused += 1
                shutil.rmtree(folder)
                continue
        drafted = folder / "stage_map.yaml"
        before_map(drafted, folder / "stage_map_before.yaml")
        try:
            maps[name] = {
                "drafted before": load_stage_map(folder / "stage_map_before.yaml", warn=False),
                "drafted": load_stage_map(drafted, warn=False),
            }
        except UserError as exc:  # a map that does not load is reported
            print(f"{name}: map does not load: {exc}")
    commits = _git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()[1:]
    if args.commits:
        commits = commits[-args.commits :]
    print(f"{repo.name}: {len(maps)} plugins drafted ({refused} refused), {len(commits)} commits")
    start = time.perf_counter()
    out = replay(repo, maps, commits, None)
    print(f"replayed in {time.perf_counter() - start:.1f} s")
    report(out, ["drafted before", "drafted"], args.show)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plugins", type=int, default=6)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo", help="build the repository here and keep it")
    parser.add_argument("--public", metavar="DIR", help="replay a fetched marketplace's history")
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        metavar="N",
        help="print N answers that ran more than on.paths",
    )
    args = parser.parse_args()
    os.environ.setdefault("CI_EVALS_NO_MAP_CACHE", "1")
    if args.public:
        if args.commits == 300:
            args.commits = 0  # the whole history
        return public(args)
    return generated(args)


if __name__ == "__main__":
    raise SystemExit(main())
