"""Which stage a change can affect: the lowest one any changed file touches.

The pure decision: changed paths in, a `Selection` out; no git here (the git
half, `ci_evals.selection.diff`, finds the paths for BASE...HEAD and makes the
fallback selections when it cannot). For one changed path, repo-relative: a
`global` path -> stage 1 (`global-file`; a global suite file can be held out,
`Selector(hold=)`, and decided by `suite_change`); a path under `fixtures/<k>-*/`
(or a scenario's own) -> stage k+1 (`fixture-changed`), failing closed to stage 1
when k+1 is no stage; a path under `root` -> the lowest stage of *every* entry
that matches it (`matched`), or stage 1 when none covers it (`unmatched-file`);
anything else is ignored.

Over all paths the answer is the minimum stage; the path that decided it is the
one with the lowest (stage, rule rank, path), the rank global-file <
unmatched-file < fixture-changed < matched: among equal stages the broadest cause
is reported, because it is the one that would still force that stage if the
map's entries changed. Every rule: docs/compute-stage.md.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, compress, repeat
from operator import add
from typing import TYPE_CHECKING, NamedTuple, cast, overload

from ci_evals.selection.global_globs import CHECKOUT_FILES
from ci_evals.selection.matcher import GlobMatcher

if TYPE_CHECKING:
    from ci_evals.selection.stage_map import StageMap

# Reason codes (the `reason` of `--json` and of the `reason` output; the JSON
# Schema's enum, schemas/cli/compute-stage.json, lists the same).
MATCHED = "matched"
UNMATCHED_FILE = "unmatched-file"
GLOBAL_FILE = "global-file"
FIXTURE_CHANGED = "fixture-changed"
CONTRACT_CHANGED = "contract-changed"  # only stage contracts changed in the suite
LINK_TARGET_CHANGED = "link-target-changed"  # what a link the run follows leads to changed
BASE_MISSING = "base-missing"
BASE_ZERO_SHA = "base-zero-sha"
NO_MERGE_BASE = "no-merge-base"
NO_RELEVANT_CHANGE = "no-relevant-change"
BASE_EQUALS_HEAD = "base-equals-head"
# Not reasons for the whole selection: rules of a path that selects no stage.
IGNORED = "ignored"  # outside root, not global, not a fixture
STAGE_NONE = "stage-none"  # an entry with `stage: none` matches it (and no staged entry)
LISTING_ONLY = "listing-only"  # the marketplace file or manifest: nothing Claude Code loads

_RULE_RANK = {GLOBAL_FILE: 0, UNMATCHED_FILE: 1, FIXTURE_CHANGED: 2, MATCHED: 3}
# (stage, rule rank) as one int, `stage * _RULES + rule rank`: what orders the
# candidates for the deciding path before their paths do (see `Selector`).
_RULES = len(_RULE_RANK)
_UNMATCHED_LEVEL = 1 * _RULES + _RULE_RANK[UNMATCHED_FILE]
_GLOBAL_LEVEL = 1 * _RULES + _RULE_RANK[GLOBAL_FILE]
# Above every level: no bound yet.
_NO_BOUND = (1 << 62, "")

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
    matches: Sequence[Match]  # one per changed path, in diff order (built on first use)
    detail: str = ""  # one line for a person: what decided it
    decided_by: Match | None = None
    base: str | None = None  # resolved SHAs, when known
    head: str | None = None
    merge_bases: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())  # what was tried on the way (deepening, event)
    # Changed suite files the Selector set aside (`Selector(compared=...)`): the caller
    # decides them by comparing their two versions (`suite_change`).
    to_compare: tuple[str, ...] = ()
    # Set when every changed path a stage reads is a grader's (`grader_change`): why a
    # re-grade of the base's saved run answers for the change, with no agent run.
    regrade: str | None = None

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


# --- Matching paths against the rules ----------------------------------------


# Match's fields after the path, for the rules that do not depend on the path.
_Rest = tuple[int | None, str | None, str, str]
_GLOBAL: _Rest = (1, None, GLOBAL_FILE, "a global path: any change runs all")
_UNMATCHED: _Rest = (1, None, UNMATCHED_FILE, "under the plugin root; no entry covers it")
_IGNORED: _Rest = (None, None, IGNORED, "outside the plugin root; not global")
# The deciding global's `why` when git applies it at checkout (`CHECKOUT_FILES`).
_CHECKOUT_WHY = (
    "git applies it when checking files out (attributes such as working-tree-encoding, "
    "eol, filters; submodules; LFS), so it can change every plugin and fixture file: runs all"
)
# `Match(...)` goes through a Python-level __new__; this is the C one.
_new_tuple = tuple.__new__


class _Rules:
    """The map's rules, indexed once for many paths.

    `match` runs once per changed file — 100,000 times on a big diff — so it
    works on precomputed tuples and ints rather than records.
    """

    def __init__(self, stage_map: StageMap, matcher: GlobMatcher) -> None:
        self.matcher = matcher
        self.matches = matcher.matches
        entries = stage_map.entries
        count = max(len(entries), 1)
        self.count = count
        # `stage: none` ranks as a stage after the last: a file another entry
        # matches takes that entry's stage; one only such entries match, none.
        none_stage = len(stage_map.stages) + 1
        self.none_rank = none_stage * count
        self.has_none = any(e.stage is None for e in entries)
        # One int per entry orders by (stage, position): the min over matches is
        # a C-level `min(map(...))` instead of a Python key function.
        self.rank_of = [
            (none_stage if e.stage is None else e.stage) * count + position
            for position, e in enumerate(entries)
        ]
        # Each rank's Match fields after the path (-1: no glob matched).
        self.rest_of: dict[int, _Rest] = {
            rank: (
                e.stage,
                e.glob,
                MATCHED if e.stage is not None else STAGE_NONE,
                f"entry {e.glob!r} ({stage_map.display}:{e.line})"
                + ("" if e.stage is not None else ": stage none, no stage reads it"),
            )
            for rank, e in zip(self.rank_of, entries, strict=True)
        }
        self.rest_of[-1] = _UNMATCHED
        # `except:` globs, matched apart: a path one matches is decided by `match`
        # (its entries less those that except it); every other path as before.
        excepted = [(i, g) for i, e in enumerate(entries) for g in e.excepts]
        self.excepts = GlobMatcher([g for _, g in excepted]) if excepted else None
        self.excepted_entry = [i for i, _ in excepted]
        root = stage_map.root
        self.root_prefix = root + "/" if root else ""
        self.globals = GlobMatcher(stage_map.global_paths)
        # The globals that can match under root are usually in `matcher` too,
        # after the entries (`StageMap.selection_globs`): their rank 0 (stage
        # "0", below every entry) is a global match, found in the same pass.
        # Otherwise, or when one could not be rewritten for it, each path under
        # root is also matched against the globals (slower).
        folded = stage_map.root_globals
        self.globals_in_root = folded is None or (
            bool(folded) and matcher.globs[len(entries) :] != folded
        )
        if not self.globals_in_root and folded:
            self.rank_of += [0] * len(folded)
            self.rest_of[0] = _GLOBAL
        fixtures = stage_map.fixtures
        self.fixtures_prefix = None if fixtures is None else (fixtures + "/" if fixtures else "")
        self.stage_count = len(stage_map.stages)
        self.fixture_folders: dict[str, tuple[int, str]] = {}
        # Per rank: the level (stage, matched) of a path whose lowest rank it is;
        # a `stage: none` rank's is above every bound (`_NO_BOUND`): never found.
        top = none_stage + 1
        self.level_of = [
            rank // count * _RULES + _RULE_RANK[MATCHED] for rank in range(none_stage * count)
        ]
        self.level_of[:count] = [_GLOBAL_LEVEL] * count  # rank 0: a global (see above)
        self.stage_of_rank = [rank // count for rank in range(none_stage * count)]
        self.stage_of_rank[:count] = [1] * count
        self.level_of += [_NO_BOUND[0]] * count
        self.stage_of_rank += [_NO_BOUND[0]] * count
        assert len(self.level_of) == top * count

    def lowest(
        self, paths: Sequence[str], count: int, bound: tuple[int, str]
    ) -> list[tuple[int, str, int]]:
        """The `count` lowest (stage, path, rank) below `bound` of paths all under root
        (an uncovered one is stage 1, rank -1)."""
        return self.matcher.lowest_below(
            paths,
            self.rank_of,
            self.stage_of_rank,
            1,
            bound,
            keep=count,
            cut=len(self.root_prefix),
        )

    def batch(self, paths: Sequence[str], bound: tuple[int, str] | None = None) -> _Batch:
        """`match` for each path, with the common case — a plain file under
        root — done in one batch call and its records built only when asked.

        With a `bound` (the level and path of the lowest candidate so far), a
        batch of plain files under root is only searched for a path below it
        (`GlobMatcher.lowest_below`); its ranks are computed when read."""
        fast = not self.globals_in_root and (
            self.fixtures_prefix is None
            or not (
                self.fixtures_prefix.startswith(self.root_prefix)
                or self.root_prefix.startswith(self.fixtures_prefix)
            )
        )
        prefix, cut = self.root_prefix, len(self.root_prefix)
        match, new = self.match, _new_tuple
        if fast and self.excepts is not None:
            # A chunk with a path an `except:` glob matches is matched path by path.
            under = [p[cut:] for p in paths if p.startswith(prefix)]
            hits = self.excepts.lowest_many(under, [0] * len(self.excepts.globs))
            fast = max(hits, default=-1) == -1
        if not fast:
            return _MatchBatch([match(path) for path in paths])
        # One batch call for every path under root (in diff order, so runs of
        # same-folder paths share the folder's work).
        if all(map(str.startswith, paths, repeat(prefix))):  # the usual case: all under root
            if bound is not None:
                found = self.matcher.lowest_below(
                    paths, self.rank_of, self.level_of, _UNMATCHED_LEVEL, bound, cut=cut
                )
                return _RankBatch(paths, None, self, found=found[0] if found else None)
            ranks = self.matcher.lowest_many(paths, self.rank_of, cut=cut)
            return _RankBatch(paths, ranks, self)
        under = [p[cut:] for p in paths if p.startswith(prefix)]
        ranks = self.matcher.lowest_many(under, self.rank_of)
        rest_of_rank = self._rests(ranks)
        next_rank = iter(ranks).__next__
        return _MatchBatch(
            [
                new(Match, (p, *rest_of_rank[next_rank()])) if p.startswith(prefix) else match(p)
                for p in paths
            ]
        )

    def ranks(self, paths: Sequence[str]) -> list[int]:
        """`lowest_many` for paths that are all under root."""
        return self.matcher.lowest_many(paths, self.rank_of, cut=len(self.root_prefix))

    def _rests(self, ranks: list[int]) -> dict[int, _Rest]:
        """Match's fields after the path, for each rank `lowest_many` gave (-1: unmatched)."""
        return self.rest_of

    def match(self, path: str) -> Match:
        rest: _Rest | None = None
        if path.startswith(self.root_prefix):
            if self.globals_in_root and self._is_global(path):
                return _new_tuple(Match, (path, *_GLOBAL))  # nothing ranks lower
            inside = path[len(self.root_prefix) :]
            indices = self.matches(inside)
            if self.excepts is not None and indices:
                left_out = {self.excepted_entry[i] for i in self.excepts.matches(inside)}
                indices = [i for i in indices if i not in left_out]
            rest = self.rest_of[min(map(self.rank_of.__getitem__, indices), default=-1)]
        elif self._is_global(path):
            return _new_tuple(Match, (path, *_GLOBAL))
        if self.fixtures_prefix is not None and path.startswith(self.fixtures_prefix):
            stage, why = self._fixture(path[len(self.fixtures_prefix) :])
            # Lower stage wins; at the same stage a fixture outranks an entry
            # match and is outranked by an unmatched file (see the module doc).
            if (
                rest is None
                or rest[0] is None  # `stage: none`: the fixture rule decides
                or stage < rest[0]
                or (stage == rest[0] and rest[2] == MATCHED)
            ):
                rest = (stage, None, FIXTURE_CHANGED, why)
        return _new_tuple(Match, (path, *(rest or _IGNORED)))

    def _is_global(self, path: str) -> bool:
        return bool(self.globals.matches(path))

    def _fixture(self, inside: str) -> tuple[int, str]:
        """Stage k+1 for `<k>-*/...` and for a scenario's own `<name>/<k>-*/...`."""
        folder, slash, rest = inside.partition("/")
        if slash and not _FIXTURE_FOLDER.match(folder):  # a scenario's own fixtures?
            sub, slash, _ = rest.partition("/")
            folder = f"{folder}/{sub}" if slash and _FIXTURE_FOLDER.match(sub) else ""
        if not slash or not folder:
            return (
                1,
                f"not inside a fixtures/<k>-<stage>/ (or fixtures/<scenario>/<k>-<stage>/) "
                f"folder ({inside!r}): unknown stage, runs all",
            )
        known = self.fixture_folders.get(folder)
        if known is None:
            known = self.fixture_folders[folder] = self._fixture_folder(folder.rpartition("/")[2])
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


