"""Copying files: kernel-side, across file systems, and the plain fallback."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.fs.copy import copy_file, copy_many

SIZES = [0, 1, 4096, 3 * 1024 * 1024 + 7]


def make_sources(folder: Path) -> list[tuple[Path, bytes]]:
    out = []
    for index, size in enumerate(SIZES):
        data = os.urandom(size)
        path = folder / f"f{index}"
        path.write_bytes(data)
        out.append((path, data))
    out[1][0].chmod(0o755)
    return out


@pytest.fixture
def other_device(tmp_path: Path) -> Iterator[Path]:
    """A folder on a different file system than tmp_path (tmpfs at /dev/shm)."""
    shm = Path("/dev/shm")
    assert shm.is_dir() and shm.stat().st_dev != tmp_path.stat().st_dev, (
        "this test needs /dev/shm on its own file system (tmpfs), as on any Linux host"
    )
    folder = Path(tempfile.mkdtemp(prefix="ci-evals-test-", dir=shm))
    yield folder
    shutil.rmtree(folder)


@pytest.mark.parametrize("kernel", [True, False])
def test_copy_file(tmp_path: Path, kernel: bool) -> None:
    for path, data in make_sources(tmp_path):
        dest = tmp_path / (path.name + ".copy")
        info = copy_file(str(path), str(dest), kernel=kernel)
        assert dest.read_bytes() == data
        assert stat.S_IMODE(dest.stat().st_mode) == stat.S_IMODE(path.stat().st_mode)
        assert (info.st_ino, info.st_size) == (dest.stat().st_ino, len(data))


@pytest.mark.parametrize("kernel", [True, False])
def test_copy_many(tmp_path: Path, kernel: bool) -> None:
    sources = make_sources(tmp_path)
    jobs = [(str(path), str(tmp_path / (path.name + ".copy"))) for path, _ in sources]
    infos = list(copy_many(jobs, kernel=kernel))
    for (path, data), info in zip(sources, infos, strict=True):
        dest = tmp_path / (path.name + ".copy")
        assert dest.read_bytes() == data
        assert info.st_ino == dest.stat().st_ino


def test_copy_across_file_systems(tmp_path: Path, other_device: Path) -> None:
    # copy_file_range is refused between file systems (EXDEV); the copy still works.
    sources = make_sources(tmp_path)
    jobs = [(str(path), str(other_device / path.name)) for path, _ in sources]
    list(copy_many(jobs))
    for path, data in sources:
        assert (other_device / path.name).read_bytes() == data
        copy_file(str(path), str(other_device / "single"))
        assert (other_device / "single").read_bytes() == data


def test_copy_file_does_not_follow_links_when_asked(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to("real")
    with pytest.raises(OSError):
        copy_file(str(tmp_path / "link"), str(tmp_path / "out"), follow_links=False)
    copy_file(str(tmp_path / "link"), str(tmp_path / "out"))
    assert (tmp_path / "out").read_text() == "x"


def test_copy_file_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(IsADirectoryError, match="not a regular file"):
        copy_file(str(tmp_path / "pipe"), str(tmp_path / "out"))


@pytest.mark.parametrize("kernel", [True, False])
def test_a_copy_is_never_setuid_or_setgid(tmp_path: Path, kernel: bool) -> None:
    # An agent that ran as uid 0 (bwrap as root) may chmod 6755 its own file: the
    # saved state, a checkpoint or a graded copy must not be a setuid-root program.
    source = tmp_path / "rootsh"
    source.write_bytes(b"#!/bin/sh\n")
    source.chmod(0o7755)
    assert stat.S_IMODE(source.stat().st_mode) == 0o7755  # the owner may set them
    copy_file(str(source), str(tmp_path / "one"), kernel=kernel)
    list(copy_many([(str(source), str(tmp_path / "many"))], kernel=kernel))
    for name in ("one", "many"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o1755, name
