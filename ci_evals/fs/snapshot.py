"""Snapshots of a workspace before and after a stage, and what changed between them.

A snapshot records every regular file and symbolic link under a folder (links
are recorded with their target, never followed; folders themselves are not
recorded) with its stat identity and a SHA-256 of its content.

Exact and fast at once: every file is hashed, except one that `previous` (an
earlier snapshot of the same folder) has with the same device, inode, size,
mtime *and ctime* (which user space cannot set), its times at least one "racy
window" older than that snapshot's start (git's "racily clean" problem: 20 ms,
or 2 s on file systems with whole-second times; a clock stepped backwards
defeats it). Files that need hashing are hashed on two threads (hashlib releases
the GIL). Pass stage k's "after" snapshot as `previous` to stage k+1's.

Files laid down from fixtures are recorded by the workspace's baseline
(`Workspace.baseline`) with `sha256=None` and their `source`: hashed from that
fixture file only once modified or deleted, so the first snapshot of a fresh
workspace is as cheap as a warm one. The fixtures must not change while a run
is in progress. Measured: docs/suite.md (*What a stage produced*).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import time
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from ci_evals.fs.copy import copy_file
from ci_evals.fs.walk import walk

# A file whose mtime or ctime is this close to (or after) the moment a snapshot
# started cannot be trusted to show a later change in its times (module doc).
RACY_NS = 20_000_000
COARSE_RACY_NS = 2_000_000_000
_THREADS = 2
_BLOCK = 1 << 20
# The hash recorded for a file that exists but cannot be read (never equal to
# another file's, so it always counts as changed).
UNREADABLE = "unreadable"

Kind = Literal["file", "link"]
ChangeKind = Literal["added", "modified", "deleted"]


class SnapshotEntry(NamedTuple):
    """One file or link. A NamedTuple, not a dataclass: a snapshot makes one per
    file, and a frozen dataclass takes ~5x longer to build."""

    kind: Kind
    size: int  # bytes of content, or of the link target
    mode: int  # permission bits
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int
    # Of the content (for a link, of its target); None: not hashed yet, the
    # content is that of the fixture file `source` it was copied from.
    sha256: str | None
    target: str | None = None  # a link's target, as written
    source: str | None = None


@dataclass(frozen=True)
class Snapshot:
    root: Path
    entries: Mapping[str, SnapshotEntry]  # POSIX path relative to root -> entry
    taken_ns: int  # wall clock when the walk started


@dataclass(frozen=True)
class Change:
    path: str  # POSIX, relative to the workspace
    change: ChangeKind
    kind: Kind
    sha256: str  # new content (added, modified) or the content that was deleted
    size: int
    target: str | None = None  # for links


@dataclass(frozen=True)
class Changes:
    added: tuple[Change, ...]
    modified: tuple[Change, ...]
    deleted: tuple[Change, ...]

    @property
    def all(self) -> tuple[Change, ...]:
        """Every change, sorted by path."""
        return tuple(sorted((*self.added, *self.modified, *self.deleted), key=lambda c: c.path))

    @property
    def produced(self) -> tuple[Change, ...]:
        """Added and modified entries, sorted by path: what the stage left behind."""
        return tuple(sorted((*self.added, *self.modified), key=lambda c: c.path))

    def __bool__(self) -> bool:
        return bool(self.added or self.modified or self.deleted)


class TooLarge(Exception):
    """The tree holds more bytes than the snapshot may read."""

    def __init__(self, total: int, largest: str, limit: int) -> None:
        super().__init__(
            f"the workspace holds {total:,} bytes (largest: {largest}), "
            f"over the limit of {limit:,} (limits.max_output_mb)"
        )


class TooMany(TooLarge):
    """The tree holds more entries than the snapshot may record (raised as soon as
    the walk counts one more: the rest is never walked)."""

    def __init__(self, limit: int, at: str) -> None:
        Exception.__init__(
            self,
            f"the workspace holds more than {limit:,} files, folders and links "
            f"(at: {at}), over the limit of {limit:,} (limits.max_output_files)",
        )


def take_snapshot(
    root: Path,
    exclude: Collection[str] = (),
    previous: Snapshot | None = None,
    *,
    max_bytes: int | None = None,
    max_files: int | None = None,
) -> Snapshot:
    """Record every file and link under `root`.

    `exclude` holds POSIX paths relative to `root`; an excluded folder is not
    entered. `previous` lets unchanged files keep their hash (see module doc).
    `max_bytes`: raise `TooLarge` before hashing anything when the files'
    sizes (as a copy would write them: holes count) add up to more.
    `max_files`: raise `TooMany` once the walk meets more entries (files,
    folders, links, special files) than that, before hashing anything.
    """
    taken_ns = time.time_ns()
    excluded = frozenset(p.strip("/") for p in exclude)
    reusable = _reusable(previous) if previous is not None and previous.root == root else {}
    entries: dict[str, SnapshotEntry] = {}
    to_hash: list[tuple[str, str, os.stat_result]] = []
    seen = 0
    for rel, kind, found in walk(root, exclude=excluded, skip_vanished=True, skip_unreadable=True):
        seen += 1
        if max_files is not None and seen > max_files:
            raise TooMany(max_files, rel)
        if kind == "dir":
            continue
        path = found.path
        try:
            info = found.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(path)
            except OSError:
                continue  # removed while we looked
            entries[rel] = link_entry(info, target)
            continue
        if not stat.S_ISREG(info.st_mode):
            continue  # sockets, pipes and devices are not content: left out
        old = reusable.get(rel)
        if old is not None and _same_file(old, info):
            entries[rel] = _entry("file", info, info.st_size, old.sha256, source=old.source)
        else:
            to_hash.append((rel, path, info))
    if max_bytes is not None:
        sizes = [(info.st_size, rel) for rel, _, info in to_hash]
        sizes += [(entry.size, rel) for rel, entry in entries.items() if entry.kind == "file"]
        total = sum(size for size, _ in sizes)
        if total > max_bytes:
            raise TooLarge(total, max(sizes)[1], max_bytes)
    for rel, info, digest in _hash_all(to_hash):
        entries[rel] = _entry("file", info, info.st_size, digest)
    return Snapshot(root=root, entries=entries, taken_ns=taken_ns)


def diff_snapshots(before: Snapshot, after: Snapshot) -> Changes:
    added: list[Change] = []
    modified: list[Change] = []
    deleted: list[Change] = []
    for rel, new in after.entries.items():
        old = before.entries.get(rel)
        if old is None:
            added.append(_change(rel, "added", new))
        elif (
            old.kind != new.kind
            or (old.mode & 0o111) != (new.mode & 0o111)  # made executable, or not
            or not _same_content(old, new)
        ):
            modified.append(_change(rel, "modified", new))
    for rel, old in before.entries.items():
        if rel not in after.entries:
            deleted.append(_change(rel, "deleted", old))
    by_path = lambda c: c.path  # noqa: E731
    return Changes(
        added=tuple(sorted(added, key=by_path)),
        modified=tuple(sorted(modified, key=by_path)),
        deleted=tuple(sorted(deleted, key=by_path)),
    )


def seeded_entry(info: os.stat_result, source: str) -> SnapshotEntry:
    """An entry for a file just copied from `source`, hashed only if it is ever needed."""
    return SnapshotEntry(
        "file",
        info.st_size,
        info.st_mode & 0o7777,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_ino,
        info.st_dev,
        None,
        None,
        source,
    )


def link_entry(info: os.stat_result, target: str) -> SnapshotEntry:
    encoded = os.fsencode(target)
    return _entry("link", info, len(encoded), _sha(encoded), target=target)


def content_hash(entry: SnapshotEntry) -> str:
    """The entry's SHA-256, computing it from its fixture source if it was deferred."""
    if entry.sha256 is not None:
        return entry.sha256
    assert entry.source is not None, "an entry without a hash must name its source"
    result = _hash_one(("", entry.source, None))
    # A fixture removed during the run: its content is unknown, never "equal".
    return result[2] if result is not None else "unknown:" + entry.source