# A path's place in the choice of the deciding path: (stage, rule rank, path).
_Key = tuple[int, int, str]


class _MatchBatch:
    """Changed paths whose records are built (paths outside root, fixtures, globals)."""

    def __init__(self, matches: list[Match]) -> None:
        self.matches = matches

    def __len__(self) -> int:
        return len(self.matches)

    def records(self) -> list[Match]:
        return self.matches

    def best(self) -> tuple[_Key, Match] | None:
        best: tuple[_Key, Match] | None = None
        for m in self.matches:
            stage = m.stage
            if stage is None or (best is not None and stage > best[0][0]):
                continue
            key = (stage, _RULE_RANK[m.rule], m.path)
            if best is None or key < best[0]:
                best = key, m
        return best


class _RankBatch:
    """Paths under root with the lowest rank each matched (-1: none): the usual
    case, kept as two lists. A record per path (~0.2 us each) is built only
    when someone reads the matches: the plain answer needs just the minimum.

    Made with `found` (a pruned search's answer: the path below the bound
    before this batch, if any), its ranks are computed on first read; the
    plain answer never reads them."""

    def __init__(
        self,
        paths: Sequence[str],
        ranks: list[int] | None,
        rules: _Rules,
        *,
        found: tuple[int, str, int] | None = None,
    ) -> None:
        self.paths = paths
        self._ranks = ranks
        self._rest_of_rank: dict[int, _Rest] | None = None
        self.rules = rules
        self.count = rules.count
        self.pruned = ranks is None
        self.found = found

    @property
    def unread(self) -> bool:
        """True while the ranks have not been computed."""
        return self._ranks is None

    @property
    def ranks(self) -> list[int]:
        if self._ranks is None:
            self._ranks = self.rules.ranks(self.paths)
        return self._ranks

    @property
    def rest_of_rank(self) -> dict[int, _Rest]:
        if self._rest_of_rank is None:
            self._rest_of_rank = self.rules._rests(self.ranks)
        return self._rest_of_rank

    def __len__(self) -> int:
        return len(self.paths)

    def records(self) -> list[Match]:
        # `(path, *rest)` per path, built by C-level calls only: (path,) + rest.
        rests = map(self.rest_of_rank.__getitem__, self.ranks)
        return list(map(partial(_new_tuple, Match), map(add, zip(self.paths), rests)))

    def best(self) -> tuple[_Key, Match] | None:
        """The lowest (stage, rule rank, path) here — or, when pruned, only if it
        is below the bound the batch was searched with (else None)."""
        if not self.pruned:
            return self.full_best()
        if self.found is None:
            return None
        _, path, rank = self.found
        rest = self.rules.rest_of[rank]
        match: Match = _new_tuple(Match, (path, *rest))
        return (match.stage, _RULE_RANK[match.rule], path), match  # type: ignore[return-value]

    def full_best(self) -> tuple[_Key, Match] | None:
        """`best` from every path's rank (the unpruned computation)."""
        if not self.ranks:
            return None
        paths, ranks = self.paths, self.ranks
        if 0 in ranks:  # a global file (rank 0, see `_Rules`): nothing outranks it
            path = min(compress(paths, map((0).__eq__, ranks)))
            rank, rule = 0, _RULE_RANK[GLOBAL_FILE]
        elif -1 in ranks:  # an uncovered file: stage 1, and no matched rule outranks it
            path = min(compress(paths, map((-1).__eq__, ranks)))
            rank, rule = -1, _RULE_RANK[UNMATCHED_FILE]
        else:
            stage = min(ranks) // self.count
            if stage * self.count >= self.rules.none_rank:
                return None  # only `stage: none` entries matched
            # Every path at that stage (its ranks are below the next stage's first).
            path = min(compress(paths, map(((stage + 1) * self.count).__gt__, ranks)))
            rank, rule = ranks[paths.index(path)], _RULE_RANK[MATCHED]
        match: Match = _new_tuple(Match, (path, *self.rest_of_rank[rank]))
        return (match.stage, rule, path), match  # type: ignore[return-value]


