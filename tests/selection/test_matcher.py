"""GlobMatcher on examples: every match is reported, with git's gitignore meaning."""

from __future__ import annotations

import pytest

from ci_evals.selection.glob_syntax import glob_problem
from ci_evals.selection.matcher import GlobMatcher


def _matching(glob: str, paths: list[str]) -> list[str]:
    matcher = GlobMatcher([glob])
    return [path for path in paths if matcher.matches(path) == [0]]


PATHS = [
    "README.md",
    "docs/README.md",
    "docs/guide.md",
    "docs/deep/more/x.md",
    "agents/a.md",
    "agents/sub/b.md",
    "foo/bar/x",
    "foo/x",
    "foo",
    ".hidden",
    "dir/.env",
    "skills/plan/SKILL.md",
    "skills/plan/scripts/run.py",
    "skills/write/SKILL.md",
    "a b/c d.md",
    "café/naïve.md",
    "md/x.txt",
    "x.md/inner.txt",
]

EXAMPLES = {
    # basename globs (no slash) match at any depth, and a folder of that name matches all in it
    "README.md": ["README.md", "docs/README.md"],
    "*.md": [
        "README.md",
        "docs/README.md",
        "docs/guide.md",
        "docs/deep/more/x.md",
        "agents/a.md",
        "agents/sub/b.md",
        "skills/plan/SKILL.md",
        "skills/write/SKILL.md",
        "a b/c d.md",
        "café/naïve.md",
        "x.md/inner.txt",
    ],
    # `*` matches dotfiles (no special leading-dot rule in gitignore)
    ".*": [".hidden", "dir/.env"],
    "*env": ["dir/.env"],
    # a leading slash anchors to root
    "/README.md": ["README.md"],
    "/*.md": ["README.md", "x.md/inner.txt"],
    # any inner slash anchors too
    "docs/README.md": ["docs/README.md"],
    # `foo/*` covers foo/bar/x too: the folder foo/bar matches (git and GitIgnoreSpec)
    "foo/*": ["foo/bar/x", "foo/x"],
    "foo": ["foo/bar/x", "foo/x", "foo"],
    # dir-only: the files under a folder, never a file of that name
    "foo/": ["foo/bar/x", "foo/x"],
    "bar/": ["foo/bar/x"],
    "md/": ["md/x.txt"],
    # `**` forms
    "docs/**": ["docs/README.md", "docs/guide.md", "docs/deep/more/x.md"],
    "**/more/*.md": ["docs/deep/more/x.md"],
    "docs/**/x.md": ["docs/deep/more/x.md"],
    "skills/**/SKILL.md": ["skills/plan/SKILL.md", "skills/write/SKILL.md"],
    "skills/*/scripts/**": ["skills/plan/scripts/run.py"],
    "**/SKILL.md": ["skills/plan/SKILL.md", "skills/write/SKILL.md"],
    "skills/p*/**": ["skills/plan/SKILL.md", "skills/plan/scripts/run.py"],
    "s*/*/SKILL.md": ["skills/plan/SKILL.md", "skills/write/SKILL.md"],
    "agents/*.md": ["agents/a.md"],
    # exact paths, names with spaces and non-ASCII
    "agents/a.md": ["agents/a.md"],
    "a b/c d.md": ["a b/c d.md"],
    "café/*.md": ["café/naïve.md"],
    "caf?/na?ve.md": ["café/naïve.md"],
    # brackets and escapes
    "[ac]*/*.md": ["agents/a.md", "a b/c d.md", "café/naïve.md"],
    "[!ad]*/*.md": ["café/naïve.md"],
    "[!ad]*/*/*.md": ["skills/plan/SKILL.md", "skills/write/SKILL.md"],
    "\\.hidden": [".hidden"],
    # everything
    "*": PATHS,
    "**": PATHS,
    "*/": [p for p in PATHS if "/" in p],
}


