"""Generate a large plugin repository and stage map for the selection benchmarks.

Shared by `bench_selection.py` (matching, check-coverage, the hook) and the
compute-stage benchmark. Deterministic for a given seed.

The repository (built with `git fast-import`, so 100,000 files take seconds):
- `plugin/area_NN/mod_MM/...` files of several kinds and depths (`.md`,
  `.py`, `.json`, `.txt`, `README.md`, `tests/`, `deep/x/y/`), a few with
  spaces and non-ASCII names;
- `stage_map.yaml` at the top with `root: plugin`, 5 stages and N entries:
  exact paths, `dir/**` prefixes, `*.ext` anywhere, bare names (`README.md`),
  deep wildcards (`area_03/**/*.py`, `area_03/mod_*/tests/**`, ...). Every
  file is covered and every entry matches at least one file. Other map
  shapes (`SHAPES`, `--shape`) add what makes matching slow or the answer
  late: `wildcards` adds `**/`-anchored wildcard names active in every
  folder (`**/test_1*`, `**/tests/test_2*`, ...) at stages 2..5 (one regex
  call per file unless pruned); `late` is `wildcards` with no stage-1 entry
  but one exact path at stage 1, the last file in path order (the minimum is
  found at the very end); `late-wildcard` the same with that stage-1 entry a
  wildcard name active everywhere (`**/test_95394*`), which no bound can
  prune;
- two commits: branch `base` (every file at version 1) and branch `main`
  (every plugin file changed), so `git diff base...main` lists every file.
  The index holds `main`; only the folder `plugin/` exists on disk unless
  `checkout=True` (the index is what `check-coverage` reads).

    python benchmarks/gen_repo.py /tmp/big --files 100000 --entries 1000
"""

from __future__ import annotations

import argparse
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

STAGES = ("research-company", "research-product", "plan-lab", "plan-chapter", "generate-chapter")
ROOT = "plugin"
_KINDS = (
    ("notes_{i}.md", 20),
    ("src/impl_{i}.py", 25),
    ("data/table_{i}.json", 15),
    ("docs/page_{i}.txt", 10),
    ("tests/test_{i}.py", 10),
    ("deep/x/y/leaf_{i}.py", 8),
    ("README.md", 4),
    ("assets/img_{i}.json", 6),
    ("notes café {i}.md", 2),
)
_EXTENSIONS = (".md", ".json", ".txt")


@dataclass(frozen=True)
class GeneratedRepo:
    path: Path  # work-tree root
    map_path: Path  # <path>/stage_map.yaml
    root: str  # "plugin"
    files: tuple[str, ...]  # plugin files, root-relative POSIX
    entries: tuple[tuple[str, int], ...]  # (glob, stage) as written in the map
    base: str  # commit sha of branch `base`
    head: str  # commit sha of branch `main`


