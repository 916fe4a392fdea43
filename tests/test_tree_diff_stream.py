"""`git.diff_trees_streamed`: one `git diff-tree --stdin` for many tree pairs,
cut into one output per pair however git's writes arrive."""

from __future__ import annotations

import io
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ci_evals import git as gitmod
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


class Pieces(io.RawIOBase):
    """git's stdout as it may arrive: in pieces cut anywhere."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = [p for p in pieces if p]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self.pieces:
            return 0
        piece = self.pieces.pop(0)
        size = min(len(piece), len(buffer))
        buffer[:size] = piece[:size]
        if size < len(piece):
            self.pieces.insert(0, piece[size:])
        return size


def split(stream: bytes, cuts: list[int]) -> tuple[list[list[bytes]], bool]:
    bounds = sorted({0, *cuts, len(stream)})
    pieces = [stream[a:b] for a, b in pairwise(bounds)]
    reader = io.BufferedReader(Pieces(pieces))
    got: list[list[bytes]] = []
    splitter = gitmod._split_pairs(reader, HEADERS)
    while True:
        try:
            got.append(next(splitter))
        except StopIteration as stop:
            return got, stop.value


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_each_pair_is_cut_exactly_wherever_the_pieces_end(cuts: list[int]) -> None:
    got, complete = split(STREAM, cuts)

    assert complete
    assert [out for outputs in got for out in outputs] == OUTPUTS
    assert all(got)  # nothing empty is handed over


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

    got = [out for outputs in gitmod.diff_trees_streamed(repo, pairs) for out in outputs]

    assert got == [b"x.md\0", b"", b"deep/w.md\0", b"deep/w.md\0deep/z.md\0"]


def test_git_failing_is_an_error(repo: Path) -> None:
    write(repo, "a.md")
    commit(repo)

    with pytest.raises(gitmod.GitError, match="diff-tree"):
        list(gitmod.diff_trees_streamed(repo, [("f" * 40, "e" * 40)]))


def test_a_diff_past_its_timeout_is_an_error(repo: Path) -> None:
    write(repo, "a/x.md")
    commit(repo)
    tree = git(repo, "rev-parse", "HEAD:a").strip()
    pairs = [(gitmod.EMPTY_TREE[40], tree)] * 20_000  # far longer than the timeout

    with pytest.raises(gitmod.GitError, match="timed out"):
        list(gitmod.diff_trees_streamed(repo, pairs, timeout=0.001))