@pytest.mark.parametrize(("glob", "expected"), list(EXAMPLES.items()), ids=list(EXAMPLES))
def test_glob_examples(glob: str, expected: list[str]) -> None:
    assert glob_problem(glob) is None
    assert _matching(glob, PATHS) == [p for p in PATHS if p in expected]


def test_reports_every_matching_glob_not_just_the_last() -> None:
    globs = ["skills/**", "*.md", "skills/plan/SKILL.md", "nothing/**", "SKILL.md"]
    matcher = GlobMatcher(globs)
    assert matcher.matches("skills/plan/SKILL.md") == [0, 1, 2, 4]
    assert matcher.matches("skills/plan/scripts/run.py") == [0]
    assert matcher.matches("other.txt") == []
    stages = [3, 2, 5, 1, 4]
    assert matcher.lowest("skills/plan/SKILL.md", stages) == 2
    assert matcher.lowest("other.txt", stages) is None


def test_unmatched_lists_uncovered_paths_and_dead_globs() -> None:
    matcher = GlobMatcher(["agents/*.md", "gone/**", "*.py"])
    uncovered, dead = matcher.unmatched(["agents/a.md", "notes.txt", "x/y.py", "agents/b.txt"])
    assert uncovered == ["notes.txt", "agents/b.txt"]
    assert dead == [1]


def test_same_folder_cache_gives_same_answers_in_any_order() -> None:
    globs = ["a/*/c/**", "**/c/*.md", "a/b/", "*.md", "a/b/c/d.md", "a/**/x*"]
    paths = ["a/b/c/d.md", "a/b/c/x1", "a/b/e.md", "a/q/c/z.md", "a/x", "b/c/y.md"]
    forward = GlobMatcher(globs)
    backward = GlobMatcher(globs)
    answers = {p: forward.matches(p) for p in paths}
    assert {p: backward.matches(p) for p in reversed(paths)} == answers
    assert answers["a/b/c/d.md"] == [0, 1, 2, 3, 4]
    assert answers["a/q/c/z.md"] == [0, 1, 3]
    assert answers["a/x"] == [5]


def test_newline_in_a_name_is_matched_like_git() -> None:
    matcher = GlobMatcher(["*.md", "a*", "x/**/y"])
    assert matcher.matches("dir/a\nb.md") == [0, 1]
    assert matcher.matches("x/\n/y") == [2]
    assert matcher.matches("notes.md\n") == []


def test_invalid_globs_raise() -> None:
    for glob in ["", "#x", "!x", "a\\", "a/**/", "[z-a]"]:
        with pytest.raises(ValueError):
            GlobMatcher([glob])


