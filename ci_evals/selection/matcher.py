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

Speed comes from indexing, not from a different engine. A glob matches a path
when the path itself, or one of its folders, is NAME inside a folder meeting a
condition, so each glob is split into that folder condition (anywhere; a
literal folder; anywhere below a literal folder; or a regex on the folder) and
a name rule (a literal name, an extension/suffix, or a regex on the name).
Everything that depends on a folder is computed once per distinct folder and
cached; a file then costs dict look-ups on its name, plus one regex call that
reports every matching wildcard name at once. Folder regexes are only tried
where they can match (below their literal lead, at folders of their literal
last name, at their fixed depth). pathspec still defines each glob's meaning:
the regexes are pathspec's, cut at segment boundaries. Globs on which git and
pathspec disagree are rejected by `glob_problem`, and
`tests/selection/test_matcher_property.py` checks every answer against both.
"""

from __future__ import annotations

import re
import warnings
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

# Characters that make a glob segment more than a literal name. A backslash is
# an escape: segments containing one take the (always exact) regex path.
_META = frozenset("*?[\\")

# pathspec marks "matched as a directory" with a named group; the name would
# repeat in a combined alternation, and we do not need it (no negation).
_DIR_MARK = "(?P<ps_d>/)"

_END_OPT = "(?:/|$)"
_END_OPT_EXACT = "(?:/|\\Z)"
# Above this many regexes a group first tries one plain alternation (cheap "no").
_PREFILTER_AT = 8


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
    if glob in _USABLE and _asked is None:  # `needed_regexes` records what checking asks
        return None
    for check in (_spelling_problem, _ending_problem, _segment_problem, _compile_problem):
        problem = check(glob)
        if problem is not None:
            return problem
    _USABLE.add(glob)
    return None


# Globs `glob_problem` found usable: the loader checks every glob, then the
# matcher it builds would check them all again.
_USABLE: set[str] = set()


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
            "to leave files out of an entry, list them under its except:; "
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
    if glob.endswith("/") and len(segments) > 1 and segments[-1] == "**":
        return GlobProblem(
            "'**/' at the end of a glob: git and pathspec disagree on it",
            "git reads 'dir/**/' as sub-folders only, pathspec as everything under dir; "
            "write 'dir/**' (everything under dir) or 'dir/*/**' (only inside sub-folders)",
        )
    if any("**" in segment and segment != "**" for segment in segments):
        return GlobProblem(
            "'**' inside a name (like 'a**' or '**.md'): git and pathspec disagree on it",
            "'**' means any folders only as a whole segment ('a/**/b'); inside a name write '*'",
        )
    if any(segment in (".", "..") for segment in segments):
        return GlobProblem(
            "glob contains a '.' or '..' segment, which never matches a path",
            "globs are relative to root and cannot leave it",
        )
    return None


def _compile_problem(glob: str) -> GlobProblem | None:
    if "[" not in glob:
        return None  # only bracket expressions can fail to compile (or void the pattern)
    if "[:" in glob:
        return GlobProblem(
            "POSIX character classes ('[[:alpha:]]') are not supported",
            "pathspec and git read them differently; use a range such as '[a-z]'",
        )
    try:
        regex = _spec_regex(glob)
        if regex is None:
            return GlobProblem(
                "glob has an unclosed '[', so git ignores the whole pattern",
                "write '\\[' for a literal bracket",
            )
        if "[" in regex:  # only bracket expressions reach `re` unescaped
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "possible nested set": we only ask "valid?"
                re.compile(regex)
    except ValueError as exc:  # pathspec's GitIgnorePatternError
        return GlobProblem(f"invalid glob: {exc}")
    except re.error as exc:
        return GlobProblem(f"invalid glob: {exc.msg}", "check the '[...]' ranges")
    return None


def glob_regex(glob: str) -> str:
    """pathspec's regex for `glob` (GitIgnoreSpec style), without its directory-marker group.

    Raises ValueError when `glob` is not usable (see `glob_problem`).
    """
    problem = glob_problem(glob)
    if problem is not None:
        raise ValueError(f"{glob!r}: {problem.message}")
    return _raw_regex(glob)


def is_literal(segment: str) -> bool:
    """True when the glob segment `segment` only matches the name it spells."""
    return not _META.intersection(segment)


def literal_glob(path: str) -> str:
    """An anchored glob matching exactly `path` (and, as any glob does, what is under it).

    Wildcards and backslashes are escaped, and so are trailing spaces (gitignore
    drops them at the end of a line); the leading `/` anchors the glob and
    keeps a first `!` or `#` from meaning negation or a comment.
    """
    escaped = re.sub(r"([*?\\[\\\\])", r"\\\1", path)
    body = escaped.rstrip(" ")
    return "/" + body + "\\ " * (len(escaped) - len(body))


class _RegexGroup:
    """Regexes tested in ONE `re` call that reports every one that matches.

    Each regex sits in an empty-able lookahead with a capture group,
    `(?:(?=(R))|)`, so a single `match` at position 0 tries all of them and
    `groups()` says which matched. A regex that several globs share (the
    folder condition of `**/tests/test_1*`, `**/tests/test_2*`, ...) is tried
    once for all of them. Large groups first try a plain alternation,
    which answers the common "none of them" faster. Compiled on first use: a
    bucket no path reaches costs nothing.
    """

    __slots__ = ("_all", "_any", "_indices", "_regexes", "_slots", "depth")

    @property
    def regexes(self) -> tuple[str, ...]:
        """The distinct regexes, in the order they first appear."""
        return self._regexes

    def __init__(
        self, indices: Sequence[int], regexes: Sequence[str], depth: int | None = None
    ) -> None:
        self._indices = tuple(indices)
        distinct: dict[str, list[int]] = {}
        for index, regex in zip(self._indices, regexes, strict=True):
            distinct.setdefault(regex, []).append(index)
        self._regexes = tuple(distinct)
        # The globs each distinct regex reports (None: one per regex, as given).
        self._slots = (
            None if len(distinct) == len(self._indices) else [*map(tuple, distinct.values())]
        )
        self.depth = depth  # folder regexes: the only folder depth they can match (None: any)
        self._all: re.Pattern[str] | None = None
        self._any: re.Pattern[str] | None = None

    def _compile(self) -> re.Pattern[str]:
        regex = re.compile("".join(f"(?:(?=({r}))|)" for r in self._regexes), re.DOTALL)
        if regex.groups != len(self._regexes):  # pragma: no cover - pathspec changed
            raise ValueError("a glob regex has capture groups of its own")
        if len(self._regexes) > _PREFILTER_AT:
            self._any = re.compile("|".join(f"(?:{r})" for r in self._regexes), re.DOTALL)
        self._all = regex
        return regex

    @property
    def indices(self) -> tuple[int, ...]:
        """The glob indices this group reports, in its order."""
        return self._indices

    def find(self, text: str) -> list[int]:
        regex = self._all if self._all is not None else self._compile()
        if self._any is not None and self._any.match(text) is None:
            return []
        found = regex.match(text)
        assert found is not None  # every lookahead may match empty
        if self._slots is None:
            return [i for i, g in zip(self._indices, found.groups(), strict=True) if g is not None]
        # Ascending, the order folder groups are given in (as without shared regexes).
        return sorted(
            [
                i
                for slot, g in zip(self._slots, found.groups(), strict=True)
                if g is not None
                for i in slot
            ]
        )


# pathspec's regex per glob: filled on first need, or from the stage-map cache
# (`ci_evals.selection.map_cache`, keyed on pathspec's installed files), so that a map
# loaded from the cache never imports pathspec (~30-60 ms).
_REGEX_OF: dict[str, str | None] = {}
# While `needed_regexes` runs: every glob `_spec_regex` is asked about.
_asked: set[str] | None = None


def _spec_regex(glob: str) -> str | None:
    """pathspec's regex for `glob` as is (kept: the loader and the matcher both need it).

    pathspec is imported here, on first need: maps of plain paths, `dir/**` and
    `*.ext` never need it, and the hook starts ~30 ms faster without it.
    """
    if _asked is not None:
        _asked.add(glob)
    if glob in _REGEX_OF:
        return _REGEX_OF[glob]
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern  # noqa: PLC0415

    regex: str | None = GitIgnoreSpecPattern.pattern_to_regex(glob)[0]
    _REGEX_OF[glob] = regex
    return regex


def needed_regexes(globs: Sequence[str]) -> dict[str, str | None]:
    """Every pathspec regex that validating `globs` and building their matcher asks for.

    Saved with a cached stage map; `remember_regexes` hands them back, so the
    next run needs no pathspec at all (matching itself never asks for more).
    """
    global _asked  # noqa: PLW0603 - a recording switch for this one call
    _asked = set()
    try:
        GlobMatcher(globs)
        asked = _asked
    finally:
        _asked = None
    return {glob: _spec_regex(glob) for glob in sorted(asked)}


def remember_regexes(regexes: dict[str, str | None]) -> None:
    """Use these regexes (from `needed_regexes`, same pathspec) instead of asking pathspec."""
    for glob, regex in regexes.items():
        _REGEX_OF.setdefault(glob, regex)


def _raw_regex(glob: str) -> str:
    regex = _spec_regex(glob)
    if regex is None:
        raise ValueError(f"{glob!r} compiles to nothing")
    # `$` would also match before a trailing newline; git's end of name is `\Z`.
    return regex.replace(_DIR_MARK, "/").replace(_END_OPT, _END_OPT_EXACT)


def _name_regex(name: str) -> str:
    """pathspec's regex for one path segment `name` (matched against a whole name)."""
    regex = _raw_regex("/" + _keep_trailing_spaces(name))  # `^NAME(?:/|\Z)`
    if not (regex.startswith("^") and regex.endswith(_END_OPT_EXACT)):  # pragma: no cover
        raise ValueError(f"{name!r}: unexpected regex {regex!r} from pathspec")
    return regex[1 : -len(_END_OPT_EXACT)]


