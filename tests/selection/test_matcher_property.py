"""GlobMatcher against git's own gitignore engine, on generated globs and paths.

For each glob on its own (so git's "last match wins" cannot hide a match),
`git check-ignore --no-index -z --stdin` with the glob as the only line of an
excludes file says which paths it matches; the matcher must report exactly
the same, for every glob at once. pathspec's per-pattern regex is checked too
(except for names with line breaks, where pathspec's `$` differs from git).
The generated globs deliberately hit the fast paths (exact paths, `dir/**`,
basenames, `*.ext`) as well as the regex ones.

One documented difference is left out of the git comparison: `?` and `[...]`
match one *character* in pathspec (and here) but one *byte* in git, so on a
non-ASCII name (`caf?.md` vs `café.md`) they disagree. The matcher follows
pathspec there, which is what a user reading the glob expects.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from ci_evals.selection.glob_syntax import glob_problem, literal_glob
from ci_evals.selection.global_globs import EVERYTHING, repo_glob, split_navigation, under_root
from ci_evals.selection.matcher import GlobMatcher
from tests.conftest import git

# Small alphabets, so that generated globs and paths actually meet.
_NAME_CHARS = "ab.mdé *[]!#\\\n"
_NAMES = ["a", "b", "ab", "a.md", "b.md", ".md", ".x", "x y", "é", "[a]", "a*", "#c", "!d", "md"]
_GLOB_SEGMENTS = [
    "*",
    "**",
    "?",
    "a*",
    "*a",
    "*.md",
    "*b",
    "[ab]",
    "[!a]*",
    "[a-b]?",
    "a?",
    "\\*",
    "x y",
    "é",
    "a",
    "b",
    "ab",
    ".x",
    "a.md",
    "\\#c",
    "\\!d",
    "**a",
    "a**",
    "*.m?",
    "[]a]",
    "md",
]


def _segment() -> st.SearchStrategy[str]:
    generated = st.text(alphabet=_NAME_CHARS, min_size=1, max_size=3)
    return (st.sampled_from(_NAMES) | generated).filter(lambda s: s not in (".", ".."))


paths_strategy = st.lists(
    st.lists(_segment(), min_size=1, max_size=4).map("/".join), min_size=1, max_size=8, unique=True
)


@st.composite
def globs_strategy(draw: st.DrawFn, paths: list[str]) -> list[str]:
    """Globs of every shape, some built from the paths (exact, `dir/**`, basename)."""
    globs: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["free", "free", "exact", "prefix", "basename", "ext"]))
        path = draw(st.sampled_from(paths))
        parts = [GitIgnoreSpecPattern.escape(p) for p in path.split("/")]
        if kind == "exact":
            glob = "/".join(parts)
        elif kind == "prefix":
            glob = "/".join(parts[: draw(st.integers(1, len(parts)))]) + "/**"
        elif kind == "basename":
            glob = parts[-1] + draw(st.sampled_from(["", "/"]))
        elif kind == "ext":
            glob = "*" + draw(st.sampled_from([".md", "d", ".x", "b"]))
        else:
            segments = draw(st.lists(st.sampled_from(_GLOB_SEGMENTS), min_size=1, max_size=3))
            lead = draw(st.sampled_from(["", "", "/"]))
            trail = draw(st.sampled_from(["", "", "/"]))
            glob = lead + "/".join(segments) + trail
        globs.append(glob)
    return [g for g in globs if glob_problem(g) is None]


def _git_matches(workdir: Path, glob: str, paths: list[str]) -> set[str]:
    excludes = workdir / "excludes"
    excludes.write_bytes(glob.encode("utf-8") + b"\n")
    result = subprocess.run(
        [
            "git",
            "-c",
            f"core.excludesFile={excludes}",
            "check-ignore",
            "--no-index",
            "-z",
            "--stdin",
        ],
        cwd=workdir / "repo",
        input=b"".join(p.encode("utf-8") + b"\0" for p in paths),
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert result.returncode in (0, 1), result.stderr.decode()
    return {p.decode("utf-8") for p in result.stdout.split(b"\0") if p}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("check-ignore")
    (base / "repo").mkdir()
    git(base / "repo", "init", "-q")
    return base


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), paths=paths_strategy)
def test_matcher_agrees_with_git_and_pathspec(
    workdir: Path, data: st.DataObject, paths: list[str]
) -> None:
    globs = data.draw(globs_strategy(paths))
    matcher = GlobMatcher(globs)
    found = {path: set(matcher.matches(path)) for path in paths}
    batch = GlobMatcher(globs).matches_many(paths)  # the batch paths, fresh caches
    assert [set(found) for found in batch] == [found[p] for p in paths]
    # The min-rank batch form (compute-stage), with ranks in a scrambled order.
    rank_of = [(7 * i) % (len(globs) + 3) + 1 for i in range(len(globs))]
    lowest = GlobMatcher(globs).lowest_many(paths, rank_of)
    assert lowest == [min((rank_of[i] for i in found[p]), default=-1) for p in paths]
    # The same with a root folder in front that `cut` skips (how compute-stage calls it).
    rooted = ["plug in/" + p for p in paths]
    assert GlobMatcher(globs).lowest_many(rooted, rank_of, cut=len("plug in/")) == lowest
    # The pruned search for the lowest (level, path): levels from ranks, any bound.
    level_of = [rank // 3 for rank in range(max(rank_of, default=0) + 1)]
    keys = [
        (level_of[r] if r != -1 else 1, "plug in/" + p, r)
        for p, r in zip(paths, lowest, strict=True)
    ]
    for bound in [(1 << 62, ""), *(key[:2] for key in keys), (2, "plug in/b")]:
        below = sorted(key for key in keys if key[:2] < bound)
        for keep in (1, 2, 5):
            pruned = GlobMatcher(globs).lowest_below(
                rooted, rank_of, level_of, 1, bound, keep=keep, cut=8
            )
            assert pruned == below[:keep], (bound, keep)
    uncovered, dead = GlobMatcher(globs).unmatched(paths)
    assert uncovered == [p for p in paths if not found[p]]
    assert dead == [i for i in range(len(globs)) if not any(i in f for f in found.values())]
    for index, glob in enumerate(globs):
        mine = {path for path in paths if index in found[path]}
        comparable = paths
        if "?" in glob or "[" in glob:
            comparable = [p for p in paths if p.isascii()]  # char vs byte, see above
        expected = _git_matches(workdir, glob, comparable)
        assert mine & set(comparable) == expected, f"glob {glob!r}"
        pattern = GitIgnoreSpecPattern(glob)
        for path in paths:
            if "\n" not in path:
                expected = pattern.match_file(path) is not None
                assert (path in mine) == expected, f"glob {glob!r} path {path!r} vs pathspec"


@pytest.mark.parametrize(
    ("glob", "path"),
    [
        ("\\[ /", "[/[ "),
        ("\\[ /", "[ /x"),
        ("a[b] /", "ab /x"),
        ("a[b] /", "ab/x"),
        ("x\\  /", "x  /y"),
    ],
)
def test_spaces_ending_a_wildcard_name_are_kept(workdir: Path, glob: str, path: str) -> None:
    """A name's trailing spaces are not at the end of the glob (a `/` follows), so
    they count; found by the property test above (the matcher matched `[` for `\\[ /`)."""
    assert bool(GlobMatcher([glob]).matches(path)) == bool(_git_matches(workdir, glob, [path]))


def test_question_mark_is_one_character_not_one_byte(workdir: Path) -> None:
    """The one known difference from git (pathspec is the reference here)."""
    assert _git_matches(workdir, "caf?.md", ["café.md", "cafe.md"]) == {"cafe.md"}
    matcher = GlobMatcher(["caf?.md"])
    assert matcher.matches("café.md") == [0]
    assert GitIgnoreSpecPattern("caf?.md").match_file("café.md") is not None


def test_double_star_inside_a_name_is_rejected_because_git_and_pathspec_disagree(
    workdir: Path,
) -> None:
    assert _git_matches(workdir, "a**/*.md", ["a.md", "ab/c.md"]) == {"a.md", "ab/c.md"}
    assert GitIgnoreSpecPattern("a**/*.md").match_file("a.md") is None
    assert glob_problem("a**/*.md") is not None
    assert glob_problem("**.md") is not None


def test_trailing_double_star_slash_is_rejected_because_git_and_pathspec_disagree(
    workdir: Path,
) -> None:
    assert _git_matches(workdir, "a/**/", ["a/x", "a/b/x"]) == {"a/b/x"}
    assert GitIgnoreSpecPattern("a/**/").match_file("a/x") is not None
    assert glob_problem("a/**/") is not None


# --- `global` globs: what the same line means in a .gitignore beside the map ---

_FOLDERS = ["", "m", "m/n"]  # where the map is
_ROOTS = ["", "p", "m", "m/p", "m/n/p", "m/n", "x/p", "a"]
_FOLDER_NAMES = ["m", "n", "p", "x"]


def _git_matches_in(workdir: Path, folder: str, glob: str, paths: list[str]) -> set[str]:
    """`git check-ignore` with `glob` as the only line of `folder/.gitignore`."""
    repo = workdir / "repo"
    ignore = repo / folder / ".gitignore"
    ignore.parent.mkdir(parents=True, exist_ok=True)
    ignore.write_bytes(glob.encode("utf-8") + b"\n")
    try:
        result = subprocess.run(
            ["git", "-c", "core.excludesFile=", "check-ignore", "--no-index", "-z", "--stdin"],
            cwd=repo,
            input=b"".join(p.encode("utf-8") + b"\0" for p in paths),
            capture_output=True,
            check=False,
            timeout=30,
        )
    finally:
        ignore.unlink()
        # The folders made for it go too: git would read a path the test names as a
        # file (`m`) as the folder left on disk, and match it with `m/`.
        folder_path = ignore.parent
        while folder_path != repo:
            folder_path.rmdir()
            folder_path = folder_path.parent
    assert result.returncode in (0, 1), result.stderr.decode()
    return {p.decode("utf-8") for p in result.stdout.split(b"\0") if p}


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    data=st.data(),
    folder=st.sampled_from(_FOLDERS),
    root=st.sampled_from(_ROOTS),
    tails=st.lists(st.lists(_segment(), min_size=1, max_size=3), min_size=1, max_size=8),
)
def test_global_globs_agree_with_git(
    workdir: Path, data: st.DataObject, folder: str, root: str, tails: list[list[str]]
) -> None:
    """A global means what its line means in a `.gitignore` in the map's folder
    (`../` moving that folder up): as a repo-relative glob for any path, and as
    the root-relative globs compute-stage folds into the entries' matcher for
    the paths under root (when it has such a rewrite)."""
    heads = data.draw(
        st.lists(st.lists(st.sampled_from(_FOLDER_NAMES), max_size=3), min_size=len(tails))
    )
    paths = sorted({"/".join([*head, *tail]) for head, tail in zip(heads, tails, strict=False)})
    depth = folder.count("/") + 1 if folder else 0
    navigation = data.draw(
        st.sampled_from(["", "", "./", *(["../"] * depth), "../../"[: 3 * depth]])
    )
    globs = data.draw(globs_strategy(paths))
    if not globs:
        return
    written = navigation + globs[0]
    ups, rest = split_navigation(written)
    if not rest or glob_problem(rest) is not None:
        return
    parts = folder.split("/") if folder else []
    if ups > len(parts):
        return
    base = "/".join(parts[: len(parts) - ups])
    comparable = paths if not ("?" in rest or "[" in rest) else [p for p in paths if p.isascii()]
    expected = _git_matches_in(workdir, base, rest, comparable)
    if glob_problem(repo_glob(base, rest)) is not None:
        return  # the stage map refuses it with file:line (tests/selection/test_stage_map.py)
    whole = GlobMatcher([repo_glob(base, rest)])
    assert {p for p in comparable if whole.matches(p)} == expected, (base, rest)
    rewritten = under_root(base, rest, root)
    event(f"rewritten for root: {'no' if rewritten is None else len(rewritten)}")
    if rewritten is None:
        return
    inside = GlobMatcher(list(rewritten))
    prefix = root + "/" if root else ""
    under = [p for p in comparable if p.startswith(prefix)]
    found = {p for p in under if inside.matches(p[len(prefix) :])}
    assert found == expected & set(under), (base, rest, root, rewritten)


@pytest.mark.parametrize(
    "path", ["stage_map.yaml", "a*b/[x]/map.yaml", "#x/!y.yaml", "e\\v/m.yaml", "sp /m.yaml ", "?"]
)
def test_the_maps_own_path_as_a_glob_is_exactly_that_path(workdir: Path, path: str) -> None:
    """The map itself is always global: its path, escaped (`literal_glob`), matches
    only it (and what is under it, as for any glob), in git as here."""
    glob = literal_glob(path)
    others = [path + "x", "x" + path, path.replace(path[0], "z"), path + "/inside"]
    paths = [path, *others]
    assert _git_matches(workdir, glob, paths) == {path, path + "/inside"}
    assert [bool(GlobMatcher([glob]).matches(p)) for p in paths] == [
        True,
        *(p == path + "/inside" for p in others),
    ]


def test_a_global_naming_a_folder_of_spaces_rewrites_under_root(workdir: Path) -> None:
    # Found by the property above: ` /` is a folder named " " at any depth in a
    # .gitignore (the space is not trailing), which the blank-glob check refused.
    assert _git_matches_in(workdir, "", " /", [" /a", "p/ /a", "p/a"]) == {" /a", "p/ /a"}
    assert under_root("", " /", "p") == (" /",)
    assert under_root("", " /", " /p") == (EVERYTHING,)
