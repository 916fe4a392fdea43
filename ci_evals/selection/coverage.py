"""The coverage check: every staged plugin file belongs to a stage, every entry to a file.

A file under `root` that no entry covers would silently never trigger its
stage; an entry that matches no file is a typo or a leftover after a rename.
Both are found from the index (`git ls-files`, what the commit will contain),
never the work tree: an untracked scratch file is not the map's business, and a
file deleted but not yet staged is still part of the commit. Files that
`compute-stage` handles before matching (`global` and `fixtures`) need no entry;
a case map's entries must reach a case (`no_case`).

The run copies the plugin following its links and lays fixtures through linked
folders, so a staged link that resolves outside the repository or into `.git`
(`fs.copyable`) would carry that file to the agent: `leaving_link` finds it from
the index's links alone (one `git ls-files`; a linked folder is walked for the
links inside it), so the hook refuses what `run` would refuse without walking
the whole tree. What is reported, and how: docs/stage-map.md
(*`ci-evals check-coverage` and the pre-commit hook*).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile

from ci_evals import git
from ci_evals.fs.copyable import escape_problem, escaping_link
from ci_evals.selection.glob_syntax import is_literal
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import GlobalGlob, MapEntry, StageMap


@dataclass(frozen=True)
class CoverageReport:
    stage_map: StageMap
    checked: int  # staged files under root
    uncovered: tuple[str, ...]  # repo-relative paths, index order
    dead: tuple[MapEntry, ...]  # entries matching no staged file, map order
    dead_globals: tuple[GlobalGlob, ...] = ()  # wildcard globals matching no staged file
    # (entry, position in its `except:`) of each except glob that leaves out no staged
    # file its entry's glob matches: a typo, or a leftover after a rename.
    dead_excepts: tuple[tuple[MapEntry, int], ...] = ()
    # A case map's entries whose files reach no case: (entry, its field, what it names),
    # e.g. (entry, "cases[0]", "greet-*"); and a case file that cannot be read.
    no_case: tuple[tuple[MapEntry, str, str], ...] = ()
    unreadable_case: str | None = None

    @property
    def ok(self) -> bool:
        return not (
            self.uncovered
            or self.dead
            or self.dead_globals
            or self.dead_excepts
            or self.no_case
            or self.unreadable_case
        )


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
    matcher = GlobMatcher(stage_map.globs)
    dead_excepts: tuple[tuple[MapEntry, int], ...] = ()
    if any(e.excepts for e in stage_map.entries):
        uncovered, dead, dead_excepts = _unmatched_with_excepts(stage_map, matcher, relative)
    else:
        uncovered, dead = matcher.unmatched(relative)
    is_global = GlobMatcher(stage_map.global_paths).matches
    fixtures = stage_map.fixtures + "/" if stage_map.fixtures else None
    # The marketplace file `marketplace:` names is decided by comparing it: covered.
    compared = stage_map.marketplace.file if stage_map.marketplace is not None else None
    # A case map's eval folder is decided case by case (`selection.units`): covered.
    evals = stage_map.evals + "/" if stage_map.evals is not None else None
    no_case, unreadable = _no_case(stage_map) if evals is not None else ((), None)
    return CoverageReport(
        stage_map=stage_map,
        checked=len(relative),
        uncovered=tuple(
            path
            for path in (root + rel for rel in uncovered)
            if not (fixtures and path.startswith(fixtures))
            and not (evals and path.startswith(evals))
            and not is_global(path)
            and path != compared
        ),
        dead=tuple(stage_map.entries[i] for i in dead),
        dead_globals=_dead_globals(stage_map, staged),
        dead_excepts=dead_excepts,
        no_case=no_case,
        unreadable_case=unreadable,
    )


def _no_case(stage_map: StageMap) -> tuple[tuple[tuple[MapEntry, str, str], ...], str | None]:
    """Each `cases:` glob and `tags:` tag of a case map that no case of the work
    tree's eval folder has, and why a case cannot be read (if one cannot)."""
    from ci_evals.selection.case_index import read_cases  # noqa: PLC0415 - case maps only
    from ci_evals.selection.units import case_glob  # noqa: PLC0415

    assert stage_map.evals is not None
    index = read_cases(stage_map.repo_root, stage_map.evals)
    found: list[tuple[MapEntry, str, str]] = []
    for entry in stage_map.entries:
        for n, pattern in enumerate(entry.cases):
            if not any(case_glob(pattern).fullmatch(c.name) for c in index.cases):
                found.append((entry, f"cases[{n}]", pattern))
        for n, tag in enumerate(entry.tags):
            if not any(tag in c.tags for c in index.cases):
                found.append((entry, f"tags[{n}]", tag))
    return tuple(found), index.problem


