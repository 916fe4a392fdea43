"""`selection.tree_diff.TreeDiffer`: one `git diff-tree --stdin` for many tree pairs,
cut into one output per pair however git's writes arrive."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ci_evals import git as gitmod
from ci_evals.selection.tree_diff import PairSplitter, TreeDiffer
from tests.conftest import git
from tests.stage_repo import commit, write

OLD, NEW = "1" * 40, "2" * 40
HEADERS = [f"{OLD} {NEW}\n".encode(), f"{NEW} {OLD}\n".encode(), f"{OLD} {OLD}\n".encode()]
# Names that look like the protocol: a newline, a header, a path with folders.
OUTPUTS = [
    b"a/b.md\0new\nline\0" + HEADERS[1] + b"x\0",
    b"",  # two trees that differ in nothing git lists
    b"-\0" + HEADERS[2][:-1] + b"\0z/" + b"/\n\0",
]
STREAM = b"".join(h + out + b"/\n" for h, out in zip(HEADERS, OUTPUTS, strict=True))


def split(stream: bytes, cuts: list[int]) -> tuple[list[list[bytes]], bool]:
    """Feed `stream` cut at `cuts`, as git's output may arrive."""
    splitter = PairSplitter(HEADERS)
    bounds = sorted({0, *cuts, len(stream)})
    got = [splitter.feed(stream[a:b]) for a, b in pairwise(bounds)]
    return [done for done in got if done], splitter.finished()


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_each_pair_is_cut_exactly_wherever_the_pieces_end(cuts: list[int]) -> None:
    got, complete = split(STREAM, cuts)

    assert complete
    assert [out for outputs in got for out in outputs] == OUTPUTS


def test_a_pair_is_handed_over_as_soon_as_it_ends() -> None:
    first_end = len(HEADERS[0] + OUTPUTS[0] + b"/\n")

    got, _ = split(STREAM, [first_end])

    assert got[0] == [OUTPUTS[0]]


@pytest.mark.parametrize(
    "stream",
    [
        STREAM[:-1],  # ended early
        HEADERS[0] + OUTPUTS[0] + b"/\n" + HEADERS[2] + b"/\n",  # not the pair asked for
        STREAM + b"more\0",  # more than asked for
    ],
)
def test_unexpected_output_is_not_complete(stream: bytes) -> None:
    _, complete = split(stream, [])

    assert not complete


def streamed(repo: Path, pairs: list[tuple[str, str]], **options: float) -> list[bytes]:
    with TreeDiffer(repo, **options) as differ:
        return [out for outputs in differ.diffs(pairs) for out in outputs]


def test_real_git_streams_the_same_as_separate_diffs(repo: Path) -> None:
    for name in ("a/x.md", "a/new\nline", "b/y.md", "c/deep/z.md"):
        write(repo, name, "1\n")
    commit(repo, "one")
    write(repo, "a/x.md", "2\n")
    write(repo, "c/deep/w.md", "new\n")
    commit(repo, "two")
    trees = {
        folder: (
            git(repo, "rev-parse", f"HEAD~1:{folder}"),
            git(repo, "rev-parse", f"HEAD:{folder}"),
        )
        for folder in ("a", "b", "c")
    }
    pairs = [(old.strip(), new.strip()) for old, new in trees.values()]
    pairs.append((gitmod.EMPTY_TREE[40], pairs[2][1]))  # everything in c, as added

    got = streamed(repo, pairs)

    assert got == [b"x.md\0", b"", b"deep/w.md\0", b"deep/w.md\0deep/z.md\0"]


def test_git_failing_is_an_error(repo: Path) -> None:
    write(repo, "a.md")
    commit(repo)

    with pytest.raises(gitmod.GitError, match="diff-tree"):
        streamed(repo, [("f" * 40, "e" * 40)])


def test_a_diff_past_its_timeout_is_an_error(repo: Path) -> None:
    write(repo, "a/x.md")
    commit(repo)
    tree = git(repo, "rev-parse", "HEAD:a").strip()
    pairs = [(gitmod.EMPTY_TREE[40], tree)] * 20_000  # far longer than the timeout

    with pytest.raises(gitmod.GitError, match="timed out"):
        streamed(repo, pairs, timeout=0.001)


def test_more_pairs_than_the_pipes_hold_do_not_deadlock(repo: Path) -> None:
    write(repo, "a/x.md")
    commit(repo)
    tree = git(repo, "rev-parse", "HEAD:a").strip()
    pairs = [(gitmod.EMPTY_TREE[40], tree)] * 5_000  # ~420 KB each way: pipes hold 64 KB

    assert streamed(repo, pairs) == [b"x.md\0"] * 5_000