def _keep_trailing_spaces(name: str) -> str:
    """`name` with its trailing spaces escaped.

    In the glob the segment came from (`\\[ /`, `a /b`) they were not at the end
    of the line, so they are part of the name; alone, as `/NAME`, gitignore
    (and pathspec) would drop them and match another name (`[`).
    """
    body = name.rstrip(" ")
    spaces = len(name) - len(body)
    if not spaces:
        return name
    if (len(body) - len(body.rstrip("\\"))) % 2:  # the first space is escaped already
        return body + " " + "\\ " * (spaces - 1)
    return body + "\\ " * spaces


@dataclass(frozen=True)
class _NameRule:
    """The last segment of a glob: which names it matches, at which folders.

    Every glob is "some folder condition" + "/" + NAME: a path matches when
    the path itself, or one of its folders, is NAME inside a folder meeting the
    condition (that is how git applies a pattern to a path and its leading
    folders). Dir-only rules (`foo/`) apply to folders only.
    """

    index: int
    dir_only: bool
    literal: str | None  # `README.md`
    suffix: str | None  # `*.md` -> ".md"
    regex: str | None  # anything else, matched against the whole name


class _NameMatcher:
    """The name rules active in one folder, indexed: dicts first, one regex call last."""

    __slots__ = (
        "everything",
        "ext",
        "folder_cache",
        "indices",
        "lengths",
        "literal",
        "regex_rules",
        "regexes",
        "suffix",
    )
    indices: tuple[int, ...]  # every rule's glob index, in order (a base's first)
    regex_rules: tuple[_NameRule, ...]  # the wildcard rules, in the same order

    def __init__(
        self,
        rules: Sequence[_NameRule],
        groups: Callable[[Sequence[_NameRule]], _RegexGroup],
        base: _NameMatcher | None = None,
    ) -> None:
        """The matcher for `rules`, or for `base`'s rules followed by `rules`.

        Most folders' rules are a shared set (the `*.md`-style rules active
        everywhere) plus a few of their own: built on `base`, a matcher costs
        its own rules, not the shared ones again. The tables are copied, and
        their lists replaced, never changed: `base` stays as it was.
        """
        if base is None:
            self.literal: dict[str, list[int]] = {}
            self.ext: dict[str, list[int]] = {}  # `*.md`: one look-up of the name's extension
            self.suffix: dict[str, list[int]] = {}  # other suffixes (`*_test.py`, `*.tar.gz`)
            self.everything: list[int] = []
            regex_rules: tuple[_NameRule, ...] = ()
            indices: tuple[int, ...] = ()
        else:
            self.literal, self.ext = dict(base.literal), dict(base.ext)
            self.suffix, self.everything = dict(base.suffix), list(base.everything)
            regex_rules = base.regex_rules
            indices = base.indices
        new_regex_rules: list[_NameRule] = []
        for rule in rules:
            if rule.literal is not None:
                _added(self.literal, rule.literal, rule.index)
            elif rule.suffix == "":
                self.everything.append(rule.index)
            elif rule.suffix is not None:
                is_ext = rule.suffix.startswith(".") and rule.suffix.count(".") == 1
                _added(self.ext if is_ext else self.suffix, rule.suffix, rule.index)
            else:
                new_regex_rules.append(rule)
        self.lengths = tuple(sorted({len(key) for key in self.suffix}))
        self.regex_rules = (*regex_rules, *new_regex_rules) if new_regex_rules else regex_rules
        if base is not None and not new_regex_rules:
            self.regexes: _RegexGroup | None = base.regexes
        else:  # (`groups` shares one group between all matchers with the same rules)
            self.regexes = groups(self.regex_rules) if self.regex_rules else None
        self.indices = indices + tuple([rule.index for rule in rules])
        # Folder names repeat (`src`, `tests` in every module): their answers are kept.
        self.folder_cache: dict[str, tuple[int, ...]] = {}

    def match_folder(self, name: str) -> tuple[int, ...]:
        """`match` for a folder name, cached."""
        found = self.folder_cache.get(name)
        if found is None:
            found = tuple(self.match(name))
            self.folder_cache[name] = found
        return found

    def match(self, name: str) -> list[int]:
        out = list(self.everything)
        hit = self.literal.get(name)
        if hit:
            out.extend(hit)
        dot = name.rfind(".")
        if dot != -1:
            hit = self.ext.get(name[dot:])
            if hit:
                out.extend(hit)
        if self.lengths or self.regexes is not None:
            out.extend(self.match_rest(name))
        return out

    def match_rest(self, name: str) -> list[int]:
        """The rules that are neither literal names nor extensions."""
        out: list[int] = []
        for length in self.lengths:
            hit = self.suffix.get(name[-length:])
            if hit:
                out.extend(hit)
        if self.regexes is not None:
            out.extend(self.regexes.find(name))
        return out