_Batch = _MatchBatch | _RankBatch


class _Matches(Sequence[Match]):
    """The changed paths' records, built from the batches on first use."""

    __slots__ = ("_batches", "_built", "_length")

    def __init__(self, batches: list[_Batch]) -> None:
        self._batches = batches
        self._length = sum(map(len, batches))
        self._built: tuple[Match, ...] | None = None

    def _all(self) -> tuple[Match, ...]:
        if self._built is None:
            self._built = tuple(m for batch in self._batches for m in batch.records())
            self._batches = []
        return self._built

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Match: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Match, ...]: ...
    def __getitem__(self, index: int | slice) -> Match | tuple[Match, ...]:
        return self._all()[index]

    def __iter__(self) -> Iterator[Match]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())

    def relevant(self) -> int:
        """How many paths have a stage (ranked batches only: all but `stage: none`'s)."""
        batches = cast(list[_RankBatch], self._batches)
        if not batches or not batches[0].rules.has_none:
            return self._length
        none_rank = batches[0].rules.none_rank
        return self._length - sum(sum(map(none_rank.__le__, b.ranks)) for b in batches)

    def ranked_only(self) -> bool:
        """True while every path is a plain file under root (kept as ranks)."""
        return self._built is None and all(type(b) is _RankBatch for b in self._batches)

    def lowest(self, count: int) -> list[Match]:
        """`lowest_relevant` for ranked batches (every path has a stage)."""
        batches = cast(list[_RankBatch], self._batches)
        if count > 0 and all(b.pruned and b.unread for b in batches):
            return self._lowest_pruned(batches, count)
        return self._lowest_full(batches, count)

    @staticmethod
    def _lowest_pruned(batches: list[_RankBatch], count: int) -> list[Match]:
        """`_lowest_full` by searching each batch only below the `count`-th lowest so far."""
        found: list[tuple[int, str, int]] = []
        bound = _NO_BOUND
        for batch in batches:
            found = sorted([*found, *batch.rules.lowest(batch.paths, count, bound)])[:count]
            if len(found) == count:
                bound = found[-1][:2]
        rest_of = batches[0].rules.rest_of if batches else {}
        return [_new_tuple(Match, (path, *rest_of[rank])) for _, path, rank in found]

    @staticmethod
    def _lowest_full(batches: list[_RankBatch], count: int) -> list[Match]:
        """`lowest` from every path's rank (the unpruned computation)."""
        rest_of_rank: dict[int, _Rest] = {}
        for batch in batches:
            rest_of_rank.update(batch.rest_of_rank)
        present = set(chain.from_iterable(set(b.ranks) for b in batches))
        ranks_at: dict[int, set[int]] = {}  # stage -> the ranks seen with that stage
        for rank in present:
            if rest_of_rank[rank][0] is not None:  # `stage: none`: not relevant
                ranks_at.setdefault(rest_of_rank[rank][0], set()).add(rank)  # type: ignore[arg-type]
        out: list[Match] = []
        for stage in sorted(ranks_at):
            if len(out) >= count:
                break
            wanted = ranks_at[stage].__contains__
            at_stage = chain.from_iterable(
                compress(zip(b.paths, b.ranks, strict=True), map(wanted, b.ranks)) for b in batches
            )
            chosen = heapq.nsmallest(count - len(out), at_stage)
            out.extend(_new_tuple(Match, (path, *rest_of_rank[rank])) for path, rank in chosen)
        return out


