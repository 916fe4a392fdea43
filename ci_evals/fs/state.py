"""The workspace as a stage left it: saved in the run folder, copied for graders.

After every stage that completed, the runner's grading hook saves the whole
workspace (files and links, not just what the stage produced) as
`<run>/<scenario>/<k>-<stage>/after/`. That folder is what the stage is graded
on, now and later: `ci-evals grade RUN_DIR` re-grades it with a changed rubric,
threshold or check without running the agent again, and checks over the whole
workspace (files from fixtures or earlier stages) still see everything.

Saved states are never written to again. Graders that may write (the reviewer
agent, command graders) get a fresh *copy* (`copy_state`), next to a pristine
copy of the plugin, so nothing a grader does reaches the saved state, the
live workspace or the next stage.

Cost: the first stage of a scenario copies the whole workspace (kernel-side,
reflinks where the file system has them); each later stage hard-links the
files it did not change from the previous stage's saved state, and copies
only what it produced.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from ci_evals.fs.copy import copy_many
from ci_evals.fs.plugin_copy import copy_plugin
from ci_evals.fs.plugin_files import PluginFiles
from ci_evals.fs.walk import walk

AFTER_DIR = "after"
WORKSPACE_DIR = "workspace"
PLUGIN_DIR = "plugin"


def save_state(
    root: Path,
    dest: Path,
    *,
    previous: Path | None = None,
    changed: Collection[str] = (),
    exclude: Collection[str] = (),
) -> int:
    """Save `root` (a live workspace) as `dest`; return the number of files copied.

    With `previous` (the saved state of the stage before, in the same run
    folder) a file whose path is not in `changed` (the paths the stage added,
    modified or deleted) and that `previous` holds with the same size is
    hard-linked from there instead of copied. `exclude`: paths (relative, POSIX)
    left out, as `fs.walk` leaves them out.
    """
    if dest.exists():
        raise FileExistsError(f"state folder already exists: {dest}")
    dest.mkdir(parents=True)
    base = str(dest) + os.sep
    old = None if previous is None or not previous.is_dir() else str(previous) + os.sep
    copies: list[tuple[str, str]] = []
    for rel, kind, entry in walk(root, exclude=exclude, skip_vanished=True):
        target = base + rel
        try:
            if kind == "link":
                os.symlink(os.readlink(entry.path), target)
            elif kind == "dir":
                os.mkdir(target)
            elif kind == "file":
                if old is not None and _unchanged(rel, entry, old + rel, changed):
                    try:
                        os.link(old + rel, target)
                        continue
                    except OSError:
                        pass  # another device, a link limit: copy instead
                copies.append((entry.path, target))
        except FileNotFoundError:
            continue  # removed while we walked; the stage is over, so rare
    for _ in copy_many(copies):
        pass
    return len(copies)


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
    plugin_manifest: Mapping[str, object] | None = None,
    plugin_within: Path | None = None,
    plugin_files: PluginFiles | None = None,
) -> tuple[Path, Path]:
    """A private, writable copy for a grader: `dest/workspace` (of `state`) and
    `dest/plugin` (of `plugin_source`, links dereferenced as far as
    `plugin_within` (default: the plugin's own folder), with `plugin_manifest`
    written in as `fs.plugin_copy` does). Returns both paths.

    The workspace's component links (`agents -> ../plugin/agents`) are kept as
    written, so they resolve to the fresh plugin copy next to it: a reviewer
    reads the repository's rubrics, not a plugin copy the agent could edit.
    """
    workspace, plugin = dest / WORKSPACE_DIR, dest / PLUGIN_DIR
    dest.mkdir(parents=True, exist_ok=True)
    for path in (workspace, plugin):
        if os.path.lexists(path):
            raise FileExistsError(f"grading copy already exists: {path}")
    save_state(state, workspace)  # the same copy: folders, files, links as links
    within = plugin_source if plugin_within is None else plugin_within
    copy_plugin(plugin_source, plugin, plugin_manifest, within=within, files=plugin_files)
    return workspace, plugin