class _Folder:
    """What a folder contributes to every path inside it (cached per folder)."""

    __slots__ = (
        "base",
        "cond_groups",
        "files",
        "hits",
        "plain_child",
        "self_groups",
        "subfolders",
        "under",
    )

    def __init__(  # noqa: PLR0917 - positional: built for every remarkable folder
        self,
        hits: tuple[int, ...],
        under: tuple[_NameRule, ...],
        self_groups: tuple[_RegexGroup, ...],
        cond_groups: tuple[_RegexGroup, ...],
        base: tuple[_NameMatcher, _NameMatcher],
        files: _NameMatcher,
        subfolders: _NameMatcher,
    ) -> None:
        # The facts of an unremarkable subfolder (no glob mentions it or matches
        # it, no regex to try): shared by all of them, whatever their depth,
        # which then only matters where regex groups exist (never for these).
        self.plain_child: _Folder | None = None
        self.hits = hits  # globs matched by the folder or one of its parents
        self.under = under  # `D/**/NAME` rules active here (D is this folder or above)
        self.self_groups = self_groups  # regexes for this folder and below, by literal lead
        self.cond_groups = cond_groups
        self.base = base  # (files, subfolders) matchers for the rules inherited by subfolders
        self.files = files  # name rules for the files directly in this folder
        self.subfolders = subfolders  # ... and for its subfolders (dir-only rules too)


def _all_used(files: _NameMatcher, used: bytearray, spent: set[int]) -> bool:
    if all(used[index] for index in files.indices):
        spent.add(id(files))
        return True
    return False


# `lowest_many`'s "no match" inside its loop: larger than any rank it accepts.
_NO_RANK = 1 << 62


# What ranking a file needs from its folder's name matcher (one per `rank_of`):
# the min rank per literal name and per extension, and the lowest rank of its
# `match_rest` rules (`_NO_RANK`: it has none).
_Tables = tuple[dict[str, int], dict[str, int], int]


def _tables(files: _NameMatcher, rank_of: Sequence[int]) -> _Tables:
    rest_low = _NO_RANK
    if files.lengths or files.regexes is not None:
        rest = [*chain.from_iterable(files.suffix.values())]
        if files.regexes is not None:
            rest.extend(files.regexes.indices)
        rest_low = min([rank_of[i] for i in rest])
    return _min_ranks(files.literal, rank_of), _min_ranks(files.ext, rank_of), rest_low


# What ranking a folder's files needs (`lowest_many`, `lowest_below`), per folder
# facts object: its files' name matcher, the rank of its own matches (`floor`:
# every file has it; `_NO_RANK`: none), and its name matcher's `_Tables`.
_Ranked = tuple["_NameMatcher", int, dict[str, int], dict[str, int], int]


