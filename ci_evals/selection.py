"""Which stage a change can affect: the lowest one any changed file touches.

Two halves. `select()` is the pure decision: changed paths in, a `Selection`
out, no git. `compute()` finds those paths for BASE...HEAD — the diff from the
*merge base*, never a two-dot diff — and falls back to stage 1 ("run
everything") whenever the range cannot be known exactly: a base that does not
resolve, the all-zeros SHA of a new branch, no merge base (also a merge base
sitting on a shallow clone's boundary, which is a guess, not an answer —
unless it is BASE or HEAD itself, which visible edges prove).

Rules for one changed path, repo-relative:
- a `global` path (or a path inside a global folder) -> stage 1 (`global-file`);
- a path under `fixtures/<k>-*/` -> stage k+1 (`fixture-changed`): fixture k is
  the curated output of stage k and is what stage k+1 starts from. A fixture
  path whose k+1 is not a stage, or that is not inside a `<k>-...` folder,
  fails closed to stage 1;
- a path under `root` -> the lowest stage of *every* entry that matches it
  (`matched`), or stage 1 when no entry covers it (`unmatched-file`);
- anything else is ignored (stage None).
A path can fall under several rules (a fixtures folder inside the plugin); the
lowest stage wins. Over all paths the answer is the minimum stage; the path
that decided it is the one with the lowest (stage, rule rank, path), where the
rule rank is global-file < unmatched-file < fixture-changed < matched: among
equal stages the broadest cause is reported, because it is the one that would
still force that stage if the map's entries changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.matcher import GlobMatcher

if TYPE_CHECKING:
    from ci_evals.stage_map import StageMap

# Reason codes (the `reason` of `--json` and of the `reason` output).
MATCHED = "matched"
UNMATCHED_FILE = "unmatched-file"
GLOBAL_FILE = "global-file"
FIXTURE_CHANGED = "fixture-changed"
BASE_MISSING = "base-missing"
BASE_ZERO_SHA = "base-zero-sha"
NO_MERGE_BASE = "no-merge-base"
NO_RELEVANT_CHANGE = "no-relevant-change"
BASE_EQUALS_HEAD = "base-equals-head"
# Not a reason for the whole selection: the rule of a path that is ignored.
IGNORED = "ignored"

REASONS = (
    MATCHED,
    UNMATCHED_FILE,
    GLOBAL_FILE,
    FIXTURE_CHANGED,
    BASE_MISSING,
    BASE_ZERO_SHA,
    NO_MERGE_BASE,
    NO_RELEVANT_CHANGE,
    BASE_EQUALS_HEAD,
)

_RULE_RANK = {GLOBAL_FILE: 0, UNMATCHED_FILE: 1, FIXTURE_CHANGED: 2, MATCHED: 3}

# `--deepen N` default: tries, each fetching twice as much as the last
# (50, 100, 200 commits). Only ever used on a shallow clone.
DEFAULT_DEEPEN_TRIES = 3
FIRST_DEEPEN_STEP = 50

_ZERO_SHA = re.compile(r"0{40}|0{64}")
_FIXTURE_FOLDER = re.compile(r"([0-9]+)-")


class Match(NamedTuple):
    """One changed path and what it means for the selection.

    A named tuple, not a dataclass: one is made per changed file, 100,000 on a
    big diff, and tuples are several times cheaper to create.
    """

    path: str  # repo-relative, POSIX, exactly as git names it
    stage: int | None  # None: the path is ignored
    entry: str | None  # the deciding entry's glob, as written; None for the other rules
    rule: str  # matched / unmatched-file / global-file / fixture-changed / ignored
    why: str  # for a person: "entry 'skills/**' (stage_map.yaml:12)"

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "stage": self.stage, "entry": self.entry}


@dataclass(frozen=True)
class Selection:
    """The answer: run from `from_stage` (None: nothing to run), and why."""

    from_stage: int | None
    reason: str
    changed: int  # how many paths the diff listed (0 when it could not be computed)
    matches: tuple[Match, ...]  # one per changed path, in diff order
    detail: str = ""  # one line for a person: what decided it
    decided_by: Match | None = None
    base: str | None = None  # resolved SHAs, when known
    head: str | None = None
    merge_bases: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())  # what was tried on the way (deepening, event)

    def as_json(self) -> dict[str, object]:
        """The `--json` object: exactly these four keys."""
        return {
            "from_stage": self.from_stage,
            "reason": self.reason,
            "changed": self.changed,
            "matches": [m.as_json() for m in self.matches],
        }


def fallback(
    reason: str,
    detail: str,
    *,
    base: str | None = None,
    head: str | None = None,
    notes: Sequence[str] = (),
) -> Selection:
    """Run everything: the change could not be known exactly."""
    return Selection(1, reason, 0, (), detail, base=base, head=head, notes=tuple(notes))


# --- The pure decision --------------------------------------------------------


# Match's fields after the path, for the rules that do not depend on the path.
_Rest = tuple[int | None, str | None, str, str]
_GLOBAL: _Rest = (1, None, GLOBAL_FILE, "a global path: any change runs all")
_UNMATCHED: _Rest = (1, None, UNMATCHED_FILE, "under the plugin root; no entry covers it")
_IGNORED: _Rest = (None, None, IGNORED, "outside the plugin root; not global")
# `Match(...)` goes through a Python-level __new__; this is the C one.
_new_tuple = tuple.__new__


class _Rules:
    """The map's rules, indexed once for many paths.

    `match` runs once per changed file — 100,000 times on a big diff — so it
    works on precomputed tuples and ints rather than records.
    """

    def __init__(self, stage_map: StageMap, matcher: GlobMatcher) -> None:
        self.matches = matcher.matches
        entries = stage_map.entries
        count = max(len(entries), 1)
        self.count = count
        # One int per entry orders by (stage, position): the min over matches is
        # a C-level `min(map(...))` instead of a Python key function.
        self.rank_of = [e.stage * count + position for position, e in enumerate(entries)]
        self.rest_of: list[_Rest] = [
            (e.stage, e.glob, MATCHED, f"entry {e.glob!r} ({stage_map.display}:{e.line})")
            for e in entries
        ]
        root = stage_map.root
        self.root_prefix = root + "/" if root else ""
        self.globals = frozenset(stage_map.global_paths)
        # Most maps have no global path inside the plugin root: skip the check there.
        self.globals_in_root = any(
            not root or g == root or g.startswith(self.root_prefix) or root.startswith(g + "/")
            for g in self.globals
        )
        fixtures = stage_map.fixtures
        self.fixtures_prefix = None if fixtures is None else (fixtures + "/" if fixtures else "")
        self.stage_count = len(stage_map.stages)
        self.fixture_folders: dict[str, tuple[int, str]] = {}

    def match_all(self, paths: Sequence[str]) -> list[Match]:
        """`match` for each path, with the common case — a plain file under
        root — inlined on local variables (about twice as fast per path)."""
        fast = not self.globals_in_root and (
            self.fixtures_prefix is None
            or not (
                self.fixtures_prefix.startswith(self.root_prefix)
                or self.root_prefix.startswith(self.fixtures_prefix)
            )
        )
        prefix, cut, count = self.root_prefix, len(self.root_prefix), self.count
        matches, rest_of, rank_of = self.matches, self.rest_of, self.rank_of.__getitem__
        match, new = self.match, _new_tuple
        out: list[Match] = []
        append = out.append
        for path in paths:
            if fast and path.startswith(prefix):
                indices = matches(path[cut:])
                if len(indices) == 1:
                    rest = rest_of[indices[0]]
                elif indices:
                    rest = rest_of[min(map(rank_of, indices)) % count]
                else:
                    rest = _UNMATCHED
                append(new(Match, (path, *rest)))
            else:
                append(match(path))
        return out

    def match(self, path: str) -> Match:
        rest: _Rest | None = None
        if path.startswith(self.root_prefix):
            if self.globals_in_root and self._is_global(path):
                return _new_tuple(Match, (path, *_GLOBAL))  # nothing ranks lower
            indices = self.matches(path[len(self.root_prefix) :])
            if len(indices) == 1:
                rest = self.rest_of[indices[0]]
            elif indices:
                rest = self.rest_of[min(map(self.rank_of.__getitem__, indices)) % self.count]
            else:
                rest = _UNMATCHED
        elif self.globals and self._is_global(path):
            return _new_tuple(Match, (path, *_GLOBAL))
        if self.fixtures_prefix is not None and path.startswith(self.fixtures_prefix):
            stage, why = self._fixture(path[len(self.fixtures_prefix) :])
            # Lower stage wins; at the same stage a fixture outranks an entry
            # match and is outranked by an unmatched file (see the module doc).
            if rest is None or stage < rest[0] or (stage == rest[0] and rest[2] == MATCHED):  # type: ignore[operator]
                rest = (stage, None, FIXTURE_CHANGED, why)
        return _new_tuple(Match, (path, *(rest or _IGNORED)))

    def _is_global(self, path: str) -> bool:
        # The path itself, or any folder above it, listed as global.
        if path in self.globals:
            return True
        cut = path.rfind("/")
        while cut > 0:
            if path[:cut] in self.globals:
                return True
            cut = path.rfind("/", 0, cut)
        return False

    def _fixture(self, inside: str) -> tuple[int, str]:
        folder, slash, _ = inside.partition("/")
        if not slash:  # a file directly in the fixtures folder
            return (
                1,
                f"not inside a fixtures/<k>-<stage>/ folder ({inside!r}): unknown stage, runs all",
            )
        known = self.fixture_folders.get(folder)
        if known is None:
            known = self.fixture_folders[folder] = self._fixture_folder(folder)
        return known

    def _fixture_folder(self, folder: str) -> tuple[int, str]:
        found = _FIXTURE_FOLDER.match(folder)
        if found is None:
            return (
                1,
                f"not inside a fixtures/<k>-<stage>/ folder ({folder!r}): unknown stage, runs all",
            )
        k = int(found.group(1))
        if not 0 <= k < self.stage_count:
            return 1, (
                f"fixture {k} would feed stage {k + 1}, but the map has "
                f"{self.stage_count} stages: unknown consumer, runs all"
            )
        return k + 1, f"fixture {k} is what stage {k + 1} starts from"


def select(stage_map: StageMap, matcher: GlobMatcher, paths: Sequence[str]) -> Selection:
    """The lowest stage the changed `paths` (repo-relative) can affect."""
    matches = tuple(_Rules(stage_map, matcher).match_all(paths))
    best: Match | None = None
    best_key: tuple[int, int, str] | None = None
    for m in matches:
        stage = m.stage
        if stage is None or (best_key is not None and stage > best_key[0]):
            continue
        key = (stage, _RULE_RANK[m.rule], m.path)
        if best_key is None or key < best_key:
            best, best_key = m, key
    if best is None:
        detail = f"{len(paths)} changed path(s), none under the plugin root, global or a fixture"
        return Selection(None, NO_RELEVANT_CHANGE, len(paths), matches, detail)
    detail = f"{quote_path(best.path)}: {best.why}"
    return Selection(best.stage, best.rule, len(paths), matches, detail, decided_by=best)


def quote_path(path: str) -> str:
    """A path safe to print on one line: JSON-quoted when it has odd characters."""
    if path.isprintable() and '"' not in path and "\\" not in path:
        return path
    return json.dumps(path, ensure_ascii=False)


# --- The git side ---------------------------------------------------------------


def is_zero_sha(rev: str) -> bool:
    """The all-zeros SHA: GitHub's `before` of a push that created the branch."""
    return _ZERO_SHA.fullmatch(rev) is not None


