"""The paths whose lowest-ranked glob puts them below a bound (`GlobMatcher.lowest_below`).

`compute-stage` wants the lowest stage a diff reaches, and `--explain` the
few paths that reach it — not every path's rank. So each path is tested only
as far as it could still go below the running bound (the given bound, or the
`keep`-th lowest key found so far), and a folder's facts are built only when
one of its files needs them: most files are settled by the few globs below
the bound and what the folders above pass down (`BoundedSearch._preview`).
docs/performance.md measures each shortcut.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence

from ci_evals.selection.folder_index import FolderFacts, FolderIndex
from ci_evals.selection.name_rules import NameMatcher
from ci_evals.selection.ranking import NO_RANK, Quick, Tables, quick, ranked

# What the search derives from a folder's facts before any file is looked at,
# per facts object: its `ranking.Ranked`, the lowest rank of its extensions,
# the lowest level a file there can have but by a literal name, and the lowest
# by a literal name.
_Derived = tuple[NameMatcher, int, dict[str, int], dict[str, int], int, int, int, int]

# The search's facts for a folder it has not built (see `BoundedSearch._preview`):
# does a glob below the bound match a name (None: none can); is every file
# matched by what the folder inherits, or need it not be (no uncovered file can
# go below); the inherited literal names and extensions.
_Preview = tuple[Quick | None, bool, dict[str, list[int]], dict[str, list[int]]]
_NOTHING: dict[str, list[int]] = {}  # (never changed)

# `_rules_below`'s answers for one search, by (name matcher's id, rank limit).
_Below = dict[tuple[int, int], tuple[NameMatcher, Quick | None]]


class _LowGlobs:
    """The globs ranked below some limit, indexed on their own (see `_preview`)."""

    __slots__ = ("index", "quick_every")

    def __init__(self, globs: Sequence[str]) -> None:
        self.index = FolderIndex(globs)
        # `ranking.quick(every=True)` per name matcher, by its rules' indices.
        self.quick_every: dict[tuple[int, ...], Quick | None] = {}


class BoundedSearch:
    """`lowest_below` over one `FolderIndex`, keeping what later searches reuse
    (a diff is searched chunk by chunk, the bound passed on)."""

    __slots__ = ("_index", "_lows", "_quick")

    def __init__(self, index: FolderIndex) -> None:
        self._index = index
        self._quick: dict[tuple[int, ...], Quick | None] = {}  # `ranking.quick` per rule set
        # The globs below a limit, by their indices (None: too many to be worth it).
        self._lows: dict[tuple[int, ...], _LowGlobs] = {}

    def lowest_below(  # noqa: PLR0912, PLR0915 - one hot loop, inlined for speed
        self,
        paths: Sequence[str],
        rank_of: Sequence[int],
        level_of: Sequence[int],
        unmatched: int,
        bound: tuple[int, str],
        *,
        keep: int,
        cut: int,
    ) -> list[tuple[int, str, int]]:
        """`GlobMatcher.lowest_below` for `keep` >= 1 (its docstring says what).

        How a file is settled, cheapest first: in a folder not built, by the
        globs below the bound and what the folders above pass down (`_preview`).
        In a built folder whose every file is matched and whose active rules
        are all of a level above the bound — or equal, for a path that is not
        smaller — without a look-up (but one of its literal names, when such a
        rule is below). Where only suffix and wildcard rules could lower a
        file's key below the bound (a `**/test_1*` of a low stage active in
        every folder), by one regex call for those rules alone (`fast`), once
        the file is known to be matched (by the folder, or its extension).
        Otherwise it is ranked as `ranking.lowest_ranks` does, asking only the
        wildcard rules that could take it below the bound (`quick`, then, on a
        hit, one by one).
        """
        index = self._index
        get_facts, build_facts = index.facts.get, index.build_facts
        found: list[tuple[int, str, int]] = []
        none = NO_RANK  # "no match": `rank < best` needs no extra test
        # The bound, as `found` tightens it: a key (level, path) is below it when
        # `(level, path) < (level_b, path_b)`. As ranks: one below `limit_lt` is of
        # a level below `level_b`; one below `limit_le`, of a level at most equal
        # to it (`level_of` does not decrease as ranks grow).
        level_b, path_b = bound
        limit_lt = bisect_left(level_of, level_b)
        limit_le = bisect_right(level_of, level_b)
        tables: dict[int, Tables] = {}
        seen: dict[int, _Derived] = {}
        below: _Below = {}
        lows: dict[int, _LowGlobs | None] = {}
        # The current folder's facts (set when a path enters a new folder).
        last: str | None = None
        files = build_facts("").files
        floor = rest_low = ext_low = none
        literal: dict[str, int] = {}
        ext: dict[str, int] = {}
        lowest = unmatched  # the lowest level a file of the current folder can have
        lowest_named = none  # ... by one of its literal names (`lowest` leaves them out)
        preview: _Preview | None = None  # set instead of the above while not built
        low_quick: Quick | None = None
        inherited = False
        inherited_literal: dict[str, list[int]] = {}
        inherited_ext: dict[str, list[int]] = {}
        narrow: bool | None = None  # None: not worked out yet for this folder
        covered = False
        fast: Quick | None = None
        # The rules `match_rest` needs for the last name matcher and limit asked.
        asked_files: NameMatcher | None = None
        asked_limit = -1
        rest_rules, rest_quick = files, None

        def derive(info: FolderFacts) -> _Derived:
            # Many folders share their facts (`FolderIndex._plain_child`): what
            # this search derives from them is kept per facts object.
            derived = seen.get(id(info))
            if derived is None:
                derived = seen[id(info)] = _derive(info, rank_of, level_of, unmatched, tables)
            return derived

        # What holds at the top of every iteration:
        # - `found` is sorted, at most `keep` long; once `keep` long, its last key
        #   is the bound (`level_b`, `path_b`), and `limit_lt`/`limit_le` are its
        #   ranks. The bound only goes down, so a test passed against an older,
        #   higher bound (`narrow`, `fast`) still rules out what it ruled out: it
        #   tests a superset of the rules that still could.
        # - `last` is the folder of the previous path. Either `preview` is set
        #   (that folder is not built, and its files are settled from above), or
        #   the names unpacked from `derive` describe it (`narrow` None until a
        #   file needs it).
        # - `rest_rules`, `rest_quick` are `_rules_below(asked_files, asked_limit)`.
        for path in paths:
            folder, _, name = path.rpartition("/")
            if folder != last:
                last = folder
                relative = folder[cut:]
                info = get_facts(relative)
                # A folder not built yet need not be, while its files are settled
                # without it (see `_preview`).
                preview = None
                if info is None and relative:
                    after = folder + "/" > path_b
                    preview = self._preview(
                        relative,
                        limit_lt if after else limit_le,
                        unmatched < level_b or (unmatched == level_b and not after),
                        rank_of,
                        lows,
                    )
                if preview is None:
                    files, floor, literal, ext, rest_low, ext_low, lowest, lowest_named = derive(
                        info or build_facts(relative)
                    )
                    narrow = None  # worked out below, for the first file that needs it
                else:
                    low_quick, inherited, inherited_literal, inherited_ext = preview
            # May this file still go below the bound? Each `continue` says no.
            if preview is not None:
                if (low_quick is None or low_quick(name) is None) and (
                    inherited
                    or name in inherited_literal
                    or name[name.rfind(".") :] in inherited_ext
                ):
                    continue  # matched (so not uncovered), by no glob that could go lower
                preview = None  # this file may go lower: the folder's facts decide
                files, floor, literal, ext, rest_low, ext_low, lowest, lowest_named = derive(
                    get_facts(relative) or build_facts(relative)
                )
                narrow = None
            # Nothing in this folder goes below the bound, unless by its literal
            # name (a named file is tested in full: the test below says if it does).
            if (lowest > level_b or (lowest == level_b and path >= path_b)) and (
                name not in literal
                or lowest_named > level_b
                or (lowest_named == level_b and path >= path_b)
            ):
                continue
            if narrow is None:
                # Whether only the folder's suffix and wildcard rules can take a file
                # below the bound (or a literal name: such a file is tested in full):
                # when neither its globs nor its extensions can, their one-call test
                # (`fast`; None: none of them can) rules out most files with no
                # look-up, given the file is matched at all (by the folder, `covered`,
                # or an extension). Every path here sorts after the bound's when the
                # folder does (`a/b/` > `a/a.md` > `a/`). Inline, not a method: as a
                # method (one call per folder) it made `keep=4096` searches ~5% slower.
                narrow = False
                fixed = min(floor, ext_low)
                if fixed != none:
                    after = bool(folder) and folder + "/" > path_b
                    fixed_level = level_of[fixed]
                    if fixed_level > level_b or (fixed_level == level_b and after):
                        narrow, covered = True, floor != none
                        limit = limit_lt if after else limit_le
                        fast = None
                        if rest_low < limit:
                            fast = (
                                below.get((id(files), limit))
                                or self._rules_below(files, rank_of, limit, below)
                            )[1]
            if (
                narrow
                and name not in literal
                and (fast is None or fast(name) is None)
                # (no dot: `name[-1:]`, no extension key: each starts with its only dot)
                and (covered or name[name.rfind(".") :] in ext)
            ):
                continue
            # Rank it, as `ranking.lowest_ranks` does: `best` only goes down.
            best = floor
            rank = literal.get(name, none)
            if rank < best:  # noqa: PLR1730 - `min()` is a call: slower in this loop
                best = rank
            dot = name.rfind(".")
            if dot != -1:
                rank = ext.get(name[dot:], none)
                if rank < best:  # noqa: PLR1730
                    best = rank
            # Suffix or wildcard rules (`match_rest`) that could lower it (`none`: no rule).
            if rest_low < best:
                if best == none:  # every rule: they decide if it is matched at all
                    for i in files.match_rest(name):
                        rank = rank_of[i]
                        if rank < best:  # noqa: PLR1730
                            best = rank
                elif rest_low < limit_lt or (rest_low < limit_le and path < path_b):
                    # Only the rules that can take it below the bound.
                    limit = limit_le if path < path_b else limit_lt
                    if limit != asked_limit or files is not asked_files:
                        asked_files, asked_limit = files, limit
                        rest_rules, rest_quick = below.get((id(files), limit)) or self._rules_below(
                            files, rank_of, limit, below
                        )
                    if rest_quick is not None and rest_quick(name) is not None:
                        for i in rest_rules.match_rest(name):
                            rank = rank_of[i]
                            if rank < best:  # noqa: PLR1730
                                best = rank
            # Below the bound? (ranks below `limit_lt` are of a lower level, see above)
            if best == none:
                if not (unmatched < level_b or (unmatched == level_b and path < path_b)):
                    continue
                insort(found, (unmatched, path, -1))
            elif best < limit_lt or (best < limit_le and path < path_b):
                insort(found, (level_of[best], path, best))
            else:
                continue
            if len(found) > keep:
                found.pop()
            if len(found) == keep:  # the `keep`-th lowest key is the bound from now on
                level_b, path_b, _ = found[-1]
                limit_lt = bisect_left(level_of, level_b)
                limit_le = bisect_right(level_of, level_b)
        return found

    def _preview(
        self,
        relative: str,
        limit: int,
        uncovered_below: bool,
        rank_of: Sequence[int],
        lows: dict[int, _LowGlobs | None],
    ) -> _Preview | None:
        """How to settle the files of `relative`, a folder not built yet, without
        building it (None: it must be built).

        A file there goes below the bound only by a glob ranked below `limit`, or
        by matching no glob at all (when `uncovered_below`). An index of those
        few globs says whether one matches it (its folder facts are cheap: few of
        its globs single a folder out). The facts of the nearest folder above
        that is built say whether it is matched at all, by what every folder
        below inherits (and adds to): the globs that match that folder or one
        above it (`hits`), and the name rules of `base`. A file that they match
        and no low glob does is settled by one regex call and a look-up or two,
        however many globs single its folder (or the folders between) out.
        """
        if limit not in lows:
            lows[limit] = self._low_globs(rank_of, limit)
        low = lows[limit]
        if low is None:
            return None
        low_quick = None
        if low.index.globs:
            facts = low.index.facts.get(relative) or low.index.build_facts(relative)
            files = facts.files
            if facts.hits or files.everything:
                return None  # a low glob matches every file here
            key = files.indices
            if key in low.quick_every:
                low_quick = low.quick_every[key]
            else:
                low_quick = low.quick_every[key] = quick(files, every=True)
        if not uncovered_below:
            return low_quick, True, _NOTHING, _NOTHING  # whether matched or not, it stays above
        above: FolderFacts | None = None
        while above is None:  # (the root is built: the search starts there)
            relative = relative.rpartition("/")[0]
            above = self._index.facts.get(relative)
        base = above.base[0]
        return low_quick, bool(above.hits or base.everything), base.literal, base.ext

    def _low_globs(self, rank_of: Sequence[int], limit: int) -> _LowGlobs | None:
        """The globs ranked below `limit`, indexed; None when they are more than
        half of them (their folder facts would cost about as much as all globs')."""
        globs = self._index.globs
        low = tuple([i for i, rank in enumerate(rank_of[: len(globs)]) if rank < limit])
        if 2 * len(low) > len(globs):
            return None
        found = self._lows.get(low)
        if found is None:
            found = self._lows[low] = _LowGlobs([globs[i] for i in low])
        return found

    def _rules_below(
        self, files: NameMatcher, rank_of: Sequence[int], limit: int, below: _Below
    ) -> tuple[NameMatcher, Quick | None]:
        """`files`, with only its suffix and wildcard rules below `limit`, and their
        one-call test (`ranking.quick`)."""
        rules = [self._index.rule_of[i] for i in files.indices if rank_of[i] < limit]
        rest = self._index.names([r for r in rules if r.literal is None and r.suffix != ""])
        key = tuple(rest.indices)
        if key in self._quick:
            rest_quick = self._quick[key]
        else:
            rest_quick = self._quick[key] = quick(rest)
        below[id(files), limit] = (rest, rest_quick)
        return rest, rest_quick


def _derive(
    info: FolderFacts,
    rank_of: Sequence[int],
    level_of: Sequence[int],
    unmatched: int,
    tables: dict[int, Tables],
) -> _Derived:
    """What a folder's facts say before any file is looked at (see `_Derived`)."""
    none = NO_RANK
    files, floor, literal, ext, rest_low = ranked(info, rank_of, tables)
    ext_low = min(ext.values(), default=none)
    named_low = min(literal.values(), default=none)
    # The lowest rank of a rule that is no literal name (each is a literal
    # name, an extension, everything, or a `match_rest` rule).
    low = min([rank_of[i] for i in files.everything], default=none)
    low = min(low, rest_low, ext_low)
    if floor == none:  # a file here may match nothing
        lowest = unmatched if low == none else min(unmatched, level_of[low])
    else:
        lowest = level_of[min(floor, low)]
    lowest_named = none if named_low == none else level_of[named_low]
    return files, floor, literal, ext, rest_low, ext_low, lowest, lowest_named