def _ranked(info: _Folder, rank_of: Sequence[int], tables: dict[int, _Tables]) -> _Ranked:
    """`_Ranked` for `info`; `tables` keeps each name matcher's `_Tables` (for one `rank_of`)."""
    files = info.files
    hits = (*info.hits, *files.everything)
    floor = min([rank_of[i] for i in hits]) if hits else _NO_RANK
    known = tables.get(id(files))
    if known is None:
        known = tables[id(files)] = _tables(files, rank_of)
    literal, ext, rest_low = known
    return files, floor, literal, ext, rest_low


# `lowest_below`'s facts per folder facts object: its `_Ranked`, the lowest rank
# of its extensions, the lowest level a file there can have but by a literal
# name, and the lowest by a literal name.
_Derived = tuple["_NameMatcher", int, dict[str, int], dict[str, int], int, int, int, int]


# `match_rest`'s question "does any of these rules match?" in one C call.
_Quick = Callable[[str], "re.Match[str] | None"]

# `lowest_below`'s facts for a folder it has not built (see `GlobMatcher._preview`):
# does a glob below the bound match a name (None: none can); is every file
# matched by what the folder inherits, or need it not be (no uncovered file can
# go below); the inherited literal names and extensions.
_Preview = tuple[_Quick | None, bool, dict[str, list[int]], dict[str, list[int]]]
_NOTHING: dict[str, list[int]] = {}  # (never changed)


def _quick(rest: _NameMatcher, *, every: bool = False) -> _Quick | None:
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


def _min_ranks(table: dict[str, list[int]], rank_of: Sequence[int]) -> dict[str, int]:
    return {key: min([rank_of[i] for i in indices]) for key, indices in table.items()}


def _append(table: dict[str, list[int]], key: str, index: int) -> None:
    table.setdefault(key, []).append(index)


def _added(table: dict[str, list[int]], key: str, index: int) -> None:
    """`_append`, replacing the list instead of changing it (it may be shared)."""
    table[key] = [*table.get(key, ()), index]


def _add(
    table: dict[tuple[str, int | None], tuple[list[int], list[str]]],
    key: tuple[str, int | None],
    index: int,
    regex: str,
) -> None:
    indices, regexes = table.setdefault(key, ([], []))
    indices.append(index)
    regexes.append(regex)


def _bucket(glob: str) -> tuple[str, int | None]:
    """Where to try a glob's folder regex, and at which folder depth (None: any depth).

    The key is "/NAME" + NUL + FIRST when the folder part ends in a literal
    name (only folders of that name can match; FIRST is the glob's first
    segment when literal, else "": the regex is anchored at the root, so only
    folders under FIRST can match — `area_1/*/tests/**` is not tried at the
    `tests` folders of the other areas), else the literal lead folder (tried in
    it and below). Without `**` the folder part has a fixed number of segments.
    """
    segments = glob.strip("/").split("/")[:-1]
    depth = None if "**" in segments else len(segments)
    return _bucket_key(segments), depth


def _bucket_key(segments: list[str]) -> str:
    if segments and is_literal(segments[-1]):
        # `**/deep/x/`: only folders named `deep` can match (NUL is in no glob or path).
        first = segments[0] if is_literal(segments[0]) else ""
        return f"/{segments[-1]}\0{first}"
    lead: list[str] = []
    for segment in segments:
        if not is_literal(segment):
            break
        lead.append(segment)
    return "/".join(lead)


def _still_possible(
    inherited: tuple[_RegexGroup, ...], depth: int, new: tuple[_RegexGroup, ...]
) -> tuple[_RegexGroup, ...]:
    """Regex groups a folder at `depth` (or below it) can still match."""
    if any(g.depth is not None and g.depth < depth for g in inherited):
        inherited = tuple(g for g in inherited if g.depth is None or g.depth >= depth)
    return (*inherited, *new) if new else inherited


def _by_key(
    table: dict[tuple[str, int | None], tuple[list[int], list[str]]],
) -> dict[str, tuple[_RegexGroup, ...]]:
    groups: dict[str, tuple[_RegexGroup, ...]] = {}
    for (key, depth), (indices, regexes) in table.items():
        groups[key] = (*groups.get(key, ()), _RegexGroup(indices, regexes, depth))
    return groups