class _Deepener:
    """A bounded budget of `git fetch --deepen` tries, used only on a shallow clone."""

    def __init__(self, repo: Path, tries: int) -> None:
        self.repo = repo
        self.left = max(tries, 0)
        self.step = FIRST_DEEPEN_STEP
        self.notes: list[str] = []
        self.failed = False

    def more(self) -> bool:
        """Fetch more history; False when out of tries, not shallow, or the fetch failed."""
        if self.left == 0 or self.failed or not git.is_shallow(self.repo):
            return False
        self.left -= 1
        result = git.deepen(self.repo, self.step)
        if result.returncode != 0:
            self.failed = True
            error = result.stderr.strip().splitlines()
            self.notes.append(
                f"git fetch --deepen={self.step} failed: {error[-1] if error else 'no message'}"
            )
            return False
        self.notes.append(f"deepened the shallow clone by {self.step} commits")
        self.step *= 2
        return True

    def summary(self) -> str:
        return "; ".join(self.notes)


@dataclass(frozen=True)
class Changes:
    """What git says changed from the merge base(s) of BASE and HEAD to HEAD."""

    base: str
    head: str
    merge_bases: tuple[str, ...]
    paths: list[str]  # repo-relative, diff order (sorted union after criss-cross merges)
    notes: tuple[str, ...] = ()


