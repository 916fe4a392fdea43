"""Adversarial checks of the streamed diff (`diff_range._plan`/`_streamed`, `tree_diff.TreeDiffer`).

Each case builds two trees directly (`git mktree`, `git hash-object --literally`,
`git update-index --index-info`), so names git's work tree could not hold (non-UTF-8
bytes, newlines, header-like names) and objects `git commit` never makes (empty
subtrees, non-canonical modes) are easy, in SHA-1 and SHA-256 repositories. The
concatenated chunks must be exactly `git diff --name-only -z --no-renames MB HEAD`
(`git.changed_paths`), and the `git diff-tree --stdin` process must be gone however
the consumer stops.

The last cases are divergences these tests found (and that were fixed).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals import git as gitmod
from ci_evals.selection import decide as selection
from ci_evals.selection import diff as diff_range
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import load_stage_map
from ci_evals.selection.tree_diff import TreeDiffer
from tests.stage_repo import commit, plugin_repo, write

FORMATS = ("sha1", "sha256")

# --- Building trees directly -------------------------------------------------------

# A tree spec: {name bytes: leaf | spec}. Leaves: ("file", data), ("exec", data),
# ("link", target), ("gitlink", "1" or "2": a commit id of that digit, not stored),
# ("raw", mode bytes, object id): an entry written verbatim by `_raw_tree`.
Spec = dict[bytes, Any]


class Repo:
    """A repository in an object format, with helpers that write objects directly."""

    def __init__(self, path: Path, fmt: str = "sha1") -> None:
        self.path = path
        path.mkdir(parents=True)
        self.run("init", "-q", "-b", "main", f"--object-format={fmt}")
        self.hexlen = 40 if fmt == "sha1" else 64
        self._blobs: dict[bytes, str] = {}

    def run(
        self, *args: str, data: bytes | None = None, env: dict[str, str] | None = None
    ) -> bytes:
        result = subprocess.run(
            ["git", *args],
            cwd=self.path,
            input=data,
            capture_output=True,
            check=False,
            env=None if env is None else {**os.environ, **env},
        )
        if result.returncode != 0:
            raise AssertionError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace')}")
        return result.stdout

    def oid(self, *args: str, data: bytes | None = None) -> str:
        return self.run(*args, data=data).decode().strip()

    def blob(self, data: bytes) -> str:
        if data not in self._blobs:
            self._blobs[data] = self.oid("hash-object", "-w", "--stdin", data=data)
        return self._blobs[data]

    def tree(self, spec: Spec) -> str:
        lines = []
        for name, value in spec.items():
            if isinstance(value, dict):
                mode, kind, oid = "040000", "tree", self.tree(value)
            elif value[0] == "gitlink":
                mode, kind, oid = "160000", "commit", value[1] * self.hexlen
            else:
                mode = {"file": "100644", "exec": "100755", "link": "120000"}[value[0]]
                kind, oid = "blob", self.blob(value[1])
            lines.append(f"{mode} {kind} {oid}\t".encode() + name + b"\0")
        return self.oid("mktree", "-z", "--missing", data=b"".join(lines))

    def raw_tree(self, entries: list[tuple[bytes, bytes, str]]) -> str:
        """A tree object written as given: (mode, name, oid), no sorting, no checks."""
        data = b"".join(
            mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries
        )
        return self.oid("hash-object", "-w", "-t", "tree", "--literally", "--stdin", data=data)

    def tree_from_paths(self, paths: dict[bytes, str]) -> str:
        """A tree of many files at once (path bytes -> blob id), through a scratch index."""
        index = self.path / ".git" / "scratch-index"
        index.unlink(missing_ok=True)
        env = {"GIT_INDEX_FILE": str(index)}
        data = b"".join(f"100644 {oid}\t".encode() + path + b"\0" for path, oid in paths.items())
        self.run("update-index", "-z", "--index-info", data=data, env=env)
        return self.run("write-tree", env=env).decode().strip()

    def commit(self, tree: str, *parents: str) -> str:
        argv = ["commit-tree", tree, "-m", "c"]
        for parent in parents:
            argv += ["-p", parent]
        return self.oid(*argv)


def nest(spec: Spec, prefix: tuple[bytes, ...]) -> Spec:
    for part in reversed(prefix):
        spec = {part: spec}
    return spec


def listings(
    repo: Repo, old_tree: str, new_tree: str, min_entries: int = 2
) -> tuple[bool, list[str], list[str]]:
    """(was the diff streamed, the chunks concatenated, git's own diff) for two trees."""
    base = repo.commit(old_tree)
    head = repo.commit(new_tree, base)
    return listings_of(repo, base, head, min_entries)


def listings_of(
    repo: Repo, base: str, head: str, min_entries: int = 2
) -> tuple[bool, list[str], list[str]]:
    change = diff_range.resolve(repo.path, base, head, deepen_tries=0)
    assert isinstance(change, diff_range.Range)
    merge_base = change.merge_bases[0]
    planned = diff_range._plan(repo.path, merge_base, head, min_entries) is not None
    whole = gitmod.changed_paths(repo.path, merge_base, head)
    chunks = diff_range.diff_chunks(repo.path, change, min_entries=min_entries)
    return planned, [path for chunk in chunks for path in chunk], whole


def diff_tree_entries(repo: Repo, old: str, new: str) -> list[gitmod.TreeChange]:
    """git's own entries: `git diff-tree -z` (raw) of two trees, names decoded as split_z does."""
    parts = repo.run("diff-tree", "-z", "--no-renames", old, new).split(b"\0")[:-1]
    out = []
    for meta, name in zip(parts[::2], parts[1::2], strict=True):
        old_mode, new_mode, old_oid, new_oid, _ = meta[1:].decode().split()
        out.append(
            gitmod.TreeChange(
                old_mode, old_oid, new_mode, new_oid, name.decode("utf-8", "surrogateescape")
            )
        )
    return out


def encoded(paths: list[str]) -> list[bytes]:
    return [p.encode("utf-8", "surrogateescape") for p in paths]


# --- Names and kinds of change ------------------------------------------------------

HEADER_LIKE = ("1" * 40 + " " + "2" * 40).encode()
ODD_NAMES = [
    b"new\nline",
    b"tab\there",
    b"back\\slash",
    b"-leading-dash",
    b"--end-of-options",
    b"\xff\xfe not utf-8",
    b"\xc3",  # a lone UTF-8 lead byte
    b"\xe4\xb8\xad",  # valid UTF-8 that sorts after the lone byte
    b"\n",
    b"ends-in\n",  # with a folder below: a path containing "\n/"
    HEADER_LIKE,
    HEADER_LIKE + b"\n",
    b":colon",
    b"@{1}",
    b"^{tree}",
    b" ",
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_odd_names_at_the_split_folder_and_below(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    old: Spec = {}
    new: Spec = {}
    for i, name in enumerate(ODD_NAMES):
        if i % 2:
            old[name] = ("file", b"1")
            new[name] = ("file", b"2")
        else:  # a folder: its files' names are odd too, one level down
            old[name] = {name: ("file", b"1"), b"\n": {b"\n": ("file", b"1")}}
            new[name] = {
                name: ("file", b"2"),
                b"\n": {b"\n": ("file", b"2")},
                b"ends-in\n": {b"\nx": ("file", b"1")},  # a path with "\n/\n" in it
            }
    for prefix in ((), (b"plugin",), (b"p\n", b"\xff")):
        planned, streamed, whole = listings(
            repo, repo.tree(nest(old, prefix)), repo.tree(nest(new, prefix))
        )
        assert planned
        assert streamed == whole
    assert any("\n/\n" in p for p in whole)
    assert encoded(whole) == sorted(encoded(whole))  # git's order is byte order here


KIND_CHANGES: list[tuple[str, Any, Any]] = [
    ("file became folder", ("file", b"1"), {b"x": ("file", b"1")}),
    ("folder became file", {b"x": ("file", b"1")}, ("file", b"1")),
    ("folder became gitlink", {b"x": ("file", b"1")}, ("gitlink", "1")),
    ("gitlink became folder", ("gitlink", "1"), {b"x": ("file", b"1")}),
    ("gitlink became file", ("gitlink", "1"), ("file", b"1")),
    ("gitlink moved", ("gitlink", "1"), ("gitlink", "2")),
    ("file became link", ("file", b"1"), ("link", b"1")),
    ("link became folder", ("link", b"t"), {b"x": ("link", b"t")}),
    ("exec bit only", ("file", b"1"), ("exec", b"1")),
    ("empty folder added", None, {}),
    ("empty folder removed", {}, None),
    ("empty folder became file", {}, ("file", b"1")),
    ("file became empty folder", ("file", b"1"), {}),
    ("empty folder filled", {}, {b"x": ("file", b"1")}),
    ("folder of empty folders", {b"e": {}}, {b"e": {b"f": {}}, b"g": {}}),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("depth", [0, 1], ids=["at-split", "below-split"])
def test_every_kind_of_change_with_neighbours_that_sort_around_it(
    tmp_path: Path, fmt: str, depth: int
) -> None:
    """Each change under a name `a`, next to `a-b` and `a0` (which sort around `a/`)."""
    repo = Repo(tmp_path / "r", fmt)
    old: Spec = {b"z": ("file", b"1")}
    new: Spec = {b"z": ("file", b"2")}
    for i, (_, before, after) in enumerate(KIND_CHANGES):
        name = f"k{i:02}".encode()
        side_old: Spec = {b"a-b": ("file", b"1"), b"a0": ("file", b"1")}
        side_new: Spec = {b"a-b": ("file", b"2"), b"a0": ("file", b"1")}
        if before is not None:
            side_old[b"a"] = before
        if after is not None:
            side_new[b"a"] = after
        if depth:
            old[name], new[name] = side_old, side_new
        else:
            old.update({name + k: v for k, v in side_old.items()})
            new.update({name + k: v for k, v in side_new.items()})
    planned, streamed, whole = listings(
        repo, repo.tree({b"plugin": old}), repo.tree({b"plugin": new})
    )

    assert planned
    assert streamed == whole
    assert "plugin/k00/a" in whole or "plugin/k00a" in whole


@pytest.mark.parametrize("fmt", FORMATS)
def test_changed_entries_match_diff_tree_for_every_kind_of_change(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    old: Spec = {}
    new: Spec = {}
    for i, (_, before, after) in enumerate(KIND_CHANGES):
        name = f"k{i:02}".encode()
        if before is not None:
            old[name] = before
        if after is not None:
            new[name] = after
    old_tree, new_tree = repo.tree(old), repo.tree(new)
    base = repo.commit(old_tree)
    head = repo.commit(new_tree, base)

    got = gitmod.changed_entries(repo.path, base, head, "")

    assert got == diff_tree_entries(repo, old_tree, new_tree)


@pytest.mark.parametrize("fmt", FORMATS)
def test_split_folder_at_every_depth_and_past_the_descent_limit(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    leaf_old: Spec = {b"a": {b"x": ("file", b"1")}, b"b": ("file", b"1"), b"c": {}}
    leaf_new: Spec = {
        b"a": {b"x": ("file", b"2")},
        b"b": ("file", b"2"),
        b"d": {b"y": ("file", b"1")},
    }
    for depth in range(diff_range.MAX_DESCENT + 3):
        prefix = tuple(f"l{i}\n".encode() for i in range(depth))
        planned, streamed, whole = listings(
            repo, repo.tree(nest(leaf_old, prefix)), repo.tree(nest(leaf_new, prefix))
        )
        assert planned == (depth <= diff_range.MAX_DESCENT)
        assert streamed == whole


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("side", ["old", "new"])
def test_split_folder_that_is_an_empty_tree_on_one_side(
    tmp_path: Path, fmt: str, side: str
) -> None:
    repo = Repo(tmp_path / "r", fmt)
    full: Spec = {b"a": {b"x": ("file", b"1")}, b"b": ("file", b"1"), b"c": {b"d": {}}}
    trees = [repo.tree({b"plugin": {}}), repo.tree({b"plugin": full})]
    if side == "new":
        trees.reverse()

    planned, streamed, whole = listings(repo, trees[0], trees[1])

    assert planned
    assert streamed == whole == ["plugin/a/x", "plugin/b"]


def test_empty_tree_ids_are_gits_own(tmp_path: Path) -> None:
    for fmt in FORMATS:
        repo = Repo(tmp_path / fmt, fmt)
        empty = repo.oid("hash-object", "-t", "tree", "--stdin", data=b"")
        assert gitmod.EMPTY_TREE[len(empty)] == empty


def test_a_folder_that_differs_only_in_non_canonical_modes(tmp_path: Path) -> None:
    """Tree ids differ (`100664` vs `100644` bytes) but git lists nothing inside: an empty pair."""
    repo = Repo(tmp_path / "r")
    one, two = repo.blob(b"1"), repo.blob(b"2")
    d_old = repo.raw_tree([(b"100644", b"x", one)])
    d_new = repo.raw_tree([(b"100664", b"x", one)])
    assert d_old != d_new
    old = repo.raw_tree(
        [
            (b"100644", b"a", one),
            (b"40000", b"d", d_old),
            (b"100644", b"e", one),
            (b"100644", b"f", one),
        ]
    )
    new = repo.raw_tree(
        [
            (b"100664", b"a", one),
            (b"040000", b"d", d_new),
            (b"100644", b"e", two),
            (b"100644", b"f", two),
        ]
    )
    old_top = repo.oid("mktree", data=f"040000 tree {old}\tplugin\n".encode())
    new_top = repo.oid("mktree", data=f"040000 tree {new}\tplugin\n".encode())

    planned, streamed, whole = listings(repo, old_top, new_top)

    assert planned
    assert streamed == whole == ["plugin/e", "plugin/f"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_thousands_of_changed_entries_at_the_split_folder(tmp_path: Path, fmt: str) -> None:
    repo = Repo(tmp_path / "r", fmt)
    one, two = repo.blob(b"1"), repo.blob(b"2")
    old: dict[bytes, str] = {}
    new: dict[bytes, str] = {}
    for i in range(2500):
        folder = b"plugin/d%04d" % i
        old[folder + b"/x"] = one
        new[folder + b"/x"] = two
        if i % 3 == 0:
            new[folder + b"/deep/\n/y"] = one  # added below the folder
        if i % 5 == 0:
            old[b"plugin/f%04d" % i] = one  # files between folders: deleted,
            new[b"plugin/f%04d\xff" % i] = one  # and added, non-UTF-8

    planned, streamed, whole = listings(repo, repo.tree_from_paths(old), repo.tree_from_paths(new))

    assert planned
    assert len(whole) > 4000
    assert streamed == whole


# --- Property: random trees of odd names and every kind -----------------------------

_NAMES = st.sampled_from(
    [b"a", b"a-b", b"a0", b"-x", b"n\nl", b"\n", b"\xff", b"\xc3", b"\xc3\xa9", b"t\tb", b"\\"]
)
_LEAF = st.sampled_from(
    [
        ("file", b"1"),
        ("file", b"2"),
        ("exec", b"1"),
        ("link", b"1"),
        ("gitlink", "1"),
        ("gitlink", "2"),
    ]
)
_TREE = st.recursive(
    st.dictionaries(_NAMES, _LEAF, max_size=4),
    lambda children: st.dictionaries(_NAMES, st.one_of(_LEAF, children), max_size=5),
    max_leaves=16,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    old=_TREE,
    new=_TREE,
    prefix=st.sampled_from([(), (b"plugin",), (b"p\n", b"\xff")]),
    fmt=st.sampled_from(FORMATS),
    min_entries=st.integers(1, 3),
)
def test_any_two_trees_stream_exactly_as_git_diffs(
    tmp_path_factory: pytest.TempPathFactory,
    old: Spec,
    new: Spec,
    prefix: tuple[bytes, ...],
    fmt: str,
    min_entries: int,
) -> None:
    repo = Repo(tmp_path_factory.mktemp("prop") / "r", fmt)
    old_tree, new_tree = repo.tree(nest(old, prefix)), repo.tree(nest(new, prefix))
    if old_tree == new_tree:
        return
    _, streamed, whole = listings(repo, old_tree, new_tree, min_entries)

    assert streamed == whole
    assert gitmod.changed_entries(
        repo.path, repo.commit(old_tree), repo.commit(new_tree), ""
    ) == diff_tree_entries(repo, old_tree, new_tree)


# --- The whole selection is the same whether the diff was streamed or not -------------


def test_compute_on_a_streamed_diff_equals_selecting_the_whole_diff(repo: Path) -> None:
    plugin_repo(repo)
    main = commit(repo, "base")
    for i in range(diff_range.CHUNK_MIN_ENTRIES + 4):
        write(repo, f"plugin/d{i:02}/f.md")
        write(repo, f"plugin/f{i:02}.txt")
    write(repo, "plugin/skills/plan/new.md")
    commit(repo, "wide")
    stage_map = load_stage_map(repo / "stage_map.yaml")
    change = diff_range.resolve(repo, main, "HEAD", deepen_tries=0)
    assert isinstance(change, diff_range.Range)
    assert diff_range._plan(repo, main, change.head, diff_range.CHUNK_MIN_ENTRIES) is not None
    whole = gitmod.changed_paths(repo, main, change.head)

    chosen = diff_range.compute(repo, stage_map, main, "HEAD", deepen_tries=0)
    expected = selection.select(stage_map, GlobMatcher(stage_map.globs), whole)

    assert (chosen.from_stage, chosen.reason, chosen.changed) == (
        expected.from_stage,
        expected.reason,
        expected.changed,
    )
    assert list(chosen.matches) == list(expected.matches)
    assert chosen.decided_by == expected.decided_by
    assert selection.lowest_relevant(chosen.matches, 5) == selection.lowest_relevant(
        list(expected.matches), 5
    )


# --- The git process ends however the consumer stops --------------------------------


def git_children() -> list[str]:
    """This process's git children, running or not yet reaped (zombies), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            head, _, rest = (entry / "stat").read_text().rpartition(")")
        except OSError:
            continue  # gone meanwhile
        state, parent = rest.split()[:2]
        if int(parent) == os.getpid() and head.endswith("(git"):
            found.append(f"{entry.name} {state}")
    return found


def assert_ended() -> None:
    assert git_children() == []  # reaped: no zombie, no running git


def wide_change(repo: Repo, folders: int = 400) -> tuple[str, str]:
    one, two = repo.blob(b"1"), repo.blob(b"2")
    old = {b"plugin/0": one} | {b"plugin/d%03d/x" % i: one for i in range(folders)}
    new = {b"plugin/0": two} | {b"plugin/d%03d/x" % i: two for i in range(folders)}
    base = repo.commit(repo.tree_from_paths(old))
    return base, repo.commit(repo.tree_from_paths(new), base)


def chunks_of(repo: Repo, base: str, head: str) -> Generator[list[str], None, None]:
    change = diff_range.resolve(repo.path, base, head, deepen_tries=0)
    assert isinstance(change, diff_range.Range)
    chunks = diff_range.diff_chunks(repo.path, change, min_entries=2)
    assert isinstance(chunks, Generator)
    return chunks


def test_closing_the_chunks_midway_ends_git(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base, head = wide_change(repo, folders=3000)
    chunks = chunks_of(repo, base, head)

    assert next(chunks) == ["plugin/0"]  # the files before the first folder, at once
    assert next(chunks)  # some folders' diffs: git is still running
    assert len(git_children()) == 1
    chunks.close()

    assert_ended()


def test_dropping_the_chunks_before_any_tree_diff_ends_git(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base, head = wide_change(repo)
    chunks = chunks_of(repo, base, head)
    next(chunks)  # git started, not yet asked anything

    del chunks

    assert_ended()


def test_a_consumer_that_raises_midway_ends_git(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base, head = wide_change(repo, folders=3000)

    def consume() -> None:
        for chunk in chunks_of(repo, base, head):
            if len(chunk) > 1:
                raise RuntimeError("the consumer failed")

    with pytest.raises(RuntimeError):
        consume()

    assert_ended()


def test_closing_the_tree_differ_generator_ends_git(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    _, head = wide_change(repo)
    tree = repo.oid("rev-parse", f"{head}:plugin/d000")
    differ = TreeDiffer(repo.path)  # no `with`: the generator's own cleanup
    outputs = differ.diffs([(gitmod.EMPTY_TREE[40], tree)] * 20_000)
    assert isinstance(outputs, Generator)

    assert next(outputs)[0] == b"x\0"
    outputs.close()

    assert_ended()


def test_a_tree_missing_midway_is_an_error_and_ends_git(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base, head = wide_change(repo, folders=40)
    gone = repo.oid("rev-parse", f"{head}:plugin/d020")
    (repo.path / ".git" / "objects" / gone[:2] / gone[2:]).unlink()
    got: list[str] = []

    with pytest.raises(gitmod.GitError, match=gone):
        for chunk in chunks_of(repo, base, head):
            got.extend(chunk)

    assert got == ["plugin/0"] + [f"plugin/d{i:03}/x" for i in range(len(got) - 1)]
    assert_ended()


# --- Divergences found by these tests, fixed -------------------------------------------


def test_diff_order_file_config_does_not_change_the_order(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    old: Spec = {b"a": {b"x": ("file", b"1")}, b"b": ("file", b"1"), b"c": {b"y": ("file", b"1")}}
    new: Spec = {b"a": {b"x": ("file", b"2")}, b"b": ("file", b"2"), b"c": {b"y": ("file", b"2")}}
    (repo.path / "order").write_text("plugin/c/*\n", encoding="utf-8")
    repo.run("config", "diff.orderFile", str(repo.path / "order"))

    planned, streamed, whole = listings(
        repo, repo.tree({b"plugin": old}), repo.tree({b"plugin": new})
    )

    assert planned
    assert streamed == whole


def test_an_unreadable_index_does_not_fail_a_streamed_diff(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base, head = wide_change(repo, folders=5)
    (repo.path / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x02 not an index")
    whole = gitmod.changed_paths(repo.path, base, head)  # git diff itself is fine

    _, streamed, _ = listings_of(repo, base, head)

    assert streamed == whole


def test_a_tree_with_a_file_and_a_folder_of_one_name(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    one, two = repo.blob(b"1"), repo.blob(b"2")
    sub_old = repo.tree({b"x": ("file", b"1")})
    sub_new = repo.tree({b"x": ("file", b"2")})

    def plugin(blob: str, sub: str) -> str:
        lines = f"100644 blob {blob}\ta\n040000 tree {sub}\ta\n100644 blob {blob}\tb\n"
        inner = repo.oid("mktree", data=lines.encode())
        return repo.oid("mktree", data=f"040000 tree {inner}\tplugin\n".encode())

    planned, streamed, whole = listings(repo, plugin(one, sub_old), plugin(two, sub_new))

    assert planned
    assert whole == ["plugin/a", "plugin/a/x", "plugin/b"]
    assert streamed == whole


def test_criss_cross_union_is_in_gits_byte_order(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    root = repo.commit(repo.tree({b"f": ("file", b"0")}))
    left = repo.commit(repo.tree({b"f": ("file", b"0"), b"\xc3": ("file", b"a")}), root)
    right = repo.commit(repo.tree({b"f": ("file", b"0"), b"\xe4\xb8\xad": ("file", b"b")}), root)
    both = repo.tree(
        {b"f": ("file", b"0"), b"\xc3": ("file", b"a"), b"\xe4\xb8\xad": ("file", b"b")}
    )
    merge_1, merge_2 = repo.commit(both, left, right), repo.commit(both, right, left)
    changed = {b"f": ("file", b"1"), b"\xc3": ("file", b"a2"), b"\xe4\xb8\xad": ("file", b"b2")}
    head = repo.commit(repo.tree(changed), merge_1)
    change = diff_range.resolve(repo.path, merge_2, head, deepen_tries=0)
    assert isinstance(change, diff_range.Range)
    assert len(change.merge_bases) == 2

    got = [p for chunk in diff_range.diff_chunks(repo.path, change) for p in chunk]

    assert encoded(got) == sorted(encoded(got))