def plugin_paths(n_files: int, seed: int = 0) -> list[str]:
    """`n_files` distinct root-relative paths, in a tree of areas and modules."""
    rng = random.Random(seed)
    areas = max(1, round((n_files / 50) ** 0.5 * 1.1))
    modules = max(1, n_files // (50 * areas) + 1)
    weights = [w for _, w in _KINDS]
    paths: set[str] = set()
    counter = 0
    while len(paths) < n_files:
        area = rng.randrange(areas)
        module = rng.randrange(modules)
        (template,) = rng.choices([k for k, _ in _KINDS], weights)
        counter += 1
        paths.add(f"area_{area:02d}/mod_{module:02d}/" + template.format(i=counter))
    return sorted(paths)


SHAPES = ("bench", "wildcards", "late", "late-wildcard")
# The names the generated files start with (see `_KINDS`).
_STEMS = ("notes_", "impl_", "table_", "page_", "test_", "leaf_", "img_")


def wildcard_entries() -> list[tuple[str, int]]:
    """`**/`-anchored wildcard names, active in every folder (or every `tests/`), stages 2..5."""
    entries: list[tuple[str, int]] = []
    for digit in range(1, 10):
        for n, stem in enumerate(_STEMS):
            entries.append((f"**/{stem}{digit}*", 2 + (digit + n) % 4))
        entries.append((f"**/tests/test_{digit}*", 2 + digit % 4))
    return entries


def shaped_entries(
    paths: list[str], n_entries: int, shape: str = "bench", seed: int = 0
) -> list[tuple[str, int]]:
    """`map_entries`, then the changes `shape` names (see the module docstring)."""
    entries = map_entries(paths, n_entries, seed)
    if shape == "bench":
        return entries
    entries += wildcard_entries()
    if shape == "wildcards":
        return entries
    last = paths[-1]  # the last file in path order (git's, for these ASCII names)
    entries = [(glob, max(stage, 2)) for glob, stage in entries]
    if shape == "late":
        return [*entries, (last, 1)]
    if shape == "late-wildcard":
        name = last.rsplit("/", 1)[1]
        return [*entries, (f"**/{name.rsplit('.', 1)[0]}*", 1)]
    raise ValueError(f"unknown map shape {shape!r}; one of {', '.join(SHAPES)}")


def map_entries(paths: list[str], n_entries: int, seed: int = 0) -> list[tuple[str, int]]:
    """`n_entries` (glob, stage) pairs covering every path, each matching some path."""
    rng = random.Random(seed + 1)
    stage = lambda: rng.randint(1, len(STAGES))  # noqa: E731
    areas = sorted({p.split("/", 1)[0] for p in paths})
    modules = sorted({"/".join(p.split("/")[:2]) for p in paths})
    entries: list[tuple[str, int]] = []
    # Coverage by construction: every extension anywhere, every .py per area.
    entries += [(f"*{ext}", stage()) for ext in _EXTENSIONS]
    entries += [("README.md", stage())]
    entries += [(f"{area}/**/*.py", stage()) for area in areas]
    # Deep wildcards.
    for area in areas[: n_entries // 20]:
        entries.append((f"{area}/mod_*/tests/**", stage()))
        entries.append((f"{area}/*/deep/*/y/*.py", stage()))
    entries.append(("**/deep/x/", stage()))
    entries.append(("mod_0[0-4]/", stage()))
    remaining = max(0, n_entries - len(entries))
    prefixes = rng.sample(modules, min(len(modules), remaining * 2 // 5))
    entries += [(f"{module}/**", stage()) for module in prefixes]
    remaining = max(0, n_entries - len(entries))
    exact = rng.sample(paths, min(len(paths), remaining))
    entries += [(path, stage()) for path in exact]
    return entries[:n_entries]


def stage_map_yaml(entries: list[tuple[str, int]]) -> str:
    lines = [
        "version: 1",
        f"root: {ROOT}",
        "stages: [" + ", ".join(STAGES) + "]",
        "entries:",
    ]
    lines += [f'  - {{ glob: "{glob}", stage: {stage} }}' for glob, stage in entries]
    lines.append("global: [ci-evals.yaml]")
    return "\n".join(lines) + "\n"


def _fast_import_stream(files: list[str], map_text: str) -> bytes:
    out: list[bytes] = []

    def commit(ref: str, message: str, version: int, parent: str | None) -> None:
        msg = message.encode()
        out.append(f"commit {ref}\n".encode())
        out.append(b"committer Bench <bench@example.com> 1700000000 +0000\n")
        out.append(b"data %d\n%s\n" % (len(msg), msg))
        if parent:
            out.append(f"from {parent}\n".encode())
        if version == 1:
            data = map_text.encode()
            out.append(b"M 100644 inline stage_map.yaml\ndata %d\n%s\n" % (len(data), data))
        for path in files:
            body = f"{path} v{version}\n".encode()
            quoted = '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (quoted.encode(), len(body), body))

    commit("refs/heads/base", "base", 1, None)
    commit("refs/heads/main", "change every plugin file", 2, "refs/heads/base")
    out.append(b"done\n")
    return b"".join(out)


def build_repo(
    dest: Path,
    n_files: int = 100_000,
    n_entries: int = 1000,
    seed: int = 0,
    checkout: bool = False,
    shape: str = "bench",
) -> GeneratedRepo:
    """Create the repository at `dest` (which must not exist yet)."""
    files = plugin_paths(n_files, seed)
    entries = shaped_entries(files, n_entries, shape, seed)
    map_text = stage_map_yaml(entries)
    dest.mkdir(parents=True)
    git = ["git", "-C", str(dest)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    stream = _fast_import_stream([f"{ROOT}/{p}" for p in files], map_text)
    subprocess.run([*git, "fast-import", "--quiet", "--done"], input=stream, check=True)
    if checkout:
        subprocess.run([*git, "checkout", "-q", "-f", "main"], check=True)
    else:
        subprocess.run([*git, "read-tree", "main"], check=True)
        (dest / ROOT).mkdir()
        (dest / "stage_map.yaml").write_text(map_text, encoding="utf-8")

    def sha(ref: str) -> str:
        result = subprocess.run([*git, "rev-parse", ref], capture_output=True, check=True)
        return result.stdout.decode().strip()

    return GeneratedRepo(
        path=dest,
        map_path=dest / "stage_map.yaml",
        root=ROOT,
        files=tuple(files),
        entries=tuple(entries),
        base=sha("base"),
        head=sha("main"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkout", action="store_true")
    parser.add_argument("--shape", choices=SHAPES, default="bench", help="the map's shape")
    args = parser.parse_args()
    repo = build_repo(args.dest, args.files, args.entries, args.seed, args.checkout, args.shape)
    print(f"{repo.path}: {len(repo.files)} files, {len(repo.entries)} entries")
    print(f"base {repo.base}  main {repo.head}")


if __name__ == "__main__":
    main()