def changes(
    repo: Path, base: str, head: str = "HEAD", *, deepen_tries: int = DEFAULT_DEEPEN_TRIES
) -> Changes | Selection:
    """The git half of `compute`: the changed paths, or the Selection to use
    instead (a stage-1 fallback, or `none` when BASE is HEAD). Needs no map, so
    callers can run it while the map loads."""
    head_sha = git.rev_parse(repo, head)
    if head_sha is None:
        raise UserError(
            f"HEAD revision {head!r} names no commit in this repository",
            field="--head",
            hint="check out the commit to evaluate, or pass --head with a SHA or ref that exists",
        )
    if is_zero_sha(base):
        return fallback(
            BASE_ZERO_SHA,
            "BASE is the all-zeros SHA (a push that created the branch): nothing to compare with",
            head=head_sha,
        )
    deepener = _Deepener(repo, deepen_tries)
    base_sha = git.rev_parse(repo, base)
    while base_sha is None and deepener.more():
        base_sha = git.rev_parse(repo, base)
    if base_sha is None:
        detail = f"BASE {base!r} names no commit in this clone"
        return fallback(BASE_MISSING, _with(detail, deepener), head=head_sha, notes=deepener.notes)
    if base_sha == head_sha:
        return Selection(
            None,
            BASE_EQUALS_HEAD,
            0,
            (),
            "BASE and HEAD are the same commit: nothing changed",
            base=base_sha,
            head=head_sha,
        )
    bases, why_unknown = _merge_bases(repo, base_sha, head_sha, deepener)
    if not bases:
        return fallback(
            NO_MERGE_BASE,
            _with(why_unknown, deepener),
            base=base_sha,
            head=head_sha,
            notes=deepener.notes,
        )
    paths = _changed(repo, bases, head_sha)
    return Changes(base_sha, head_sha, tuple(bases), paths, tuple(deepener.notes))


