"""The coverage check: every staged plugin file belongs to a stage, every entry to a file.

A file under `root` that no entry covers would silently never trigger its
stage; an entry that matches no file is a typo or a leftover after a rename.
Both are found from the index (`git ls-files`, what the commit will contain),
never the work tree: an untracked scratch file is not the map's business, and a
file deleted but not yet staged is still part of the commit.

Files that `compute-stage` handles before matching — the `global` paths and
everything under `fixtures` — need no entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ci_evals import git
from ci_evals.matcher import GlobMatcher
from ci_evals.stage_map import Entry, StageMap


@dataclass(frozen=True)
class CoverageReport:
    stage_map: StageMap
    checked: int  # files under root that needed an entry
    uncovered: tuple[str, ...]  # repo-relative paths, index order
    dead: tuple[Entry, ...]  # entries matching no staged file, map order

    @property
    def ok(self) -> bool:
        return not self.uncovered and not self.dead


def check_coverage(stage_map: StageMap, staged: Sequence[str] | None = None) -> CoverageReport:
    """Match the staged files under `root` against the map (`staged` defaults to the index)."""
    paths = git.ls_files(stage_map.repo_root) if staged is None else staged
    # Global files and fixtures are handled by compute-stage without an entry.
    root = stage_map.root + "/" if stage_map.root else ""
    folders = [*stage_map.global_paths, *([stage_map.fixtures] if stage_map.fixtures else [])]
    exempt = {f for f in stage_map.global_paths if f.startswith(root)}
    exempt_under = tuple(f + "/" for f in folders if (f + "/").startswith(root))
    cut = len(root)
    if root and any(root.startswith(f + "/") for f in folders):
        relative: list[str] = []  # root lies inside a global or fixtures folder
    elif exempt or exempt_under:
        relative = [
            path[cut:]
            for path in paths
            if path.startswith(root) and path not in exempt and not path.startswith(exempt_under)
        ]
    else:  # the usual case: nothing exempt lies under root (100,000 paths: ~10 ms saved)
        relative = [path[cut:] for path in paths if path.startswith(root)]
    uncovered, dead = GlobMatcher(stage_map.globs).unmatched(relative)
    return CoverageReport(
        stage_map=stage_map,
        checked=len(relative),
        uncovered=tuple(root + rel for rel in uncovered),
        dead=tuple(stage_map.entries[i] for i in dead),
    )