def test_pruned_search_with_low_wildcards_and_names_everywhere() -> None:
    """`lowest_below` where the low rules are a wildcard name and a suffix active in
    every folder (tried in one call, then one by one) and a literal name ranked below
    all (a global such as `ci-evals.yaml`: looked up even in skipped folders), against
    sorting every path's `lowest_many` key, for every bound."""
    globs = ["a/**", "b/**", "**/test_9*", "*_x.py", "ci-evals.yaml", "c/*.md"]
    rank_of = [30, 40, 10, 20, 0, 35]
    level_of = [rank // 10 for rank in range(50)]
    paths = [
        "a/ci-evals.yaml",
        "a/f.md",
        "a/test_1.py",
        "a/test_9\n.py",  # a line break in a name: the one call must still see it
        "b/k_x.py",
        "b/k\n_x.py",
        "b/test_90.md",
        "c/ci-evals.yaml",
        "c/notes.md",
        "c/test_9",
        "d/u.txt",
    ]
    keys = _sorted_keys(globs, rank_of, level_of, paths, unmatched=2)
    assert keys[:3] == [
        (0, "a/ci-evals.yaml", 0),
        (0, "c/ci-evals.yaml", 0),
        (1, "a/test_9\n.py", 10),
    ]
    _check_every_bound(globs, rank_of, level_of, paths, keys, [(3, "b"), (1, "z")], unmatched=2)


def test_a_folders_own_rules_stay_its_own() -> None:
    """A folder's name rules are built on the rules shared by every folder
    (`README.md`, `*.md`, `t*` at any depth): its own (`a/README.md`, `a/*.md`,
    `a/t?`) must not leak into the shared ones, whichever folder comes first."""
    globs = ["README.md", "*.md", "t*", "a/README.md", "a/*.md", "a/t?", "b/**"]
    paths = ["a/README.md", "b/README.md", "a/x.md", "b/x.md", "a/t1", "b/t1", "c/d/README.md"]
    expected = {
        "a/README.md": [0, 1, 3, 4],
        "b/README.md": [0, 1, 6],
        "a/x.md": [1, 4],
        "b/x.md": [1, 6],
        "a/t1": [2, 5],
        "b/t1": [2, 6],
        "c/d/README.md": [0, 1],
    }
    for order in (paths, list(reversed(paths))):
        matcher = GlobMatcher(globs)
        assert {p: matcher.matches(p) for p in order} == expected


def test_pruned_search_where_only_wildcards_or_extensions_can_go_lower() -> None:
    """`lowest_below` in folders whose globs cover every file at a level at or above
    the bound, where a low extension (`*.md`), a low literal name, a wildcard name,
    or no rule at all (an uncovered file) can still take a file below it; a folder
    that sorts after the bound's path at the bound's level; against sorting every
    path's `lowest_many` key, for every bound."""
    globs = ["a/**", "b/**", "**/test_9*", "*.md", "a/README.md", "README.md", "c/*.txt", "d/*.txt"]
    rank_of = [30, 20, 10, 25, 5, 25, 20, 40]
    level_of = [rank // 10 for rank in range(50)]
    paths = [
        "a/README.md",
        "a/test_9.py",
        "a/x.md",
        "a/y.py",
        "b/README.md",
        "b/test_1",
        "b/u.txt",
        "b/z.md",
        "c/README.md",
        "c/q.txt",
        "c/test_95",
        "c/w.py",
        "d/k.txt",
        "d/v.py",
    ]
    # An uncovered file is of level 1: below every extension, as `compute-stage` ranks it.
    keys = _sorted_keys(globs, rank_of, level_of, paths, unmatched=1)
    assert keys[:5] == [
        (0, "a/README.md", 5),  # a literal name below the folder's `a/**`
        (1, "a/test_9.py", 10),  # a wildcard name
        (1, "c/test_95", 10),
        (1, "c/w.py", -1),  # uncovered
        (1, "d/v.py", -1),  # uncovered, in a folder whose rules are all higher
    ]
    assert (2, "a/x.md", 25) in keys  # an extension below the folder's `a/**`
    more = [(2, "b"), (2, "a0"), (3, "")]
    _check_every_bound(globs, rank_of, level_of, paths, keys, more, unmatched=1)


def test_pruned_search_in_folders_it_need_not_build() -> None:
    """`lowest_below` settles a folder's files without building its facts when no
    glob below the bound can match them and what the folders above pass down
    (their matches, their inherited name rules) matches them. It must still find
    what lies below: a low extension, literal name, or wildcard name; a low glob
    that matches a folder (`**/test_9*` on `b/test_9d/`) or every file in one
    (`c/*`); a file only the folder's own rules match (`e/*/tests/*.py`), or none
    (`d/e/y.py`, `x/y/b.py`), also where no folder above holds a file of its own
    (`d`, `d/e`: the nearest built folder is the root)."""
    globs = [
        "a/**", "b/**", "**/test_9*", "c/*", "*.md", "d/**/x.py", "e/*/tests/*.py",
        "README.md", "f/**", "*.txt", "g/**", "h/**", "**/deep/", "e/**/*.json", "x/*.py",
    ]  # fmt: skip
    rank_of = [60, 60, 10, 15, 25, 50, 35, 20, 70, 55, 60, 60, 65, 45, 55]
    level_of = [rank // 10 for rank in range(80)]
    paths = [
        "a/b/c/README.md",
        "a/b/c/k.txt",
        "a/b/c/test_9.py",
        "b/test_9d/k.txt",
        "c/q.txt",
        "d/e/x.py",
        "d/e/y.py",
        "e/m/tests/t.py",
        "e/m/tests/u.py.txt",
        "e/m/tests/v.bin",
        "e/n/deep/w.json",
        "f/a.py",
        "f/g/h/z.py",
        "g/b.py",
        "g/deep/k.py",
        "h/i/j.txt",
        "x/a.py",
        "x/y/b.py",
    ]
    keys = _sorted_keys(globs, rank_of, level_of, paths, unmatched=1)
    assert keys[:7] == [
        (1, "a/b/c/test_9.py", 10),  # a wildcard name
        (1, "b/test_9d/k.txt", 10),  # a wildcard name matching the folder
        (1, "c/q.txt", 15),  # a wildcard name matching every file of `c`
        (1, "d/e/y.py", -1),  # uncovered
        (1, "e/m/tests/v.bin", -1),  # uncovered, beside files only `e/*/tests/*.py` matches
        (1, "x/y/b.py", -1),  # uncovered: `x/*.py` is for the files of `x` alone
        (2, "a/b/c/README.md", 20),  # a literal name
    ]
    assert (3, "e/m/tests/t.py", 35) in keys
    assert (4, "e/n/deep/w.json", 45) in keys
    more = [(2, "b"), (3, "f"), (5, "a"), (6, "z")]
    _check_every_bound(globs, rank_of, level_of, paths, keys, more, unmatched=1)
    # Below (2, ""), only the level-1 globs can go lower, and none matches in `f`,
    # `g` or `h`. `f/a.py` is matched by `f/**` alone, so `f` is built; then `f/**`
    # matches `f/g/h/z.py` too, and `f/g`, `f/g/h` need not be built; nor need
    # `h`, `h/i`: the root's `*.txt` matches `h/i/j.txt`.
    matcher = GlobMatcher(globs)
    found = matcher.lowest_below(paths, rank_of, level_of, 1, (2, ""), keep=20)
    assert found == keys[:6]
    built = set(matcher._facts)  # (private: what was built is the point here)
    assert {"f", "g"} <= built
    assert not built & {"f/g", "f/g/h", "g/deep", "h", "h/i"}


Key = tuple[int, str, int]


def _sorted_keys(
    globs: list[str], rank_of: list[int], level_of: list[int], paths: list[str], *, unmatched: int
) -> list[Key]:
    """Every path's (level, path, rank) from `lowest_many`, sorted: what `lowest_below`
    must agree with."""
    ranks = GlobMatcher(globs).lowest_many(paths, rank_of)
    pairs = zip(paths, ranks, strict=True)
    return sorted((level_of[r] if r != -1 else unmatched, p, r) for p, r in pairs)


def _check_every_bound(
    globs: list[str],
    rank_of: list[int],
    level_of: list[int],
    paths: list[str],
    keys: list[Key],
    more: list[tuple[int, str]],
    *,
    unmatched: int,
) -> None:
    """`lowest_below` for every key's bound (and `more`), several `keep`s and two path
    orders, against the sorted keys."""
    for bound in [(1 << 62, ""), *(key[:2] for key in keys), *more]:
        below = [key for key in keys if key[:2] < bound]
        for keep in (0, 1, 2, 5, 20):
            for order in (paths, sorted(paths, reverse=True)):
                found = GlobMatcher(globs).lowest_below(
                    order, rank_of, level_of, unmatched, bound, keep=keep
                )
                assert found == below[:keep], (bound, keep)
