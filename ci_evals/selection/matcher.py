"""Match many paths against many gitignore-style globs, reporting EVERY match.

`GlobMatcher` is what the rest of the package asks; its parts live beside it:

- `glob_syntax` — what a glob means (pathspec's regex for it) and why one is
  refused (`glob_problem`); pathspec itself is imported only when needed;
- `name_rules` and `folder_index` — the globs indexed by folder: speed comes
  from indexing, not from a different engine (a file costs dict look-ups on
  its name, plus at most one regex call);
- `ranking` — each path's lowest-ranked glob (`lowest_many`);
- `bounded_search` — only the paths that go below a bound (`lowest_below`);
- this module — every match (`matches`) and coverage (`unmatched`: the files
  no glob matches, the globs that match no file).

docs/performance.md tells how each part was measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ci_evals.selection.bounded_search import BoundedSearch
from ci_evals.selection.folder_index import FolderIndex
from ci_evals.selection.glob_syntax import regexes_asked_while
from ci_evals.selection.name_rules import NameMatcher
from ci_evals.selection.ranking import NO_RANK, lowest_ranks


def needed_regexes(globs: Sequence[str]) -> dict[str, str | None]:
    """Every pathspec regex that validating `globs` and building their matcher asks for.

    Saved with a cached stage map; `glob_syntax.remember_regexes` hands them
    back, so the next run needs no pathspec at all (matching itself never asks
    for more).
    """
    return regexes_asked_while(lambda: GlobMatcher(globs))


class GlobMatcher:
    """Which of `globs` match a path — all of them, not just the last.

    Paths are POSIX, relative to the folder the globs are relative to, and
    name files (a dir-only glob `foo/` matches the files under `foo`). Invalid
    globs raise ValueError; the stage-map loader reports them first, with a
    position, using `glob_problem`. Each query is answered from the globs'
    `FolderIndex`, whose per-folder facts are built on first need and kept.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        index = FolderIndex(globs)
        self.globs = index.globs
        # Bound once: the queries below run per path.
        self._facts = index.facts
        self._build_facts = index.build_facts
        self._full = index.full
        self._index = index
        self._search = BoundedSearch(index)

    def matches(self, path: str) -> list[int]:
        """Indices (ascending) of every glob that matches `path`."""
        out = self._matches(path)
        return sorted(set(out)) if len(out) > 1 else out

    def _matches(self, path: str) -> list[int]:
        """The matching indices in no particular order, possibly repeated (the hot path)."""
        folder, _, name = path.rpartition("/")
        info = self._facts.get(folder) or self._build_facts(folder)
        out = info.files.match(name)
        if info.hits:
            out.extend(info.hits)
        if self._full is not None:  # pragma: no cover - see FolderIndex._classify
            out.extend(self._full.find(path))
        return out

    def lowest(self, path: str, stage_of_index: Sequence[int]) -> int | None:
        """The lowest stage among the globs matching `path` (None when none matches)."""
        found = self._matches(path)
        if not found:
            return None
        return min(stage_of_index[i] for i in found)

    def lowest_many(
        self, paths: Iterable[str], rank_of: Sequence[int], *, cut: int = 0
    ) -> list[int]:
        """For each path, the smallest `rank_of[i]` over the globs `i` matching it; -1 for none.

        Ranks must be >= 0 and below 2**62 (see `ranking`). Each path's first
        `cut` characters are skipped (the root folder and its slash, so the
        caller need not copy 100,000 paths to cut it off); the folder is cut
        once per run of same-folder paths instead.
        """
        if self._full is not None:  # pragma: no cover - see FolderIndex._classify
            return [
                min([rank_of[i] for i in found], default=-1)
                for found in map(self._matches, [path[cut:] for path in paths])
            ]
        out = lowest_ranks(self._index, paths, rank_of, cut)
        if NO_RANK in out:
            return [-1 if rank == NO_RANK else rank for rank in out]
        return out

    def lowest_below(
        self,
        paths: Sequence[str],
        rank_of: Sequence[int],
        level_of: Sequence[int],
        unmatched: int,
        bound: tuple[int, str],
        *,
        keep: int = 1,
        cut: int = 0,
    ) -> list[tuple[int, str, int]]:
        """The `keep` lowest keys (level, path) of `paths` that are below `bound`, ascending.

        A path's key is `(level_of[rank], path)` for its `lowest_many` rank, or
        `(unmatched, path)` when no glob matches it; `level_of` must not
        decrease as ranks grow. Returns (level, path, rank; -1 for none) for
        each: the same answer as sorting the keys of `lowest_many`'s ranks that
        are below `bound` and keeping `keep` of them, but a path is only tested
        as far as it could still go below the running bound (`bound`, or the
        `keep`-th lowest key so far).
        How a path is settled with as few tests as it takes: `bounded_search`.
        """
        if keep < 1:
            return []  # (the loop keeps at least one)
        if self._full is not None:  # pragma: no cover - see FolderIndex._classify
            ranks = self.lowest_many(paths, rank_of, cut=cut)
            keys = [
                (unmatched if rank == -1 else level_of[rank], path, rank)
                for path, rank in zip(paths, ranks, strict=True)
            ]
            return sorted(key for key in keys if key[:2] < bound)[:keep]
        return self._search.lowest_below(
            paths, rank_of, level_of, unmatched, bound, keep=keep, cut=cut
        )

    def matches_many(self, paths: Iterable[str]) -> list[list[int]]:
        """`matches` for many paths at once, each list in no particular order.

        A glob index may appear twice in one list (a folder and the file both
        match it); take `min`/`set` of it, do not count it. Faster than calling
        `matches` per path: folder facts are fetched once per run of paths in
        the same folder.
        """
        out: list[list[int]] = []
        append = out.append
        last: str | None = None
        hits: tuple[int, ...] = ()
        files = self._build_facts("").files
        for path in paths:
            folder, _, name = path.rpartition("/")
            if folder != last:
                last = folder
                info = self._facts.get(folder) or self._build_facts(folder)
                hits = info.hits
                files = info.files
            found = [*hits, *files.match(name)]
            if self._full is not None:  # pragma: no cover - see FolderIndex._classify
                found.extend(self._full.find(path))
            append(found)
        return out

    def _enter_folder(
        self, folder: str, used: bytearray, spent: set[int]
    ) -> tuple[NameMatcher, bool, bool]:
        """For `unmatched`: mark the folder's own matches; (its files' rules, covered, skip)."""
        info = self._facts.get(folder) or self._build_facts(folder)
        for index in info.hits:
            used[index] = 1
        files = info.files
        for index in files.everything:
            used[index] = 1
        covers = bool(info.hits or files.everything)
        # A covered folder whose name rules have all matched somewhere already
        # cannot change the answer: its files need no look-ups.
        skip = covers and (id(files) in spent or _all_used(files, used, spent))
        return files, covers, skip

    def _unmatched_by_path(  # pragma: no cover - see FolderIndex._classify
        self, paths: Iterable[str]
    ) -> tuple[list[str], list[int]]:
        uncovered: list[str] = []
        used = bytearray(len(self.globs))
        for path in paths:
            found = self._matches(path)
            if not found:
                uncovered.append(path)
            for index in found:
                used[index] = 1
        return uncovered, [i for i, u in enumerate(used) if not u]

    def unmatched(self, paths: Iterable[str]) -> tuple[list[str], list[int]]:
        """Paths no glob matches, and indices of globs that match none of `paths`.

        The same answers as calling `matches` per path, written out for speed
        (it runs on every commit): the folder's facts are fetched once per run
        of paths in the same folder, and the name rules are applied inline.
        """
        if self._full is not None:  # pragma: no cover - see FolderIndex._classify
            return self._unmatched_by_path(paths)
        uncovered: list[str] = []
        used = bytearray(len(self.globs))
        last: str | None = None
        folder_covers = skip = False
        files = self._build_facts("").files
        spent: set[int] = set()  # name matchers whose every rule is already used
        for path in paths:
            folder, _, name = path.rpartition("/")
            if folder != last:
                last = folder
                files, folder_covers, skip = self._enter_folder(folder, used, spent)
            if skip:
                continue
            covered = folder_covers
            hit = files.literal.get(name)
            if hit:
                covered = True
                for index in hit:
                    used[index] = 1
            dot = name.rfind(".")
            if dot != -1:
                hit = files.ext.get(name[dot:])
                if hit:
                    covered = True
                    for index in hit:
                        used[index] = 1
            if files.lengths or files.regexes is not None:
                for index in files.match_rest(name):
                    covered = True
                    used[index] = 1
            if not covered:
                uncovered.append(path)
        return uncovered, [i for i, u in enumerate(used) if not u]


def _all_used(files: NameMatcher, used: bytearray, spent: set[int]) -> bool:
    if all(used[index] for index in files.indices):
        spent.add(id(files))
        return True
    return False
