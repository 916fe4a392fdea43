"""What a stage-map glob means, and why one is refused.

The globs mean exactly what pathspec's `GitIgnoreSpec` (and git itself) make
of them: each glob is compiled by `GitIgnoreSpecPattern`, and a path matches a
glob when pathspec's regex for it matches. Why `GitIgnoreSpec` and not the
`"gitignore"` style: the map must agree with git, the tool users check their
globs with (`git check-ignore`); the two differ where git's behaviour differs
from its documentation (`skills/*` matches `skills/a/SKILL.md` in git, because
the folder `skills/a` matches). Globs on which git and pathspec disagree, and
negation, are refused by `glob_problem` (docs/stage-map.md lists the rules);
`tests/selection/test_matcher_property.py` checks every answer against both.

pathspec is imported only when a regex is first needed (`spec_regex`), and a
map loaded from the stage-map cache brings the regexes along
(`remember_regexes`), so the hook usually never imports it.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

# Characters that make a glob segment more than a literal name. A backslash is
# an escape: segments containing one take the (always exact) regex path.
_META = frozenset("*?[\\")

# pathspec marks "matched as a directory" with a named group; the name would
# repeat in a combined alternation, and we do not need it (no negation).
_DIR_MARK = "(?P<ps_d>/)"

_END_OPT = "(?:/|$)"
END_OPT_EXACT = "(?:/|\\Z)"  # a glob regex's end: the name ends, or a folder's slash follows


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
    if glob in _USABLE and _asked is None:  # `regexes_asked_while` records what checking asks
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


# pathspec's regex per glob: filled on first need, or from the stage-map cache
# (`ci_evals.selection.map_cache`, keyed on pathspec's installed files), so that a map
# loaded from the cache never imports pathspec (~30-60 ms).
_REGEX_OF: dict[str, str | None] = {}
# While `regexes_asked_while` runs: every glob `_spec_regex` is asked about.
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


def regexes_asked_while(build: Callable[[], object]) -> dict[str, str | None]:
    """Every pathspec regex that checking globs and indexing them asks for during `build`.

    `matcher.needed_regexes` saves them with a cached stage map;
    `remember_regexes` hands them back, so the next run needs no pathspec.
    """
    global _asked  # noqa: PLW0603 - a recording switch for this one call
    _asked = set()
    try:
        build()
        asked = _asked
    finally:
        _asked = None
    return {glob: _spec_regex(glob) for glob in sorted(asked)}


def remember_regexes(regexes: dict[str, str | None]) -> None:
    """Use these regexes (from `regexes_asked_while`, same pathspec) instead of asking pathspec."""
    for glob, regex in regexes.items():
        _REGEX_OF.setdefault(glob, regex)


def raw_regex(glob: str) -> str:
    """pathspec's regex for `glob`, ready to combine (no directory mark, `\\Z` at the end)."""
    regex = _spec_regex(glob)
    if regex is None:
        raise ValueError(f"{glob!r} compiles to nothing")
    # `$` would also match before a trailing newline; git's end of name is `\Z`.
    return regex.replace(_DIR_MARK, "/").replace(_END_OPT, END_OPT_EXACT)


def name_regex(name: str) -> str:
    """pathspec's regex for one path segment `name` (matched against a whole name)."""
    regex = raw_regex("/" + _keep_trailing_spaces(name))  # `^NAME(?:/|\Z)`
    if not (regex.startswith("^") and regex.endswith(END_OPT_EXACT)):  # pragma: no cover
        raise ValueError(f"{name!r}: unexpected regex {regex!r} from pathspec")
    return regex[1 : -len(END_OPT_EXACT)]


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