def _unmatched_with_excepts(
    stage_map: StageMap, matcher: GlobMatcher, paths: Sequence[str]
) -> tuple[list[str], list[int], tuple[tuple[MapEntry, int], ...]]:
    """`unmatched` when entries have `except:` globs: the paths no except glob matches
    take the usual batch; each other path is decided alone (its entries less those
    that leave it out). Also the except globs that leave out nothing."""
    excepted = [(e.index, n) for e in stage_map.entries for n in range(len(e.excepts))]
    excepts = GlobMatcher([g for e in stage_map.entries for g in e.excepts])
    hits = excepts.matches_many(paths)
    plain = [path for path, hit in zip(paths, hits, strict=True) if not hit]
    uncovered_plain, dead_plain = matcher.unmatched(plain)
    dead = set(dead_plain)
    uncovered = set(uncovered_plain)
    used: set[int] = set()
    for path, hit in zip(paths, hits, strict=True):
        if not hit:
            continue
        found = set(matcher.matches(path))
        left_out = set()
        for i in hit:
            entry = excepted[i][0]
            if entry in found:
                used.add(i)
                left_out.add(entry)
        kept = found - left_out
        dead -= kept
        if not kept:
            uncovered.add(path)
    return (
        [path for path in paths if path in uncovered],
        sorted(dead),
        tuple(
            (stage_map.entries[entry], n) for i, (entry, n) in enumerate(excepted) if i not in used
        ),
    )


def _dead_globals(stage_map: StageMap, staged: Sequence[str] | None) -> tuple[GlobalGlob, ...]:
    """The wildcard globals that match no staged file (only their own folders are listed)."""
    wildcards = [g for g in stage_map.global_globs if g.wildcard]
    if not wildcards:
        return ()
    if staged is None:
        leads = {_lead(g.path) for g in wildcards}
        # Each file once: a folder inside another listed one is left to that one.
        outer = [f for f in leads if not any(o != f and _inside(f, o) for o in leads)]
        staged = []
        for folder in sorted(outer):
            prefix = folder + "/" if folder else ""
            staged += [prefix + p for p in git.ls_files_under(stage_map.repo_root, folder)]
    _, dead = GlobMatcher([g.path for g in wildcards]).unmatched(staged)
    return tuple(wildcards[i] for i in dead)


def _lead(glob: str) -> str:
    """The literal folders a repo-relative glob starts with: only paths under them can match."""
    segments = glob.lstrip("/").split("/")[:-1] if "/" in glob.rstrip("/") else []
    return "/".join(takewhile(is_literal, segments))


def _inside(folder: str, other: str) -> bool:
    return not other or folder.startswith(other + "/")


def leaving_link(stage_map: StageMap) -> tuple[str, str] | None:
    """(path, what is wrong) for the first staged link under root or fixtures that
    resolves outside the repository or into its `.git` (the map itself: at load)."""
    within = os.path.realpath(stage_map.repo_root)
    folders = [stage_map.root] + ([stage_map.fixtures] if stage_map.fixtures else [])
    for link in git.index_links(stage_map.repo_root, folders):
        path = os.path.join(stage_map.repo_root, link)
        if not os.path.lexists(path):
            continue  # deleted, not yet staged: the run never sees it
        problem = escape_problem(path, within)
        if problem is not None:
            return link, problem
        if os.path.isdir(path) and (found := escaping_link(path, within)) is not None:
            return found
    return None