def changed_paths(matches: Sequence[Match]) -> Iterator[str]:
    """Every path of `matches`, without building the records a batch keeps as ranks."""
    if isinstance(matches, _Matches) and matches._built is None:
        for batch in matches._batches:
            if isinstance(batch, _RankBatch):
                yield from batch.paths
            else:
                yield from (m.path for m in batch.matches)
        return
    yield from (m.path for m in matches)


def fixture_stages(matches: Sequence[Match], stage_map: StageMap) -> tuple[int, ...]:
    """Each k (1..number of stages) whose fixture set `fixtures/<k>-*/`, or a
    scenario's `fixtures/<name>/<k>-*/`, has a changed path: stage k's curated
    output changed. On the stub model a stage's answer *is* its fixture, so the
    run does not grade it; CI grades these with `check-fixtures --stage k`.

    Only the records built anyway are read: a fixture path never sits in a
    batch kept as ranks (those are plain files under root, with fixtures apart).
    """
    if stage_map.fixtures is None:
        return ()
    prefix = stage_map.fixtures + "/" if stage_map.fixtures else ""
    if isinstance(matches, _Matches) and matches._built is None:
        batches = matches._batches
        records: Iterator[Match] = chain.from_iterable(
            b.matches for b in batches if isinstance(b, _MatchBatch)
        )
    else:
        records = iter(matches)
    found: set[int] = set()
    for m in records:
        if not m.path.startswith(prefix):
            continue
        folder, _, rest = m.path[len(prefix) :].partition("/")
        if not _FIXTURE_FOLDER.match(folder):  # a scenario's own set?
            folder, _, rest = rest.partition("/")
        number = _FIXTURE_FOLDER.match(folder)
        if number and rest and 1 <= int(number.group(1)) <= len(stage_map.stages):
            found.add(int(number.group(1)))
    return tuple(sorted(found))