def _same_content(old: SnapshotEntry, new: SnapshotEntry) -> bool:
    if old.sha256 is None and new.sha256 is None:
        # Both still the copy of a fixture file nobody has touched since.
        return old.source == new.source
    before, after = content_hash(old), content_hash(new)
    if UNREADABLE in (before, after):
        # Unknown content: the same only if it is visibly the same file, untouched.
        return before == after and _identity(old) == _identity(new)
    return before == after


def _identity(entry: SnapshotEntry) -> tuple[int, int, int, int, int]:
    return entry.dev, entry.ino, entry.size, entry.mtime_ns, entry.ctime_ns


def copy_produced(changes: Changes | Iterable[Change], workspace: Path, dest: Path) -> list[str]:
    """Copy the added and modified regular files from `workspace` into `dest`.

    Links are not recreated (a link could point anywhere on the host; graders
    must not follow it): they appear in the changes with their target. A file
    that vanished, or became a link or a folder, since the snapshot is skipped.
    Returns the paths copied.
    """
    items = changes.produced if isinstance(changes, Changes) else changes
    copied: list[str] = []
    for change in items:
        if change.kind != "file" or change.change == "deleted":
            continue
        target = dest / change.path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            copy_file(str(workspace / change.path), str(target), follow_links=False)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                continue  # replaced by a link since the snapshot: never followed
            raise
        copied.append(change.path)
    return copied


