"""The coverage check: every staged plugin file belongs to a stage, every entry to a file.

A file under `root` that no entry covers would silently never trigger its
stage; an entry that matches no file is a typo or a leftover after a rename.
Both are found from the index (`git ls-files`, what the commit will contain),
never the work tree: an untracked scratch file is not the map's business, and a
file deleted but not yet staged is still part of the commit.

Files that `compute-stage` handles before matching — the `global` paths and
everything under `fixtures` — need no entry (an entry matching only them is
not dead, though: it matches a file).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ci_evals import git
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import Entry, StageMap


@dataclass(frozen=True)
class CoverageReport:
    stage_map: StageMap
    checked: int  # staged files under root
    uncovered: tuple[str, ...]  # repo-relative paths, index order
    dead: tuple[Entry, ...]  # entries matching no staged file, map order

    @property
    def ok(self) -> bool:
        return not self.uncovered and not self.dead


def check_coverage(stage_map: StageMap, staged: Sequence[str] | None = None) -> CoverageReport:
    """Match the staged files under `root` against the map (`staged` defaults to the index).

    An entry is dead when it matches no staged file under root at all; a file
    is uncovered when no entry matches it and it is not global or a fixture.
    """
    root = stage_map.root + "/" if stage_map.root else ""
    if staged is None:
        relative = git.ls_files_under(stage_map.repo_root, stage_map.root)
    else:
        relative = [path[len(root) :] for path in staged if path.startswith(root)]
    uncovered, dead = GlobMatcher(stage_map.globs).unmatched(relative)
    exempt = set(stage_map.global_paths)
    folders = [*stage_map.global_paths, *([stage_map.fixtures] if stage_map.fixtures else [])]
    exempt_under = tuple(folder + "/" for folder in folders)
    return CoverageReport(
        stage_map=stage_map,
        checked=len(relative),
        uncovered=tuple(
            path
            for path in (root + rel for rel in uncovered)
            if path not in exempt and not path.startswith(exempt_under)
        ),
        dead=tuple(stage_map.entries[i] for i in dead),
    )
