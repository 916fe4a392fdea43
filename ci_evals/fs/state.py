"""The workspace as a stage left it: saved in the run folder, copied for graders.

After every stage that completed, the runner's grading hook saves the whole
workspace (files and links, not just what the stage produced) as
`<run>/<scenario>/<k>-<stage>/after/`: what the stage is graded on, now and
later (`ci-evals grade RUN_DIR` re-grades it without running the agent again).
Saved states are never written to again; graders that may write get a fresh
copy (`copy_state`), next to a pristine copy of the plugin.

A saved state holds folders and regular files only: the run folder is the CI
artifact, and an uploader follows links (`after-env -> /proc/self/environ` would
upload its own environment). So each link, pipe, socket or device is recorded as
data in `<state>.links.json` beside the state, never written as one; a grader's
private copy (`copy_state`, `view_state`) makes the links again from that record.
Each later stage hard-links the files it did not change from the previous saved
state. In full: docs/grading.md (*The run folder: what grading keeps*) and
docs/isolation.md (*The run folder*).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.copy import copy_many
from ci_evals.fs.links import lay, through_link
from ci_evals.fs.plugin_copy import copy_plugin
from ci_evals.fs.plugin_files import PluginFiles
from ci_evals.fs.walk import walk

AFTER_DIR = "after"
WORKSPACE_DIR = "workspace"
PLUGIN_DIR = "plugin"
LINKS_SUFFIX = ".links.json"
CHECKS_DIR = "checks"  # a grader's read-only view, under its work folder
# A record lists at most a stage's max_output_files links (10,000 by default), each
# path and target at most 4 KiB: far below. No more is read (a link to /dev/zero).
MAX_RECORD = 128 * 1024 * 1024


def save_state(
    root: Path,
    dest: Path,
    *,
    previous: Path | None = None,
    changed: Collection[str] = (),
    exclude: Collection[str] = (),
) -> int:
    """Save `root` (a live workspace) as `dest`; return the number of files copied.

    Folders and regular files are copied; every link and special file is
    recorded in `links_file(dest)` instead (see the module doc). With
    `previous` (the saved state of the stage before, in the same run folder) a
    file whose path is not in `changed` (the paths the stage added, modified
    or deleted) and that `previous` holds with the same size is hard-linked
    from there instead of copied. `exclude`: paths (relative, POSIX) left out,
    as `fs.walk` leaves them out.
    """
    links, other, copied = _copy_tree(root, dest, previous, changed, exclude, hard_links=False)
    record = {"links": links, "other": other}
    write_atomic(links_file(dest), (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())
    return copied


def _copy_tree(
    root: Path,
    dest: Path,
    previous: Path | None,
    changed: Collection[str],
    exclude: Collection[str],
    *,
    hard_links: bool,
) -> tuple[dict[str, str], dict[str, str], int]:
    """Folders and regular files of `root` into `dest` (new); its links (target as
    written) and special files (their kind) returned, never written. `hard_links`:
    every file hard-linked from `root` where it can be (a read-only view)."""
    if dest.exists():
        raise FileExistsError(f"state folder already exists: {dest}")
    dest.mkdir(parents=True)
    base = str(dest) + os.sep
    old = None if previous is None or not previous.is_dir() else str(previous) + os.sep
    copies: list[tuple[str, str]] = []
    links: dict[str, str] = {}
    other: dict[str, str] = {}
    for rel, kind, entry in walk(root, exclude=exclude, skip_vanished=True):
        target = base + rel
        try:
            if kind == "link":
                links[rel] = os.readlink(entry.path)
            elif kind == "dir":
                os.mkdir(target)
            elif kind == "file":
                source = entry.path if hard_links else None
                if old is not None and _unchanged(rel, entry, old + rel, changed):
                    source = old + rel
                if source is not None:
                    try:
                        os.link(source, target, follow_symlinks=False)
                        continue
                    except OSError:
                        pass  # another device, a link limit: copy instead
                copies.append((entry.path, target))
            else:
                other[rel] = _special_kind(entry)
        except FileNotFoundError:
            continue  # removed while we walked; the stage is over, so rare
    # Not followed: a file swapped for a link since the walk is refused, not read.
    for _ in copy_many(copies, follow_links=False):
        pass
    return links, other, len(copies)


def copy_plain(source: Path, dest: Path) -> list[str]:
    """The folders and regular files of `source` into `dest` (new), each file opened
    with `O_NOFOLLOW`; returns the links and special files found, not copied (a
    caller that expects none refuses the copy)."""
    links, other, _ = _copy_tree(source, dest, None, (), (), hard_links=False)
    return sorted({*links, *other})


def _special_kind(entry: os.DirEntry[str]) -> str:
    mode = entry.stat(follow_symlinks=False).st_mode
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def links_file(state: Path) -> Path:
    """Where the links and special files of the saved state `state` are recorded."""
    return state.with_name(state.name + LINKS_SUFFIX)


def state_links(state: Path) -> dict[str, str]:
    """The links recorded for the saved state `state` (relative path -> target as
    written); none when it has no record (a fixture laid down, an older run).

    The record is read as untrusted data (a shard's artifact, an edited run
    folder): a regular file of at most `MAX_RECORD` bytes, parsed by
    `fs.json_input` (no depth or number crashes the reader); a path that is not
    plainly inside the state, that runs through another recorded link (a saved
    state never records one: the walk does not enter a link), or a target that
    is not text, is a `UserError` naming the file.
    """
    path = links_file(state)
    if not os.path.lexists(path):
        return {}
    data = json_input.load_file(path, MAX_RECORD, what="record of links")
    if not isinstance(data, dict):
        raise UserError("not a record of links: not a JSON object", file=path)
    links = data.get("links")
    if not isinstance(links, dict) or not isinstance(data.get("other", {}), dict):
        raise UserError("not a record of links: no `links` object", file=path, field="links")
    for rel, target in links.items():
        parts = rel.split("/")
        if (
            rel.startswith("/")
            or any(part in ("", ".", "..") for part in parts)
            or "\0" in rel
            or not isinstance(target, str)
            or not target
            or "\0" in target
        ):
            raise UserError(
                f"{rel!r} -> {target!r} is not a link inside the saved state",
                file=path,
                field="links",
                hint="the run folder was changed after the run",
            )
        through = through_link(links, rel)
        if through is not None:
            raise UserError(
                f"the recorded link {rel!r} is not inside a folder of the saved state: "
                f"{through!r} is a recorded link",
                file=path,
                field="links",
                hint="the run folder was changed after the run",
            )
    return dict(sorted(links.items()))


def restore_links(links: Mapping[str, str], dest: Path, record: Path) -> None:
    """Make each recorded link in `dest`, a grader's private copy whose files are
    already written, as written (never followed). Its folder must be a real folder
    of the copy: a record naming a path through a link (`a -> /etc`, then `a/x`)
    would make it anywhere (`fs.links.lay`)."""
    lay(dest, {}, links, create_folders=False, record=record)


def _unchanged(rel: str, entry: os.DirEntry[str], saved: str, changed: Collection[str]) -> bool:
    # A name that is not valid UTF-8 is recorded escaped in `changed`: never trust it.
    if rel in changed or os.fsencode(rel).decode("utf-8", "replace") != rel:
        return False
    try:
        mine, theirs = entry.stat(follow_symlinks=False), os.lstat(saved)
    except OSError:
        return False
    return stat.S_ISREG(theirs.st_mode) and mine.st_size == theirs.st_size


def copy_state(
    state: Path,
    plugin_source: Path,
    dest: Path,
    *,
    plugin_within: Path,
    plugin_manifest: Mapping[str, object] | None = None,
    plugin_files: PluginFiles | None = None,
) -> tuple[Path, Path]:
    """A private, writable copy for a grader: `dest/workspace` (of `state`) and
    `dest/plugin` (of `plugin_source`, links dereferenced as far as
    `plugin_within`, with `plugin_manifest` written in as `fs.plugin_copy`
    does). Returns both paths.

    `plugin_within` is the suite's (`Plugin.link_root`), and required: a caller
    that left it out would copy the plugin with a narrower boundary than the
    suite was checked against, refusing the links to shared files it allows.

    The workspace's component links (`agents -> ../plugin/agents`) are kept as
    written, so they resolve to the fresh plugin copy next to it: a reviewer
    reads the repository's rubrics, not a plugin copy the agent could edit.
    """
    workspace, plugin = dest / WORKSPACE_DIR, dest / PLUGIN_DIR
    dest.mkdir(parents=True, exist_ok=True)
    for path in (workspace, plugin):
        if os.path.lexists(path):
            raise FileExistsError(f"grading copy already exists: {path}")
    links = state_links(state)
    # Links the state itself holds (a fixture laid down, an older run) are kept as
    # links; those it recorded are made again: never followed, in both cases.
    held, _, _ = _copy_tree(state, workspace, None, (), (), hard_links=False)
    restore_links({**held, **links}, workspace, links_file(state))
    copy_plugin(plugin_source, plugin, plugin_manifest, within=plugin_within, files=plugin_files)
    return workspace, plugin


def view_state(state: Path, dest: Path) -> Path:
    """A read-only view of `state` for graders that only read (checks): its files
    hard-linked where they can be, its links made again (`restore_links`), in
    `dest` (new). Returns `dest`."""
    links = state_links(state)
    held, _, _ = _copy_tree(state, dest, None, (), (), hard_links=True)
    restore_links({**held, **links}, dest, links_file(state))
    return dest


def restore_state(state: Path, root: Path, *, keep: Collection[str] = ()) -> None:
    """Make the live workspace `root` what the saved state `state` holds (`run
    --resume`: a scenario goes on from the last stage it kept). Everything in
    `root` but the top-level names in `keep` (its `.git`, which no state saves)
    is removed; the state's files are copied in, its recorded links made again
    as written, never followed."""
    links = state_links(state)
    staging = root.with_name(root.name + ".restoring")
    held, _, _ = _copy_tree(state, staging, None, (), (), hard_links=False)
    for entry in os.scandir(root):
        if entry.name in keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    for entry in os.scandir(staging):
        if entry.name not in keep:
            os.rename(entry.path, root / entry.name)
    shutil.rmtree(staging)
    restore_links({**held, **links}, root, links_file(state))