def decide(stage_map: StageMap, matcher: GlobMatcher, found: Changes) -> Selection:
    """`select` over the changed paths, with the range recorded for `--explain`."""
    chosen = select(stage_map, matcher, found.paths)
    return replace(
        chosen,
        base=found.base,
        head=found.head,
        merge_bases=found.merge_bases,
        notes=found.notes,
    )


def compute(
    repo: Path,
    stage_map: StageMap,
    base: str,
    head: str = "HEAD",
    *,
    deepen_tries: int = DEFAULT_DEEPEN_TRIES,
    matcher: GlobMatcher | None = None,
) -> Selection:
    """The selection for the change BASE...HEAD in `repo` (the work-tree root).

    HEAD is what is being evaluated, so a HEAD that names no commit is the
    caller's mistake (`UserError`, exit 2), while every way BASE can be unknown
    falls back to stage 1 with its reason.
    """
    found = changes(repo, base, head, deepen_tries=deepen_tries)
    if isinstance(found, Selection):
        return found
    return decide(stage_map, matcher or GlobMatcher(stage_map.globs), found)


def _merge_bases(repo: Path, base: str, head: str, deepener: _Deepener) -> tuple[list[str], str]:
    """The merge bases, or ([], why) when there is no trustworthy one."""
    while True:
        bases = git.merge_bases(repo, base, head)
        if not bases:
            why = "BASE and HEAD share no history in this clone"
        else:
            # On the shallow boundary, merge-base answers from a cut history: a
            # guess — unless it is BASE or HEAD itself. Then the ancestry is seen
            # through real edges and nothing older can be a better answer (the
            # synthetic PR merge commit checked out with fetch-depth 2 is this case).
            boundary = git.shallow_commits(repo).intersection(bases) - {base, head}
            if not boundary:
                return bases, ""
            why = f"the merge base {sorted(boundary)[0][:12]} is on the shallow clone's boundary"
        if not deepener.more():
            return [], why


def _changed(repo: Path, bases: Sequence[str], head: str) -> list[str]:
    """Paths changed from the merge base to HEAD; after criss-cross merges, the union
    over every merge base (a superset, so the answer can only run more stages)."""
    if len(bases) == 1:
        return git.changed_paths(repo, bases[0], head)
    seen: dict[str, None] = {}
    for merge_base in bases:
        seen.update(dict.fromkeys(git.changed_paths(repo, merge_base, head)))
    return sorted(seen)


def _with(detail: str, deepener: _Deepener) -> str:
    if deepener.notes:
        return f"{detail} ({deepener.summary()})"
    if deepener.left == 0 and git.is_shallow(deepener.repo):  # --deepen 0: never tried
        return f"{detail} (shallow clone; not deepened: --deepen 0)"
    return detail