# -- internals ----------------------------------------------------------------


def _reusable(previous: Snapshot) -> dict[str, SnapshotEntry]:
    """Entries of `previous` whose times were settled when it was taken."""
    limit = previous.taken_ns - racy_window(previous)
    return {
        rel: entry
        for rel, entry in previous.entries.items()
        if entry.kind == "file"
        and entry.sha256 != UNREADABLE  # try again: it may be readable now
        and entry.mtime_ns < limit
        and entry.ctime_ns < limit
    }


def racy_window(snapshot: Snapshot) -> int:
    """Nanoseconds before `taken_ns` within which a file's times prove nothing."""
    files = [e for e in snapshot.entries.values() if e.kind == "file"]
    if files and all(e.mtime_ns % 1_000_000_000 == 0 for e in files):
        return COARSE_RACY_NS
    return RACY_NS


def _same_file(old: SnapshotEntry, info: os.stat_result) -> bool:
    return (
        old.ino == info.st_ino
        and old.dev == info.st_dev
        and old.size == info.st_size
        and old.mtime_ns == info.st_mtime_ns
        and old.ctime_ns == info.st_ctime_ns
    )


def _entry(
    kind: Kind,
    info: os.stat_result,
    size: int,
    digest: str | None,
    *,
    target: str | None = None,
    source: str | None = None,
) -> SnapshotEntry:
    return SnapshotEntry(
        kind=kind,
        size=size,
        mode=stat.S_IMODE(info.st_mode),
        mtime_ns=info.st_mtime_ns,
        ctime_ns=info.st_ctime_ns,
        ino=info.st_ino,
        dev=info.st_dev,
        sha256=digest,
        target=target,
        source=source,
    )


def _change(rel: str, change: ChangeKind, entry: SnapshotEntry) -> Change:
    return Change(
        path=rel,
        change=change,
        kind=entry.kind,
        sha256=content_hash(entry),
        size=entry.size,
        target=entry.target,
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hash_all(
    jobs: list[tuple[str, str, os.stat_result]],
) -> list[tuple[str, os.stat_result, str]]:
    """Hash files; the ones that vanished meanwhile are left out."""
    if len(jobs) < 64:
        return [result for result in map(_hash_one, jobs) if result is not None]
    # Chunks balanced by bytes, so one thread does not get every large file.
    chunks: list[list[tuple[str, str, os.stat_result]]] = [[] for _ in range(_THREADS * 4)]
    loads = [0] * len(chunks)
    for job in sorted(jobs, key=lambda j: j[2].st_size, reverse=True):
        index = loads.index(min(loads))
        chunks[index].append(job)
        loads[index] += job[2].st_size + 4096  # + a fixed cost per file
    results: list[tuple[str, os.stat_result, str]] = []
    with ThreadPoolExecutor(_THREADS) as pool:
        for part in pool.map(_hash_chunk, chunks):
            results.extend(part)
    return results


def _hash_chunk(
    jobs: list[tuple[str, str, os.stat_result]],
) -> list[tuple[str, os.stat_result, str]]:
    return [result for result in map(_hash_one, jobs) if result is not None]


def _hash_one(
    job: tuple[str, str, os.stat_result | None],
) -> tuple[str, os.stat_result, str] | None:
    rel, path, seen = job
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except PermissionError:
        # The agent made it unreadable: it is there, its content unknown. Left
        # out, it would be reported as deleted.
        return None if seen is None else (rel, seen, UNREADABLE)
    except OSError:
        return None  # removed, or replaced by a link, since the walk
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # replaced by a pipe or a device since the walk
        digest = hashlib.sha256()
        while block := os.read(fd, _BLOCK):
            digest.update(block)
        # The content just read belongs to the stat taken now, not the one from the walk.
        after = os.fstat(fd)
    finally:
        os.close(fd)
    return rel, after, digest.hexdigest()
