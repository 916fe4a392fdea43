"""FolderCheckpoint: a folder put back exactly as it was, whatever an attempt did to it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ci_evals.fs.checkpoint import FolderCheckpoint


def tree(top: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under `top`: (kind, permission bits, content or link target)."""
    found: dict[str, tuple[str, int, str]] = {}
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            rel = path.relative_to(top).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", stat.S_IMODE(info.st_mode), "")
            else:
                found[rel] = ("file", stat.S_IMODE(info.st_mode), path.read_text())
    return found


def lay_out(root: Path) -> None:
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "docs" / "a.md").write_text("a\n")
    (root / "docs" / "deep" / "b.md").write_text("b\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link.md").symlink_to("docs/a.md")
    (root / "dangling").symlink_to("nowhere")
    (root / "locked").mkdir()
    (root / "locked" / "kept.md").write_text("kept\n")
    (root / "locked").chmod(0o555)


def test_restore_undoes_every_kind_of_change(tmp_path: Path) -> None:
    work, plugin = tmp_path / "work", tmp_path / "plugin"
    work.mkdir()
    lay_out(work)
    (plugin / "agents").mkdir(parents=True)
    (plugin / "agents" / "x.md").write_text("agent\n")
    before = tree(work), tree(plugin)
    checkpoint = FolderCheckpoint((work, plugin), tmp_path / "store")
    checkpoint.save()

    # What a failed attempt might have done.
    (work / "docs" / "a.md").write_text("rewritten in place\n")
    (work / "docs" / "deep" / "b.md").unlink()
    (work / "new.md").write_text("partial output\n")
    (work / "new-folder" / "inner").mkdir(parents=True)
    (work / "run.sh").chmod(0o644)
    (work / "link.md").unlink()
    (work / "link.md").symlink_to("run.sh")
    (work / "empty").rmdir()
    (work / "empty").write_text("a file where a folder was\n")
    (work / "locked").chmod(0o755)
    (work / "locked" / "sneaked.md").write_text("x\n")
    (work / "locked").chmod(0o000)
    (plugin / "agents" / "x.md").write_text("the agent edited its own plugin\n")

    checkpoint.restore()

    assert (tree(work), tree(plugin)) == before
    # A second failed attempt can be undone as well.
    (work / "again.md").write_text("x\n")
    checkpoint.restore()
    assert (tree(work), tree(plugin)) == before

    checkpoint.discard()
    assert not (tmp_path / "store").exists()
    (work / "locked").chmod(0o755)  # let pytest clean up


def test_restore_needs_a_saved_state(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        FolderCheckpoint((tmp_path,), tmp_path / "store").restore()


def test_a_restored_folder_has_no_setuid_or_setgid_bit(tmp_path: Path) -> None:
    # What an agent running as uid 0 (bwrap as root) chmods 6755 comes back without it.
    work = tmp_path / "work"
    (work / "d").mkdir(parents=True)
    (work / "rootsh").write_bytes(b"#!/bin/sh\n")
    (work / "rootsh").chmod(0o6755)
    (work / "d").chmod(0o2755)
    checkpoint = FolderCheckpoint([work], tmp_path / "store")
    checkpoint.save()
    checkpoint.restore()
    assert stat.S_IMODE((work / "rootsh").stat().st_mode) == 0o755
    assert stat.S_IMODE((work / "d").stat().st_mode) == 0o755
