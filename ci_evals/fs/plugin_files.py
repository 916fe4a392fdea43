"""Which files of a plugin's folder its copies take: what Claude Code loads, nothing of ours.

A plugin can be the repository's top (`source: "./"` in its marketplace,
obra/superpowers), and then its folder also holds the repository's `.git`, a
developer's `.venv`, and ci-evals' own files: the suite, the stage map, the
fixtures (the known-good answers a stage is graded against), the stub scripts
and the run folders. A copy of all that would show the agent its answers.

So the copy takes what a commit made now would hold (`git.published_files`; in
GitHub Actions tracked files only, `git.only_tracked`: an untracked file there is
one a CI step wrote), every file outside a work tree, and never ci-evals' own
files (`PluginFiles.left`) nor `.git`. The suite lists the files once, at load
(`Plugin.files`); the check at load (`fs.copyable`), the copies
(`fs.plugin_copy`) and the plugin's digest (`fs.digest`) all read this one
record, so they agree on what the plugin is. What is left out, and why:
docs/suite.md (*What the copy takes*).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ci_evals import git

GIT_DIR = ".git"
RUNS = ".ci-evals"  # `run`'s and `check-fixtures`' default run root
RESULTS = "results.json"
SUITE = "ci-evals.yaml"
VENV_MARK = "pyvenv.cfg"  # at the top of every Python virtual environment (PEP 405)
# A run folder's `results.json` is an object with these keys (results.model.RunResult).
_RUN_KEYS = frozenset({"version", "run_id", "tool_version", "scenarios"})
_RESULTS_MAX = 64 << 20  # a larger file is no run of ours worth reading


@dataclass(frozen=True)
class PluginFiles:
    """The files a copy of the plugin folder takes (relative POSIX paths)."""

    # What a commit would hold of the folder; None: everything (no git to ask).
    listed: frozenset[str] | None = None
    # The folders on the way to a listed path (a copy enters them).
    folders: frozenset[str] = frozenset()
    # Left out, with everything below them: ci-evals' own files inside the plugin.
    left: frozenset[str] = frozenset()
    # Why each of `left` is ci-evals' (for `check`'s and the docs' wording).
    why: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def leaving(self, root: Path, paths: Iterable[tuple[Path, str]]) -> PluginFiles:
        """This record with `paths` (absolute, with why) left out too where they lie in `root`."""
        more = _inside(root, paths)
        if not more:
            return self
        return replace(self, left=self.left | {rel for rel, _ in more}, why=(*self.why, *more))

    def takes(self, rel: str, path: str, *, folder: bool) -> bool:
        """Whether a copy takes the entry `rel` (at `path`; `folder`: a real folder, not a
        link: a link to a folder holding the plugin is a loop the walk must still see)."""
        parts = rel.split("/")
        if any(part.lower() == GIT_DIR or part == RUNS for part in parts):
            return False
        if self.left and any("/".join(parts[: i + 1]) in self.left for i in range(len(parts))):
            return False
        if folder and not_the_plugins(path):
            return False
        if self.listed is None or rel in self.listed or rel in self.folders:
            return True
        # Inside a listed entry: a link to a folder (followed), a submodule.
        return any("/".join(parts[:i]) in self.listed for i in range(1, len(parts)))


def taker(files: PluginFiles | None) -> Callable[[str, os.DirEntry[str]], bool] | None:
    """`files.takes` as `fs.walk` asks it (None: the walk takes everything)."""
    if files is None:
        return None
    return lambda rel, entry: files.takes(
        rel, entry.path, folder=entry.is_dir(follow_symlinks=False)
    )


def plugin_files(
    root: Path, own: Iterable[tuple[Path, str]] = (), *, tracked_only: bool = False
) -> PluginFiles:
    """The files of the plugin folder `root` its copies take, less `own`
    (ci-evals' own paths, absolute, each with why); `tracked_only`: of a work
    tree, what git tracks alone (in CI)."""
    found = git.published_files(root, tracked_only=tracked_only)
    if found is None:
        return PluginFiles().leaving(root, own)
    # An untracked repository inside is listed as its folder, `name/`.
    published = [path.rstrip("/") for path in found]
    folders = {
        "/".join(parts[:i])
        for parts in (path.split("/") for path in published)
        for i in range(1, len(parts))
    }
    return PluginFiles(frozenset(published), frozenset(folders)).leaving(root, own)


def not_the_plugins(folder: str) -> bool:
    """Whether a folder inside the plugin is no part of it, whatever git says: a run
    folder, another suite's (`evals/<other plugin>/`), or a Python virtual
    environment (`pyvenv.cfg`: this machine's, its python a link to the system's;
    Python 3.13 makes git ignore one, older ones do not, and obra/superpowers'
    `.gitignore` has no `.venv`)."""
    return (
        is_run_folder(folder)
        or os.path.isfile(os.path.join(folder, SUITE))
        or os.path.isfile(os.path.join(folder, VENV_MARK))
    )


def is_run_folder(path: str) -> bool:
    """Whether `path` is a folder a ci-evals run wrote: it holds our `results.json`."""
    results = os.path.join(path, RESULTS)
    try:
        if not os.path.isfile(results) or os.path.getsize(results) > _RESULTS_MAX:
            return False
        with open(results, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.keys() >= _RUN_KEYS


def _inside(root: Path, paths: Iterable[tuple[Path, str]]) -> tuple[tuple[str, str], ...]:
    """Each of `paths` that lies strictly inside `root`, relative to it (POSIX), with why."""
    real_root = os.path.realpath(root)
    found = []
    for path, why in paths:
        rel = os.path.relpath(os.path.realpath(path), real_root)
        if rel not in (".", os.pardir) and not rel.startswith(os.pardir + os.sep):
            found.append((Path(rel).as_posix(), why))
    return tuple(found)
