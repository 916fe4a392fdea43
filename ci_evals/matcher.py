"""Match many paths against many gitignore-style globs, reporting EVERY match.

The globs mean exactly what pathspec's `GitIgnoreSpec` (and git itself) make
of them: each glob is compiled by `GitIgnoreSpecPattern`, and a path matches a
glob when pathspec's regex for it matches. Why `GitIgnoreSpec` and not the
`"gitignore"` style: the map must agree with git, the tool users check their
globs with (`git check-ignore`). The two styles differ where git's behaviour
differs from its documentation, e.g. `skills/*` — git (and `GitIgnoreSpec`)
count `skills/a/SKILL.md` as matched, because the directory `skills/a`
matches; pathspec 1.x's `"gitignore"` style does not. A stage map says which
files belong to a stage, so "the folder matches, and everything in it" is the
answer users expect. Negation is rejected at load time, so git's
re-include rules never come into play.

Speed comes from indexing, not from a different engine: most globs in a real
map are exact paths, `dir/**` prefixes or basenames (`*.md`, `README.md`), and
those are dictionary look-ups per path segment. Only the rest go through
regexes, bucketed by a literal part every matching path must contain, and each
bucket is tested with one combined alternation first (a binary tree of them,
built lazily, so finding all k matches among n globs costs ~k log n tests).
`tests/test_matcher_property.py` checks the result against git.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pathspec.patterns.gitignore import GitIgnorePatternError
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

# Characters that make a glob segment more than a literal name. A backslash is
# an escape: segments containing one take the (always exact) regex path.
_META = frozenset("*?[\\")

# pathspec marks "matched as a directory" with a named group; the name would
# repeat in a combined alternation, and we do not need it (no negation).
_DIR_MARK = "(?P<ps_d>/)"

# How many regexes a tree leaf tests one by one.
_LEAF_SIZE = 4


@dataclass(frozen=True)
class GlobProblem:
    """Why a glob cannot be used in a stage map."""

    message: str
    hint: str | None = None


def glob_problem(glob: str) -> GlobProblem | None:
    """The reason `glob` is not a usable stage-map glob, or None when it is.

    Everything rejected here either matches nothing in git (blank, `#`
    comment, `/`, unclosed `[`), means something a stage map has no use for
    (`!` negation), or would be read differently by git and by pathspec
    (trailing whitespace, a trailing backslash, POSIX classes).
    """
    for check in (_spelling_problem, _ending_problem, _segment_problem, _compile_problem):
        problem = check(glob)
        if problem is not None:
            return problem
    return None


def _spelling_problem(glob: str) -> GlobProblem | None:
    if not glob.strip():
        return GlobProblem(
            "blank glob",
            "gitignore compiles it to a pattern that matches nothing; remove the entry",
        )
    if any(ch in glob for ch in "\n\r\0"):
        return GlobProblem("glob contains a line break or NUL", "globs are single lines")
    if glob.startswith("#"):
        return GlobProblem(
            "glob starts with '#', which gitignore reads as a comment (it matches nothing)",
            "write '\\#' for a name that starts with '#'",
        )
    if glob.startswith("!"):
        return GlobProblem(
            "negated glob ('!') is not allowed in a stage map",
            "entries only add coverage, so there is nothing to un-match; "
            "write '\\!' for a name that starts with '!'",
        )
    return None


def _ending_problem(glob: str) -> GlobProblem | None:
    if (len(glob) - len(glob.rstrip("\\"))) % 2 == 1:
        return GlobProblem(
            "glob ends with a backslash, which escapes nothing",
            "remove it, or write '\\\\' for a literal backslash",
        )
    stripped = glob.rstrip()
    escaped_space = glob == stripped + " " and (len(stripped) - len(stripped.rstrip("\\"))) % 2
    if stripped != glob and not escaped_space:
        return GlobProblem(
            "glob ends with whitespace, which gitignore silently drops",
            "remove it, or write '\\ ' for a name that ends with a space",
        )
    return None


def _segment_problem(glob: str) -> GlobProblem | None:
    body = glob[1:] if glob.startswith("/") else glob
    body = body[:-1] if body.endswith("/") else body
    segments = body.split("/")
    if any(segment == "" for segment in segments):
        return GlobProblem(
            "glob has an empty path segment ('//', or just '/'), so it matches nothing",
            "globs name files relative to root, e.g. 'agents/x.md' or 'skills/**'",
        )
    if any(segment in (".", "..") for segment in segments):
        return GlobProblem(
            "glob contains a '.' or '..' segment, which never matches a path",
            "globs are relative to root and cannot leave it",
        )
    return None


def _compile_problem(glob: str) -> GlobProblem | None:
    try:
        regex, _include = GitIgnoreSpecPattern.pattern_to_regex(glob)
        if regex is None:
            return GlobProblem(
                "glob has an unclosed '[', so git ignores the whole pattern",
                "write '\\[' for a literal bracket",
            )
        re.compile(regex)
    except (GitIgnorePatternError, re.error) as exc:
        return GlobProblem(f"invalid glob: {exc}")
    if "[:" in glob:
        return GlobProblem(
            "POSIX character classes ('[[:alpha:]]') are not supported",
            "pathspec and git read them differently; use a range such as '[a-z]'",
        )
    return None


def glob_regex(glob: str) -> str:
    """pathspec's regex for `glob` (GitIgnoreSpec style), without its directory-marker group.

    Raises ValueError when `glob` is not usable (see `glob_problem`).
    """
    problem = glob_problem(glob)
    if problem is not None:
        raise ValueError(f"{glob!r}: {problem.message}")
    regex: str | None = GitIgnoreSpecPattern.pattern_to_regex(glob)[0]
    assert regex is not None  # glob_problem rejected the patterns that compile to nothing
    return regex.replace(_DIR_MARK, "/")


def _is_literal(segment: str) -> bool:
    return not _META.intersection(segment)


class _RegexGroup:
    """Regexes (all anchored at `^`) tested together; finds every one that matches.

    A node holds one alternation of all its regexes; only when that matches are
    its two halves tried, down to leaves tested one by one. Nodes are compiled
    on first use, so a bucket no path ever reaches costs nothing.
    """

    __slots__ = ("_children", "_combined", "_compiled", "_indices", "_regexes")

    def __init__(self, indices: Sequence[int], regexes: Sequence[str]) -> None:
        self._indices = tuple(indices)
        self._regexes = tuple(regexes)
        self._combined: re.Pattern[str] | None = None
        self._compiled: tuple[re.Pattern[str], ...] | None = None
        self._children: tuple[_RegexGroup, _RegexGroup] | None = None

    def add_matches(self, path: str, out: list[int]) -> None:
        if len(self._indices) <= _LEAF_SIZE:
            if self._compiled is None:
                self._compiled = tuple(re.compile(r) for r in self._regexes)
            for index, regex in zip(self._indices, self._compiled, strict=True):
                if regex.match(path) is not None:
                    out.append(index)
            return
        if self._combined is None:
            self._combined = re.compile("|".join(f"(?:{r})" for r in self._regexes))
        if self._combined.match(path) is None:
            return
        if self._children is None:
            half = len(self._indices) // 2
            self._children = (
                _RegexGroup(self._indices[:half], self._regexes[:half]),
                _RegexGroup(self._indices[half:], self._regexes[half:]),
            )
        self._children[0].add_matches(path, out)
        self._children[1].add_matches(path, out)


class _Pending:
    """Regexes collected per bucket key before the groups are built."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[list[int], list[str]]] = {}

    def add(self, key: str, index: int, regex: str) -> None:
        indices, regexes = self.items.setdefault(key, ([], []))
        indices.append(index)
        regexes.append(regex)

    def build(self) -> dict[str, _RegexGroup]:
        return {key: _RegexGroup(i, r) for key, (i, r) in self.items.items()}


