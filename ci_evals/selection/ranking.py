"""Each path's lowest-ranked matching glob (`GlobMatcher.lowest_many`), and the
per-folder tables of ranks it shares with the bounded search (`bounded_search`).

What `compute-stage` needs per changed file is one number — the smallest rank
of the globs matching it (ranks order entries by stage, then position) — not
the list of matches. So a folder's own matches are reduced to one number
when the folder is entered, and its literal-name and extension rules to
tables of minimum ranks (`ranked`); suffix and wildcard rules are asked only
when they rank below the file's best so far.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import chain

from ci_evals.selection.folder_index import FolderFacts, FolderIndex
from ci_evals.selection.name_rules import NameMatcher

# "No match" inside the ranking loops: larger than any rank they accept, so
# `rank < best` needs no extra test for it.
NO_RANK = 1 << 62


# What ranking a file needs from its folder's name matcher (one per `rank_of`):
# the min rank per literal name and per extension, and the lowest rank of its
# `match_rest` rules (`NO_RANK`: it has none).
Tables = tuple[dict[str, int], dict[str, int], int]

# What ranking a folder's files needs, per folder facts object: its files'
# name matcher, the rank of its own matches (`floor`: every file has it;
# `NO_RANK`: none), and its name matcher's `Tables`.
Ranked = tuple[NameMatcher, int, dict[str, int], dict[str, int], int]

# `match_rest`'s question "does any of these rules match?" in one C call.
Quick = Callable[[str], "re.Match[str] | None"]


def ranked(info: FolderFacts, rank_of: Sequence[int], tables: dict[int, Tables]) -> Ranked:
    """`Ranked` for `info`; `tables` keeps each name matcher's `Tables` (for one `rank_of`)."""
    files = info.files
    hits = (*info.hits, *files.everything)
    floor = min([rank_of[i] for i in hits]) if hits else NO_RANK
    known = tables.get(id(files))
    if known is None:
        known = tables[id(files)] = _tables(files, rank_of)
    literal, ext, rest_low = known
    return files, floor, literal, ext, rest_low


def _tables(files: NameMatcher, rank_of: Sequence[int]) -> Tables:
    rest_low = NO_RANK
    if files.lengths or files.regexes is not None:
        rest = [*chain.from_iterable(files.suffix.values())]
        if files.regexes is not None:
            rest.extend(files.regexes.indices)
        rest_low = min([rank_of[i] for i in rest])
    return _min_ranks(files.literal, rank_of), _min_ranks(files.ext, rank_of), rest_low


def _min_ranks(table: dict[str, list[int]], rank_of: Sequence[int]) -> dict[str, int]:
    return {key: min([rank_of[i] for i in indices]) for key, indices in table.items()}


def quick(rest: NameMatcher, *, every: bool = False) -> Quick | None:
    """One alternation of `rest`'s suffix and wildcard rules (None: it has none);
    with `every`, of its literal names and extensions too (not of `everything`).

    A file that it does not match needs no `match_rest`, which reports which
    rules match (several Python-level calls); most files match none.
    """
    parts = [f"(?:{re.escape(name)}\\Z)" for name in rest.literal] if every else []
    suffixes = [*rest.ext, *rest.suffix] if every else rest.suffix
    parts += [f"(?:.*{re.escape(suffix)}\\Z)" for suffix in suffixes]
    if rest.regexes is not None:
        parts += [f"(?:(?:{r})\\Z)" for r in rest.regexes.regexes]
    return re.compile("|".join(parts), re.DOTALL).match if parts else None


def lowest_ranks(
    index: FolderIndex, paths: Iterable[str], rank_of: Sequence[int], cut: int
) -> list[int]:
    """For each path (its first `cut` characters skipped), the smallest `rank_of[i]`
    over the globs `i` matching it, in path order; `NO_RANK` for none."""
    out: list[int] = []
    append = out.append
    none = NO_RANK
    tables: dict[int, Tables] = {}
    seen: dict[int, Ranked] = {}
    facts, build_facts = index.facts.get, index.build_facts
    last: str | None = None  # (no path's folder: the first path sets what follows)
    files, floor, rest_low = build_facts("").files, none, none
    literal: dict[str, int] = {}
    ext: dict[str, int] = {}
    for path in paths:
        folder, _, name = path.rpartition("/")
        if folder != last:
            # Paths come in runs of the same folder: its facts are looked up once
            # per run, and many folders share one facts object (`seen`).
            last = folder
            relative = folder[cut:]
            info = facts(relative) or build_facts(relative)
            known = seen.get(id(info))
            if known is None:
                known = seen[id(info)] = ranked(info, rank_of, tables)
            files, floor, literal, ext, rest_low = known
        # `best` only goes down: the folder's own matches (`floor`), then the
        # file's literal name, then its extension (each at most one dict look-up).
        best = floor
        rank = literal.get(name, none)
        if rank < best:  # noqa: PLR1730 - `min()` is a call: slower in this loop
            best = rank
        dot = name.rfind(".")
        if dot != -1:
            rank = ext.get(name[dot:], none)
            if rank < best:  # noqa: PLR1730
                best = rank
        # Suffix and wildcard rules cost Python-level calls: asked only when one
        # of them could still lower `best` (`rest_low`: the lowest of their ranks).
        if rest_low < best:
            for i in files.match_rest(name):
                rank = rank_of[i]
                if rank < best:  # noqa: PLR1730
                    best = rank
        append(best)
    return out
