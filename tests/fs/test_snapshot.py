"""Snapshots: added, modified (even same size and mtime), deleted, links, the hash cache."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ci_evals.fs.snapshot import (
    COARSE_RACY_NS,
    RACY_NS,
    UNREADABLE,
    Snapshot,
    SnapshotEntry,
    copy_produced,
    diff_snapshots,
    racy_window,
    take_snapshot,
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def settle() -> None:
    """Wait until files written so far are older than the racy window."""
    time.sleep(RACY_NS / 1e9 * 2)


def test_records_files_with_hashes(tmp_path: Path) -> None:
    write(tmp_path / "a.md", b"alpha")
    write(tmp_path / "sub" / "deep" / "b.bin", b"\0" * 3_000_000)  # read in several blocks
    (tmp_path / "empty-folder").mkdir()
    snap = take_snapshot(tmp_path)
    assert set(snap.entries) == {"a.md", "sub/deep/b.bin"}  # folders are not entries
    assert snap.entries["a.md"].sha256 == sha(b"alpha")
    assert snap.entries["a.md"].size == 5
    assert snap.entries["sub/deep/b.bin"].sha256 == sha(b"\0" * 3_000_000)


def test_added_modified_deleted(tmp_path: Path) -> None:
    write(tmp_path / "keep.md", b"same")
    write(tmp_path / "edit.md", b"old")
    write(tmp_path / "gone.md", b"bye")
    before = take_snapshot(tmp_path)
    write(tmp_path / "edit.md", b"new content")
    (tmp_path / "gone.md").unlink()
    write(tmp_path / "out" / "new.md", b"fresh")
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    assert [(c.path, c.sha256, c.size) for c in changes.added] == [("out/new.md", sha(b"fresh"), 5)]
    assert [(c.path, c.sha256) for c in changes.modified] == [("edit.md", sha(b"new content"))]
    # A deleted file carries the hash of what was deleted.
    assert [(c.path, c.sha256, c.size) for c in changes.deleted] == [("gone.md", sha(b"bye"), 3)]
    assert [c.path for c in changes.all] == ["edit.md", "gone.md", "out/new.md"]
    assert [c.path for c in changes.produced] == ["edit.md", "out/new.md"]
    assert changes


def test_nothing_changed(tmp_path: Path) -> None:
    write(tmp_path / "a.md", b"a")
    before = take_snapshot(tmp_path)
    after = take_snapshot(tmp_path, previous=before)
    changes = diff_snapshots(before, after)
    assert not changes
    assert changes.all == ()


def test_touch_without_content_change_is_not_a_modification(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", b"same")
    before = take_snapshot(tmp_path)
    os.utime(path, ns=(1, 1))
    path.write_bytes(b"same")
    assert not diff_snapshots(before, take_snapshot(tmp_path, previous=before))


def test_rewrite_with_same_size_and_mtime_is_modified(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", b"aaaa")
    info = path.stat()
    before = take_snapshot(tmp_path)  # the file is "racy" here: hashed regardless
    path.write_bytes(b"bbbb")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    assert path.stat().st_mtime_ns == info.st_mtime_ns
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    assert [(c.path, c.sha256) for c in changes.modified] == [("a.md", sha(b"bbbb"))]


def test_rewrite_with_same_size_and_mtime_is_modified_when_cached(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", b"aaaa")
    info = path.stat()
    settle()  # not racy: the fast path would reuse the hash if the stat matched
    before = take_snapshot(tmp_path)
    path.write_bytes(b"bbbb")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # ctime still moves
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    assert [(c.path, c.sha256) for c in changes.modified] == [("a.md", sha(b"bbbb"))]


def test_unchanged_settled_files_are_not_read_again(tmp_path: Path) -> None:
    write(tmp_path / "a.md", b"content")
    settle()
    real = take_snapshot(tmp_path)
    # A previous snapshot with a wrong hash but the file's exact stat: if the
    # file were read again the real hash would come back.
    entry = real.entries["a.md"]
    fake = Snapshot(
        root=real.root,
        entries={"a.md": entry._replace(sha256="cached")},
        taken_ns=real.taken_ns,
    )
    assert take_snapshot(tmp_path, previous=fake).entries["a.md"].sha256 == "cached"
    # The same previous snapshot, but taken right when the file changed: racy,
    # so the file is hashed again.
    racy = dataclasses.replace(fake, taken_ns=entry.mtime_ns + 1)
    assert take_snapshot(tmp_path, previous=racy).entries["a.md"].sha256 == sha(b"content")
    # A previous snapshot of another folder is never used.
    other = dataclasses.replace(fake, root=tmp_path / "elsewhere")
    assert take_snapshot(tmp_path, previous=other).entries["a.md"].sha256 == sha(b"content")


def test_replaced_file_with_a_new_inode_is_hashed(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", b"one")
    settle()
    before = take_snapshot(tmp_path)
    write(tmp_path / "tmp", b"two")
    os.replace(tmp_path / "tmp", path)
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    assert [(c.path, c.sha256) for c in changes.modified] == [("a.md", sha(b"two"))]


def test_permission_change_to_executable_is_modified(tmp_path: Path) -> None:
    path = write(tmp_path / "run.sh", b"#!/bin/sh\n")
    path.chmod(0o644)
    before = take_snapshot(tmp_path)
    path.chmod(0o755)
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    assert [c.path for c in changes.modified] == ["run.sh"]


def test_links_are_recorded_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.md", b"secret")
    root = tmp_path / "ws"
    write(root / "real.md", b"real")
    (root / "dir-link").symlink_to(outside)
    (root / "file-link").symlink_to("real.md")
    (root / "dangling").symlink_to("nowhere")
    snap = take_snapshot(root)
    assert set(snap.entries) == {"real.md", "dir-link", "file-link", "dangling"}
    link = snap.entries["dir-link"]
    assert (link.kind, link.target, link.sha256) == (
        "link",
        str(outside),
        sha(os.fsencode(outside)),
    )
    assert snap.entries["file-link"].target == "real.md"


def test_link_changes(tmp_path: Path) -> None:
    write(tmp_path / "a.md", b"a")
    write(tmp_path / "b.md", b"b")
    (tmp_path / "link").symlink_to("a.md")
    (tmp_path / "becomes-file").symlink_to("a.md")
    before = take_snapshot(tmp_path)
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to("b.md")  # retargeted
    (tmp_path / "becomes-file").unlink()
    write(tmp_path / "becomes-file", b"a")  # same bytes as the target, but a file now
    (tmp_path / "new-link").symlink_to("/etc/passwd")
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    assert [(c.path, c.kind, c.target) for c in changes.modified] == [
        ("becomes-file", "file", None),
        ("link", "link", "b.md"),
    ]
    assert [(c.path, c.kind, c.target) for c in changes.added] == [
        ("new-link", "link", "/etc/passwd")
    ]


def test_exclude_skips_folders_and_files(tmp_path: Path) -> None:
    write(tmp_path / ".cache" / "x", b"x")
    write(tmp_path / "a" / "skip.md", b"x")
    write(tmp_path / "a" / "keep.md", b"x")
    snap = take_snapshot(tmp_path, exclude=[".cache", "a/skip.md"])
    assert set(snap.entries) == {"a/keep.md"}


def test_special_files_are_left_out(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    write(tmp_path / "a.md", b"a")
    assert set(take_snapshot(tmp_path).entries) == {"a.md"}


def test_many_files_are_hashed_exactly(tmp_path: Path) -> None:
    # Enough files to take the threaded path, sizes mixed.
    expected = {}
    for index in range(300):
        data = os.urandom(index * 97 % 5000)
        write(tmp_path / f"d{index % 7}" / f"f{index}.bin", data)
        expected[f"d{index % 7}/f{index}.bin"] = sha(data)
    snap = take_snapshot(tmp_path)
    assert {rel: e.sha256 for rel, e in snap.entries.items()} == expected


def test_racy_window_by_timestamp_resolution(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", b"a")
    os.utime(path, ns=(1_000_000_123, 1_000_000_123))
    assert racy_window(take_snapshot(tmp_path)) == RACY_NS
    # Every mtime a whole second: the file system may only keep seconds.
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert racy_window(take_snapshot(tmp_path)) == COARSE_RACY_NS


def test_copy_produced(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "old.md", b"old")
    write(ws / "gone.md", b"gone")
    before = take_snapshot(ws)
    write(ws / "old.md", b"changed")
    write(ws / "new" / "deep.md", b"deep")
    (ws / "gone.md").unlink()
    (ws / "link.md").symlink_to("/etc/passwd")
    changes = diff_snapshots(before, take_snapshot(ws, previous=before))
    dest = tmp_path / "run" / "produced"
    copied = copy_produced(changes, ws, dest)
    assert copied == ["new/deep.md", "old.md"]
    assert (dest / "old.md").read_bytes() == b"changed"
    assert (dest / "new" / "deep.md").read_bytes() == b"deep"
    assert not (dest / "link.md").exists() and not (dest / "link.md").is_symlink()
    assert not (dest / "gone.md").exists()


def test_copy_produced_never_follows_a_swapped_in_link(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "keep.md", b"k")
    before = take_snapshot(ws)
    write(ws / "a.md", b"a")
    changes = diff_snapshots(before, take_snapshot(ws, previous=before))
    # After the snapshot, the file becomes a link to something outside.
    (ws / "a.md").unlink()
    (ws / "a.md").symlink_to(tmp_path / "secret")
    write(tmp_path / "secret", b"secret")
    dest = tmp_path / "produced"
    assert copy_produced(changes, ws, dest) == []
    assert not (dest / "a.md").exists()


def test_unreadable_files_count_as_present_and_changed_only_when_touched(tmp_path: Path) -> None:
    # Running as root, nothing is unreadable; build the entries the walk would make.
    path = write(tmp_path / "a.md", b"a")
    info = path.stat()
    readable = take_snapshot(tmp_path)
    entry = readable.entries["a.md"]
    unreadable = entry._replace(sha256=UNREADABLE)

    def snap(e: SnapshotEntry) -> Snapshot:
        return Snapshot(root=tmp_path, entries={"a.md": e}, taken_ns=info.st_mtime_ns)

    assert not diff_snapshots(snap(unreadable), snap(unreadable))  # same file, untouched
    touched = unreadable._replace(ctime_ns=unreadable.ctime_ns + 1)
    assert [c.path for c in diff_snapshots(snap(unreadable), snap(touched)).modified] == ["a.md"]
    assert [c.sha256 for c in diff_snapshots(snap(entry), snap(unreadable)).modified] == [
        UNREADABLE
    ]


# -- property: the diff agrees with a model of what was done -------------------

NAMES = ["a", "b", "c", "d/e", "d/f"]
CONTENTS = [b"", b"one", b"two", b"six", b"longer content"]

operation = st.tuples(
    st.sampled_from(["write", "rewrite-same-mtime", "delete", "chmod-x", "link", "touch"]),
    st.sampled_from(NAMES),
    st.sampled_from(CONTENTS),
)


@settings(max_examples=60, deadline=None)
@given(
    initial=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(CONTENTS)),
    operations=st.lists(operation, max_size=8),
    settled=st.booleans(),
)
def test_diff_matches_a_model(
    tmp_path_factory: pytest.TempPathFactory,
    initial: dict[str, bytes],
    operations: list[tuple[str, str, bytes]],
    settled: bool,
) -> None:
    root = tmp_path_factory.mktemp("model")
    # Model: path -> ("file", content, executable) or ("link", target, False)
    model: dict[str, tuple[str, bytes, bool]] = {}
    for name, content in initial.items():
        write(root / name, content)
        model[name] = ("file", content, False)
    if settled:
        settle()  # so the snapshot's stat cache, not hashing, decides
    before = take_snapshot(root)
    start = dict(model)
    for op, name, content in operations:
        path = root / name
        if op == "write":
            if path.is_symlink():
                path.unlink()
            write(path, content)
            model[name] = ("file", content, model.get(name, ("", b"", False))[2])
        elif op == "rewrite-same-mtime" and name in model and model[name][0] == "file":
            old = path.stat()
            same_size = content[: old.st_size].ljust(old.st_size, b"x")
            path.write_bytes(same_size)
            os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
            model[name] = ("file", same_size, model[name][2])
        elif op == "delete" and name in model:
            path.unlink()
            del model[name]
        elif op == "chmod-x" and name in model and model[name][0] == "file":
            executable = not model[name][2]
            path.chmod(0o755 if executable else 0o644)
            model[name] = ("file", model[name][1], executable)
        elif op == "link":
            if name in model:
                path.unlink()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(content.decode() or "x")
            model[name] = ("link", content or b"x", False)
        elif op == "touch" and name in model and model[name][0] == "file":
            os.utime(path, ns=(5, 5))
    changes = diff_snapshots(before, take_snapshot(root, previous=before))

    def digest(entry: tuple[str, bytes, bool]) -> str:
        return sha(entry[1])

    added = {p: digest(e) for p, e in model.items() if p not in start}
    deleted = {p: digest(e) for p, e in start.items() if p not in model}
    modified = {
        p: digest(e)
        for p, e in model.items()
        if p in start and (e[0], e[1], e[2]) != (start[p][0], start[p][1], start[p][2])
    }
    assert {c.path: c.sha256 for c in changes.added} == added
    assert {c.path: c.sha256 for c in changes.deleted} == deleted
    assert {c.path: c.sha256 for c in changes.modified} == modified