def lowest_relevant(matches: Sequence[Match], count: int) -> tuple[int, list[Match]]:
    """How many of `matches` are relevant (have a stage), and the `count` lowest
    of those by (stage, path) — what a report lists first.

    Equal to sorting every relevant match and cutting, without building 100,000
    records to show 50: the usual batches are ranked in C-level passes.
    """
    if isinstance(matches, _Matches) and matches.ranked_only():
        return matches.relevant(), matches.lowest(count)
    relevant = [m for m in matches if m.stage is not None]
    return len(relevant), heapq.nsmallest(count, relevant, key=_stage_then_path)


def _stage_then_path(match: Match) -> tuple[int, str]:
    return match.stage or 0, match.path


class Selector:
    """The selection built up from changed paths that arrive in chunks.

    The answer is decided as the chunks come: once the lowest candidate so far
    is (stage k, rule r, path p), a later path matters only if its (stage,
    rule, path) is below that, so each batch of plain files under root is
    searched only for such a path (`prune=False`: every path's rank is
    computed at once, the reference). Either way `Selection.matches` has every
    path's record, computed when first read. The `compared` paths (suite files,
    decided by comparing their two versions) are not matched: they are set aside
    in `Selection.to_compare`.
    """

    def __init__(
        self,
        stage_map: StageMap,
        matcher: GlobMatcher,
        *,
        prune: bool = True,
        compared: frozenset[str] = frozenset(),
    ) -> None:
        self._rules = _Rules(stage_map, matcher)
        self._compared = compared
        self._set_aside: list[str] = []
        # Compared paths outside root cannot be in a chunk that starts and ends under
        # root (a diff lists a folder's paths together); the scan is skipped there.
        # Skipping wrongly would only match the path as global: a full run.
        root = self._rules.root_prefix
        self._compared_outside_root = bool(root) and not any(h.startswith(root) for h in compared)
        self._batches: list[_Batch] = []
        self._found: list[tuple[_Key, Match]] = []
        self._prune = prune
        self._bound = _NO_BOUND

    def add(self, paths: Sequence[str]) -> None:
        # One or two compared paths: a C-level scan of the chunk each (~1 ms per
        # 100,000 paths), unless the chunk lies under root and they do not.
        root = self._rules.root_prefix
        inside = self._compared_outside_root and paths and paths[0].startswith(root)
        set_aside = (
            []
            if inside and paths[-1].startswith(root)
            else [p for p in self._compared if p in paths]
        )
        if set_aside:
            self._set_aside.extend(set_aside)
            paths = [path for path in paths if path not in self._compared]
        if not paths:
            return
        batch = self._rules.batch(paths, self._bound if self._prune else None)
        self._batches.append(batch)
        one = batch.best()
        if one is not None:
            self._found.append(one)
            (stage, rule, path), _ = one
            bound = (stage * _RULES + rule, path)
            self._bound = min(self._bound, bound)

    def finish(self) -> Selection:
        matches = _Matches(self._batches)
        found = self._found
        to_compare = tuple(self._set_aside)
        if not found:
            detail = (
                f"{len(matches)} changed path(s), none under the plugin root, global or a fixture"
            )
            if self._rules.has_none and any(
                m.rule == STAGE_NONE for m in matches
            ):  # the records are built only here: no stage reads any of these paths
                detail = (
                    f"{len(matches)} changed path(s), none that a stage reads: outside the "
                    "plugin root and not global or a fixture, or matched only by `stage: none` "
                    "entries"
                )
            return Selection(
                None, NO_RELEVANT_CHANGE, len(matches), matches, detail, to_compare=to_compare
            )
        _, best = min(found, key=lambda item: item[0])
        if best.rule == GLOBAL_FILE and best.path.rpartition("/")[2] in CHECKOUT_FILES:
            best = best._replace(why=_CHECKOUT_WHY)
        detail = f"{quote_path(best.path)}: {best.why}"
        return Selection(
            best.stage,
            best.rule,
            len(matches),
            matches,
            detail,
            decided_by=best,
            to_compare=to_compare,
        )


def select(stage_map: StageMap, matcher: GlobMatcher, paths: Sequence[str]) -> Selection:
    """The lowest stage the changed `paths` (repo-relative) can affect."""
    selector = Selector(stage_map, matcher)
    selector.add(paths)
    return selector.finish()


def quote_path(path: str) -> str:
    """A path safe to print on one line: JSON-quoted when it has odd characters."""
    if path.isprintable() and '"' not in path and "\\" not in path:
        return path
    import json  # noqa: PLC0415 - rare; kept off the start-up path

    return json.dumps(path, ensure_ascii=False)