@dataclass
class _Buckets:
    lead: _Pending = field(default_factory=_Pending)  # matches all lie under a literal folder
    segment: _Pending = field(default_factory=_Pending)  # matches all contain a literal segment
    rest: _Pending = field(default_factory=_Pending)


def _append(table: dict[str, list[int]], key: str, index: int) -> None:
    table.setdefault(key, []).append(index)


class GlobMatcher:
    """Which of `globs` match a path — all of them, not just the last.

    Paths are POSIX, relative to the folder the globs are relative to, and
    name files (a dir-only glob `foo/` matches the files under `foo`). Invalid
    globs raise ValueError; the stage-map loader reports them first, with a
    position, using `glob_problem`.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = tuple(globs)
        # path == key
        self._exact: dict[str, list[int]] = {}
        # some ancestor folder of the path == key
        self._prefix: dict[str, list[int]] = {}
        # some segment of the path == key / some folder segment == key
        self._name_any: dict[str, list[int]] = {}
        self._name_dir: dict[str, list[int]] = {}
        # some segment / folder segment ends with key (`*.md`, `*.md/`)
        self._suffix_any: dict[str, list[int]] = {}
        self._suffix_dir: dict[str, list[int]] = {}
        self._match_all: list[int] = []  # `*`, `**`: every path
        self._match_nested: list[int] = []  # `*/`, `**/`: every path in a folder
        pending = _Buckets()
        for index, glob in enumerate(self.globs):
            regex = glob_regex(glob)
            if regex == ".":
                self._match_all.append(index)
            elif regex == "/":
                self._match_nested.append(index)
            elif not regex.startswith("^"):  # pragma: no cover - pathspec changed
                raise ValueError(f"{glob!r}: unexpected regex {regex!r} from pathspec")
            else:
                self._classify(index, glob, regex, pending)
        self._by_lead = pending.lead.build()
        self._by_segment = pending.segment.build()
        self._rest = pending.rest.build().get("")
        self._suffix_lengths = tuple(
            sorted({len(key) for key in (*self._suffix_any, *self._suffix_dir)})
        )

    def _classify(
        self,
        index: int,
        glob: str,
        regex: str,
        pending: _Buckets,
    ) -> None:
        dir_only = glob.endswith("/")
        body = glob[:-1] if dir_only else glob
        anchored = "/" in body
        if body.startswith("/"):
            body = body[1:]
        segments = body.split("/")
        literal = [_is_literal(s) for s in segments]
        if anchored and all(literal):
            # `a/b/c` matches the path and everything under it; `a/b/c/` only the latter.
            if not dir_only:
                _append(self._exact, body, index)
            _append(self._prefix, body, index)
            return
        if anchored and len(segments) > 1 and segments[-1] == "**" and all(literal[:-1]):
            _append(self._prefix, "/".join(segments[:-1]), index)  # `dir/**`
            return
        if not anchored:
            name = segments[0]
            names = self._name_dir if dir_only else self._name_any
            suffixes = self._suffix_dir if dir_only else self._suffix_any
            if literal[0]:
                _append(names, name, index)  # `README.md`: that name at any depth
                return
            if name.startswith("*") and len(name) > 1 and _is_literal(name[1:]):
                _append(suffixes, name[1:], index)  # `*.md`
                return
        # A regex is left. Bucket it by something every matching path must have.
        if anchored and literal[0] and len(segments) > 1:
            run = 0
            while run < len(segments) - 1 and literal[run] and segments[run] != "**":
                run += 1
            pending.lead.add("/".join(segments[:run]), index, regex)
            return
        fixed = [s for s, is_lit in zip(segments, literal, strict=True) if is_lit and s != "**"]
        if fixed:
            # Each glob segment matches one path segment, so a literal one must appear.
            pending.segment.add(max(fixed, key=len), index, regex)
            return
        pending.rest.add("", index, regex)

    def matches(self, path: str) -> list[int]:
        """Indices (ascending) of every glob that matches `path`."""
        out: list[int] = []
        hit = self._exact.get(path)
        if hit:
            out.extend(hit)
        if self._match_all:
            out.extend(self._match_all)
        slash = path.find("/")
        if slash != -1 and self._match_nested:
            out.extend(self._match_nested)
        prefix, by_lead = self._prefix, self._by_lead
        while slash != -1:
            folder = path[:slash]
            hit = prefix.get(folder)
            if hit:
                out.extend(hit)
            group = by_lead.get(folder)
            if group is not None:
                group.add_matches(path, out)
            slash = path.find("/", slash + 1)
        self._match_segments(path, out)
        if self._rest is not None:
            self._rest.add_matches(path, out)
        if len(out) > 1:
            return sorted(set(out))
        return out

    def _match_segments(self, path: str, out: list[int]) -> None:
        segments = path.split("/")
        last = len(segments) - 1
        name_any, name_dir = self._name_any, self._name_dir
        suffix_any, suffix_dir = self._suffix_any, self._suffix_dir
        lengths = self._suffix_lengths
        by_segment = self._by_segment
        for position, name in enumerate(segments):
            hit = name_any.get(name)
            if hit:
                out.extend(hit)
            if position < last:
                hit = name_dir.get(name)
                if hit:
                    out.extend(hit)
            for length in lengths:
                if length > len(name):
                    break
                tail = name[-length:]
                hit = suffix_any.get(tail)
                if hit:
                    out.extend(hit)
                if position < last:
                    hit = suffix_dir.get(tail)
                    if hit:
                        out.extend(hit)
            group = by_segment.get(name)
            if group is not None:
                group.add_matches(path, out)

    def lowest(self, path: str, stage_of_index: Sequence[int]) -> int | None:
        """The lowest stage among the globs matching `path` (None when none matches)."""
        found = self.matches(path)
        if not found:
            return None
        return min(stage_of_index[i] for i in found)

    def unmatched(self, paths: Iterable[str]) -> tuple[list[str], list[int]]:
        """Paths no glob matches, and indices of globs that match none of `paths`."""
        uncovered: list[str] = []
        used = [False] * len(self.globs)
        for path in paths:
            found = self.matches(path)
            if not found:
                uncovered.append(path)
            for index in found:
                used[index] = True
        return uncovered, [i for i, u in enumerate(used) if not u]