class GlobMatcher:
    """Which of `globs` match a path — all of them, not just the last.

    Paths are POSIX, relative to the folder the globs are relative to, and
    name files (a dir-only glob `foo/` matches the files under `foo`). Invalid
    globs raise ValueError; the stage-map loader reports them first, with a
    position, using `glob_problem`.

    Each glob is split into a folder condition and a name rule (see
    `_NameRule`). Everything that depends on a folder is computed once per
    distinct folder and cached: the globs the folder itself matches, and the
    name rules active for its files. A file then costs a few dict look-ups on
    its name (plus one regex call when a wildcard name rule such as `test_*.py`
    is active there), whatever the number of globs.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = tuple(globs)
        self._everywhere: list[int] = []  # `*`, `**`: every path
        self._nested: list[int] = []  # `*/`, `**/`: every path inside a folder
        self._under_folder: dict[str, list[int]] = {}  # `a/b/**`: everything under a/b
        self._any_rules: list[_NameRule] = []  # `*.md`: the name at any depth
        self._in_folder: dict[str, list[_NameRule]] = {}  # `a/*.md`: the name directly in a
        self._below_folder: dict[str, list[_NameRule]] = {}  # `a/**/*.md`: anywhere below a
        # General folder conditions, as regexes matched against "folder/".
        self._rule_of: dict[int, _NameRule] = {}
        # Bucketed by their literal leading folders ("" when there is none).
        cond: dict[tuple[str, int | None], tuple[list[int], list[str]]] = {}
        selves: dict[tuple[str, int | None], tuple[list[int], list[str]]] = {}  # `a/*/**`
        full_indices: list[int] = []  # fallback: whole-path regex per file
        full_regexes: list[str] = []
        for index, glob in enumerate(self.globs):
            problem = glob_problem(glob)
            if problem is not None:
                raise ValueError(f"{glob!r}: {problem.message}")
            # Most globs are indexed in dicts and never need pathspec's regex;
            # only globs made of `*`/`**` alone can be its match-all shortcuts.
            stars_only = not glob.strip("/*").replace("/", "")
            kind = self._classify(index, glob, _raw_regex(glob) if stars_only else "")
            regex = _raw_regex(glob) if kind in ("cond", "self", "full") else ""
            if kind == "cond":
                cond_regex = self._cond_regex(self._rule_of[index], glob, regex)
                _add(cond, _bucket(glob), index, cond_regex)
            elif kind == "self":
                _add(selves, _bucket(glob), index, regex)
            elif kind == "full":  # pragma: no cover - only if pathspec's regex shape changes
                full_indices.append(index)
                full_regexes.append(regex)
        # Keyed "/name" when the glob's last folder is a literal name: tried only at
        # folders of that name. Otherwise keyed by the literal lead: tried in it and below.
        self._cond = _by_key(cond)
        self._self = _by_key(selves)
        self._full = _RegexGroup(full_indices, full_regexes) if full_indices else None
        self._name_matchers: dict[tuple[int, ...], _NameMatcher] = {}
        self._active: dict[
            tuple[tuple[int, ...], tuple[int, ...]], tuple[_NameMatcher, _NameMatcher]
        ] = {}
        self._name_groups: dict[tuple[int, ...], _RegexGroup] = {}
        self._quick: dict[tuple[int, ...], _Quick | None] = {}  # `_quick` per rule set
        self._quick_every: dict[tuple[int, ...], _Quick | None] = {}  # the same, `every=True`
        # `lowest_below`'s matchers of the globs below its bound, by their indices.
        self._subsets: dict[tuple[int, ...], GlobMatcher] = {}
        self._folders: dict[str, _Folder] = {}
        # Folders and folder names some glob singles out (see `_folder`'s fast path).
        self._special_folders = {
            *self._under_folder,
            *self._in_folder,
            *self._below_folder,
            *(key for key in (*self._self, *self._cond) if not key.startswith("/")),
        }
        self._special_names = {
            key[1:].partition("\0")[0] for key in (*self._self, *self._cond) if key.startswith("/")
        }

    # -- building ------------------------------------------------------------

    def _classify(self, index: int, glob: str, regex: str) -> str:
        """Index one glob; returns "done", or the regex table it still needs."""
        if regex == ".":
            self._everywhere.append(index)
            return "done"
        if regex == "/":
            self._nested.append(index)
            return "done"
        dir_only = glob.endswith("/")
        body = glob[:-1] if dir_only else glob
        anchored = "/" in body
        body = body.removeprefix("/")
        *folder_segments, name = body.split("/")
        if name == "**":
            if all(is_literal(s) for s in folder_segments):
                _append(self._under_folder, "/".join(folder_segments), index)  # `a/b/**`
                return "done"
            return "self" if _raw_regex(glob).endswith("/") else "full"
        rule = self._name_rule(index, name, dir_only)
        self._rule_of[index] = rule
        if not anchored or (all(s == "**" for s in folder_segments) and folder_segments):
            self._any_rules.append(rule)  # `*.md`, `**/*.md`
        elif all(is_literal(s) for s in folder_segments):
            self._in_folder.setdefault("/".join(folder_segments), []).append(rule)
        elif (
            len(folder_segments) > 1
            and folder_segments[-1] == "**"
            and all(is_literal(s) for s in folder_segments[:-1])
        ):
            self._below_folder.setdefault("/".join(folder_segments[:-1]), []).append(rule)
        else:
            return "cond"
        return "done"

    @staticmethod
    def _name_rule(index: int, name: str, dir_only: bool) -> _NameRule:
        if is_literal(name):
            return _NameRule(index, dir_only, literal=name, suffix=None, regex=None)
        if name.startswith("*") and is_literal(name[1:]):
            return _NameRule(index, dir_only, literal=None, suffix=name[1:], regex=None)
        return _NameRule(index, dir_only, literal=None, suffix=None, regex=_name_regex(name))

    @staticmethod
    def _cond_regex(rule: _NameRule, glob: str, regex: str) -> str:
        """The folder condition of `glob` as a regex that must match all of "folder/"."""
        name = glob.rstrip("/").rsplit("/", 1)[1]
        tail = _name_regex(name) + ("/" if rule.dir_only else _END_OPT_EXACT)
        if not regex.endswith(tail) or not regex[: -len(tail)].endswith("/"):  # pragma: no cover
            raise ValueError(f"{glob!r}: unexpected regex {regex!r} from pathspec")
        return regex[: -len(tail)] + "\\Z"

    def _active_names(
        self, under: Sequence[_NameRule], here: Sequence[_NameRule]
    ) -> tuple[_NameMatcher, _NameMatcher]:
        """(files, subfolders) matchers for the `_any_rules` plus `under` and `here`.

        Kept by the rules' indices: many folders get the same extra rules, and
        building the key of `_names` walks every `_any_rules` entry. Each is
        built on the matchers without `here` (or without `under`), so only the
        folder's own rules are indexed anew.
        """
        key = (tuple([r.index for r in under]), tuple([r.index for r in here]))
        found = self._active.get(key)
        if found is None:
            if here or under:
                files, subfolders = (
                    self._active_names(under, ()) if here else self._active_names((), ())
                )
                extra = here or under
                found = (
                    self._names([r for r in extra if not r.dir_only], files),
                    self._names(extra, subfolders),
                )
            else:
                rules = self._any_rules
                found = (self._names([r for r in rules if not r.dir_only]), self._names(rules))
            self._active[key] = found
        return found

    def _names(self, rules: Sequence[_NameRule], base: _NameMatcher | None = None) -> _NameMatcher:
        """The matcher for `rules` (after `base`'s rules, when given), shared by rule indices."""
        if not rules and base is not None:
            return base
        key = tuple([rule.index for rule in rules])
        if base is not None:
            key = base.indices + key
        matcher = self._name_matchers.get(key)
        if matcher is None:
            matcher = _NameMatcher(rules, self._name_group, base)
            self._name_matchers[key] = matcher
        return matcher

    def _name_group(self, rules: Sequence[_NameRule]) -> _RegexGroup:
        """One regex group for wildcard name rules (shared: many folders have the same ones)."""
        key = tuple(rule.index for rule in rules)
        group = self._name_groups.get(key)
        if group is None:
            group = _RegexGroup(key, [f"(?:{rule.regex})\\Z" for rule in rules])
            self._name_groups[key] = group
        return group

    def _root(self) -> _Folder:
        base = self._any_rules
        base_files = self._names([rule for rule in base if not rule.dir_only])
        base_subfolders = self._names(base)
        here = self._in_folder.get("", ())  # `/*.md`
        info = _Folder(
            hits=tuple(sorted(set(self._everywhere))),
            under=(),
            self_groups=self._self.get("", ()),
            cond_groups=self._cond.get("", ()),
            base=(base_files, base_subfolders),
            files=self._names([r for r in (*base, *here) if not r.dir_only])
            if here
            else base_files,
            subfolders=self._names([*base, *here]) if here else base_subfolders,
        )
        self._folders[""] = info
        return info

    def _folder(self, folder: str) -> _Folder:
        """The cached facts about `folder`, built from its parent's.

        Most folders add nothing to their parent's answer; they share its
        tuples and name matchers instead of building new ones.
        """
        if not folder:
            return self._root()
        parent_name, _, name = folder.rpartition("/")
        parent = self._folders.get(parent_name) or self._folder(parent_name)
        if (
            parent_name
            and not parent.self_groups
            and not parent.cond_groups
            and folder not in self._special_folders
            and name not in self._special_names
            and not parent.subfolders.match_folder(name)
        ):
            info = parent.plain_child or self._plain_child(parent)
            self._folders[folder] = info
            return info
        return self._remarkable_folder(folder, parent_name, name, parent)

    def _remarkable_folder(
        self, folder: str, parent_name: str, name: str, parent: _Folder
    ) -> _Folder:
        """`_folder` for a folder some glob mentions, matches, or may match by regex."""
        extra: list[int] = [*parent.subfolders.match_folder(name)]
        if not parent_name:
            extra.extend(self._nested)
        under_here = self._under_folder.get(folder)
        if under_here:
            extra.extend(under_here)
        self_groups, cond_groups = parent.self_groups, parent.cond_groups
        here = list(self._in_folder.get(folder, ()))
        if self_groups or cond_groups or folder in self._self or folder in self._cond:
            depth = folder.count("/") + 1
            self_groups = _still_possible(self_groups, depth, self._self.get(folder, ()))
            cond_groups = _still_possible(cond_groups, depth, self._cond.get(folder, ()))
        self_groups_here, cond_groups_here = self_groups, cond_groups
        if name in self._special_names:
            anywhere, under_first = f"/{name}\0", f"/{name}\0{folder.partition('/')[0]}"
            self_groups_here = (
                *self_groups,
                *self._self.get(anywhere, ()),
                *self._self.get(under_first, ()),
            )
            cond_groups_here = (
                *cond_groups,
                *self._cond.get(anywhere, ()),
                *self._cond.get(under_first, ()),
            )
        if self_groups_here or cond_groups_here:
            depth = folder.count("/") + 1
            slashed = folder + "/"
            for group in self_groups_here:
                if group.depth is None or group.depth == depth:
                    extra.extend(group.find(slashed))
            rule_of = self._rule_of
            for group in cond_groups_here:
                if group.depth is None or group.depth == depth:
                    here.extend([rule_of[i] for i in group.find(slashed)])
        below = self._below_folder.get(folder)
        under, base = parent.under, parent.base
        if below:
            under = (*under, *below)
            base = self._active_names(under, ())
        files, subfolders = self._active_names(under, here) if here else base
        info = _Folder(
            tuple(sorted({*parent.hits, *extra})) if extra else parent.hits,
            under,
            self_groups,
            cond_groups,
            base,
            files,
            subfolders,
        )
        self._folders[folder] = info
        return info

    def _plain_child(self, parent: _Folder) -> _Folder:
        files, subfolders = parent.base
        if parent.files is files and parent.subfolders is subfolders:
            child = parent
        else:
            child = _Folder(
                hits=parent.hits,
                under=parent.under,
                self_groups=(),
                cond_groups=(),
                base=parent.base,
                files=files,
                subfolders=subfolders,
            )
        parent.plain_child = child
        return child

    # -- matching ------------------------------------------------------------

    def matches(self, path: str) -> list[int]:
        """Indices (ascending) of every glob that matches `path`."""
        out = self._matches(path)
        return sorted(set(out)) if len(out) > 1 else out

    def _matches(self, path: str) -> list[int]:
        """The matching indices in no particular order, possibly repeated (the hot path)."""
        folder, _, name = path.rpartition("/")
        info = self._folders.get(folder) or self._folder(folder)
        out = info.files.match(name)
        if info.hits:
            out.extend(info.hits)
        if self._full is not None:  # pragma: no cover - see _classify
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

        What `compute-stage` needs per changed file (ranks order entries by
        stage, then position), without building a list of matches per path:
        the folder's own matches are reduced to one number when the folder is
        entered, and literal-name and extension rules to per-matcher tables of
        minimum ranks (`_ranked`, shared with `lowest_below`: both are `_rank`);
        suffix and wildcard rules are asked only when they rank below the
        file's best so far. Ranks must be >= 0 and below 2**62. Each path's first `cut` characters
        are skipped (the root folder and its slash, so the caller need not
        copy 100,000 paths to cut it off); the folder is cut once per run of
        same-folder paths instead.
        """
        if self._full is not None:  # pragma: no cover - see _classify
            return [
                min([rank_of[i] for i in found], default=-1)
                for found in map(self._matches, [path[cut:] for path in paths])
            ]
        out = self._rank(paths, rank_of, cut, None)[0]
        if _NO_RANK in out:
            return [-1 if rank == _NO_RANK else rank for rank in out]
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
        A folder's facts are built (`_folder`) only when one of its files needs
        them: most files are settled by the few globs below the bound and what
        the folders above pass down (`_preview`). A built folder whose every
        file is matched (by globs on the folder, or that match all its files)
        and whose active rules are all of a level above the minimum — or
        equal, for a path that is not smaller — is skipped without a look-up
        (but one of its literal names, when such a rule is below); and wildcard
        names are tried only when their rules could lower a path's key below
        the minimum — only those rules, first all at once in one regex call
        (`_quick`), then, on a hit, one by one.
        Where only such rules can (a `**/test_1*` of a low stage active in
        every folder), that one call is all a file costs, once it is known
        to be matched (by the folder, or its extension).
        """
        if keep < 1:
            return []  # (the loop keeps at least one)
        if self._full is not None:  # pragma: no cover - see _classify
            ranks = self.lowest_many(paths, rank_of, cut=cut)
            keys = [
                (unmatched if rank == -1 else level_of[rank], path, rank)
                for path, rank in zip(paths, ranks, strict=True)
            ]
            return sorted(key for key in keys if key[:2] < bound)[:keep]
        return self._rank(paths, rank_of, cut, (level_of, unmatched, bound, keep))[1]

    def _rank(  # noqa: PLR0912, PLR0915 - one hot loop, inlined for speed
        self,
        paths: Iterable[str],
        rank_of: Sequence[int],
        cut: int,
        search: tuple[Sequence[int], int, tuple[int, str], int] | None,
    ) -> tuple[list[int], list[tuple[int, str, int]]]:
        """The one ranking loop: `lowest_many`'s every rank (`search` None: in
        path order, `_NO_RANK` for none), or `lowest_below`'s search (`search`
        is its level_of, unmatched, bound and keep: the keys found)."""
        out: list[int] = []
        append = out.append
        found: list[tuple[int, str, int]] = []
        none = _NO_RANK  # "no match" while looping: `rank < best` needs no extra test
        every = search is None
        if search is None:  # every rank: no bound (no level, no path is below "")
            level_of: Sequence[int] = ()
            unmatched, level_b, path_b, keep = none, none, "", 0
            limit_lt = limit_le = none
        else:
            level_of, unmatched, (level_b, path_b), keep = search
            # Ranks below `limit_lt` are of a level below the bound's, below `limit_le` of
            # one at most equal to it (`level_of` does not decrease).
            limit_lt = bisect_left(level_of, level_b)
            limit_le = bisect_right(level_of, level_b)
        below: dict[tuple[int, int], tuple[_NameMatcher, _Quick | None]] = {}
        last: str | None = None
        floor = rest_low = ext_low = none
        lowest = unmatched  # the lowest level a file of the current folder can have
        lowest_named = none  # ... by one of its literal names (`lowest` leaves them out)
        # The rules `match_rest` needs for the last name matcher and limit asked.
        asked_files: _NameMatcher | None = None
        asked_limit = -1
        rest_rules, quick = self._folder("").files, None
        fast: _Quick | None = None
        narrow: bool | None = None
        covered = pruning = False
        tables: dict[int, _Tables] = {}
        ranked_seen: dict[int, _Ranked] = {}
        seen: dict[int, _Derived] = {}
        literal: dict[str, int] = {}
        ext: dict[str, int] = {}
        files = self._folder("").files
        get_folder = self._folders.get
        lows: dict[int, GlobMatcher | None] = {}
        preview: _Preview | None = None
        low_quick: _Quick | None = None
        inherited = False
        inherited_literal: dict[str, list[int]] = {}
        inherited_ext: dict[str, list[int]] = {}

        def facts_of(info: _Folder) -> _Derived:
            # Many folders share their facts (`_plain_child`): what this
            # search derives from them is kept per facts object.
            derived = seen.get(id(info))
            if derived is None:
                derived = seen[id(info)] = self._derive(info, rank_of, level_of, unmatched, tables)
            return derived

        for path in paths:
            folder, _, name = path.rpartition("/")
            if folder != last:
                last = folder
                relative = folder[cut:]
                info = get_folder(relative)
                if every:
                    info = info or self._folder(relative)
                    ranked = ranked_seen.get(id(info))
                    if ranked is None:
                        ranked = ranked_seen[id(info)] = _ranked(info, rank_of, tables)
                    files, floor, literal, ext, rest_low = ranked
                else:
                    pruning = True
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
                        derived = facts_of(info or self._folder(relative))
                        files, floor, literal, ext, rest_low, ext_low, lowest, lowest_named = (
                            derived
                        )
                        narrow = None  # worked out below, for the first file that needs it
                    else:
                        low_quick, inherited, inherited_literal, inherited_ext = preview
            if pruning:  # (a search: may this file still go below the bound?)
                if preview is not None:
                    if (low_quick is None or low_quick(name) is None) and (
                        inherited
                        or name in inherited_literal
                        or name[name.rfind(".") :] in inherited_ext
                    ):
                        continue  # matched (so not uncovered), by no glob that could go lower
                    preview = None  # this file may go lower: the folder's facts decide
                    info = get_folder(relative) or self._folder(relative)
                    derived = facts_of(info)
                    files, floor, literal, ext, rest_low, ext_low, lowest, lowest_named = derived
                    narrow = None
                # Nothing in this folder goes below the minimum, unless by its literal
                # name (a named file is tested in full: the test below says if it does).
                if (lowest > level_b or (lowest == level_b and path >= path_b)) and (
                    name not in literal
                    or lowest_named > level_b
                    or (lowest_named == level_b and path >= path_b)
                ):
                    continue
                if narrow is None:
                    # When neither the folder's globs nor its extensions can take a file
                    # below the bound, only its suffix and wildcard rules can (or a
                    # literal name: such a file is tested in full). Their one-call test
                    # (`_quick`) rules out most files with no look-up, given the file is
                    # matched at all (by the folder, or an extension). Every path here
                    # sorts after the bound's when the folder does (`a/b/` > `a/a.md` >
                    # `a/`). A later, lower bound leaves it right: it tests a superset
                    # of the rules that still could.
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
                if every or best == none:  # every rule (none: they decide if it is matched)
                    for index in files.match_rest(name):
                        rank = rank_of[index]
                        if rank < best:  # noqa: PLR1730
                            best = rank
                elif rest_low < limit_lt or (rest_low < limit_le and path < path_b):
                    # Only the rules that can take it below the bound.
                    limit = limit_le if path < path_b else limit_lt
                    if limit != asked_limit or files is not asked_files:
                        asked_files, asked_limit = files, limit
                        rest_rules, quick = below.get((id(files), limit)) or self._rules_below(
                            files, rank_of, limit, below
                        )
                    if quick is not None and quick(name) is not None:
                        for index in rest_rules.match_rest(name):
                            rank = rank_of[index]
                            if rank < best:  # noqa: PLR1730
                                best = rank
            if every:
                append(best)
                continue
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
            if len(found) == keep:
                level_b, path_b, _ = found[-1]
                limit_lt = bisect_left(level_of, level_b)
                limit_le = bisect_right(level_of, level_b)
        return out, found

    def _preview(
        self,
        relative: str,
        limit: int,
        uncovered_below: bool,
        rank_of: Sequence[int],
        lows: dict[int, GlobMatcher | None],
    ) -> _Preview | None:
        """For `lowest_below`: how to settle the files of `relative`, a folder not
        built yet, without building it (None: it must be built).

        A file there goes below the bound only by a glob ranked below `limit`, or
        by matching no glob at all (when `uncovered_below`). A matcher of those
        few globs says whether one matches it (its folder facts are cheap: few of
        its globs single a folder out). The facts of the nearest folder above
        that is built say whether it is matched at all, by what every folder
        below inherits (and adds to): the globs that match that folder or one
        above it (`hits`), and the name rules of `base`. A file that they match
        and no low glob does is settled by one regex call and a look-up or two,
        however many globs single its folder (or the folders between) out.
        """
        if limit not in lows:
            lows[limit] = self._low_matcher(rank_of, limit)
        low = lows[limit]
        if low is None:
            return None
        quick = None
        if low.globs:
            facts = low._folders.get(relative) or low._folder(relative)
            files = facts.files
            if facts.hits or files.everything:
                return None  # a low glob matches every file here
            key = files.indices
            if key in low._quick_every:
                quick = low._quick_every[key]
            else:
                quick = low._quick_every[key] = _quick(files, every=True)
        if not uncovered_below:
            return quick, True, _NOTHING, _NOTHING  # whether matched or not, it stays above
        above: _Folder | None = None
        while above is None:  # (the root is built: `lowest_below` starts there)
            relative = relative.rpartition("/")[0]
            above = self._folders.get(relative)
        base = above.base[0]
        return quick, bool(above.hits or base.everything), base.literal, base.ext

    def _low_matcher(self, rank_of: Sequence[int], limit: int) -> GlobMatcher | None:
        """A matcher of the globs ranked below `limit`; None when they are more than
        half of them (their folder facts would cost about as much as all globs')."""
        low = tuple([i for i, rank in enumerate(rank_of[: len(self.globs)]) if rank < limit])
        if 2 * len(low) > len(self.globs):
            return None
        matcher = self._subsets.get(low)
        if matcher is None:
            matcher = self._subsets[low] = GlobMatcher([self.globs[i] for i in low])
        return matcher

    @staticmethod
    def _derive(
        info: _Folder,
        rank_of: Sequence[int],
        level_of: Sequence[int],
        unmatched: int,
        tables: dict[int, _Tables],
    ) -> _Derived:
        """For `lowest_below`: what a folder's facts say before any file is looked at
        (see `_Derived`)."""
        none = _NO_RANK
        files, floor, literal, ext, rest_low = _ranked(info, rank_of, tables)
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

    def _rules_below(
        self,
        files: _NameMatcher,
        rank_of: Sequence[int],
        limit: int,
        below: dict[tuple[int, int], tuple[_NameMatcher, _Quick | None]],
    ) -> tuple[_NameMatcher, _Quick | None]:
        """For `lowest_below`: `files`, with only its suffix and wildcard rules below
        `limit`, and their one-call test (`_quick`)."""
        rules = [self._rule_of[i] for i in files.indices if rank_of[i] < limit]
        rest = self._names([r for r in rules if r.literal is None and r.suffix != ""])
        key = tuple(rest.indices)
        if key in self._quick:
            quick = self._quick[key]
        else:
            quick = self._quick[key] = _quick(rest)
        below[id(files), limit] = (rest, quick)
        return rest, quick

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
        files = self._folder("").files
        for path in paths:
            folder, _, name = path.rpartition("/")
            if folder != last:
                last = folder
                info = self._folders.get(folder) or self._folder(folder)
                hits = info.hits
                files = info.files
            found = [*hits, *files.match(name)]
            if self._full is not None:  # pragma: no cover - see _classify
                found.extend(self._full.find(path))
            append(found)
        return out

    def _enter_folder(
        self, folder: str, used: bytearray, spent: set[int]
    ) -> tuple[_NameMatcher, bool, bool]:
        """For `unmatched`: mark the folder's own matches; (its files' rules, covered, skip)."""
        info = self._folders.get(folder) or self._folder(folder)
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

    def _unmatched_by_path(  # pragma: no cover - see _classify
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
        if self._full is not None:  # pragma: no cover - see _classify
            return self._unmatched_by_path(paths)
        uncovered: list[str] = []
        used = bytearray(len(self.globs))
        last: str | None = None
        folder_covers = skip = False
        files = self._folder("").files
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
