"""A `claude plugin eval` case's `context:` (scaffold_script, history_file, add_dirs), checked.

The CLI's rules (2.1.337, read from its bundled code and checked by running it):

- every path is written relative to the case's folder and, as written, names
  something inside it (`..` or an absolute path: "escapes the case directory");
  it must exist;
- through its links it must resolve inside the case's folder or the plugin
  under test;
- `scaffold_script` and `history_file` are plain files with one link;
  `history_file` needs `execution.prompt` (the resumed session's next turn);
- an `add_dirs` entry is a folder, not one holding case definitions (the case
  folder itself: the graders) and not version-control metadata.

What ci-evals does with them is the runner's (`run.case_context`): the case's
folder is copied, read-only, beside the workspace; the scaffold runs there in
the sandbox; the history is copied into the agent's private folder and resumed;
the add_dirs are bound read-only. Nothing is ever written in the plugin's tree.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci_evals.config.yaml_source import LocatedNode
from ci_evals.fs.copyable import is_git
from ci_evals.fs.walk import walk

CASE_FILES = ("case.yaml", "prompt.md")


@dataclass(frozen=True)
class CaseContext:
    """What a case runs with besides its prompt: each path relative to `folder`."""

    folder: Path  # the case's folder, as found
    scaffold_script: str | None = None
    history_file: str | None = None
    add_dirs: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self.scaffold_script is None and self.history_file is None and not self.add_dirs


def load_context(
    keys: Mapping[str, LocatedNode], name: str, folder: Path, plugin_dir: Path | None
) -> CaseContext:
    """The `context:` keys (unknown ones already warned about) of case `name` in `folder`."""
    roots = [os.path.realpath(folder)]
    if plugin_dir is not None:
        roots.append(os.path.realpath(plugin_dir))
    scaffold = history = None
    if "scaffold_script" in keys:
        scaffold = _file(keys["scaffold_script"], name, folder, roots, "scaffold_script")
    if "history_file" in keys:
        history = _file(keys["history_file"], name, folder, roots, "history_file")
    dirs = []
    if "add_dirs" in keys:
        for item in keys["add_dirs"].sequence():
            dirs.append(_folder(item, name, folder, roots))
    return CaseContext(folder, scaffold, history, tuple(dirs))


def _inside(value: LocatedNode, name: str, folder: Path) -> tuple[str, str]:
    """The path as written (normalised, `/`-separated) and its real path; the CLI's
    errors for one that escapes the case's folder or does not exist."""
    written = value.as_str()
    rel = os.path.normpath(written)
    if os.path.isabs(written) or rel == ".." or rel.startswith(".." + os.sep):
        raise value.error(
            f'case "{name}": path "{written}" escapes the case directory (`..` or an '
            "absolute path) \u2014 it must name something inside it"
        )
    path = folder / rel
    if not os.path.lexists(path) or not os.path.exists(path):
        raise value.error(f'case "{name}": path "{written}" does not exist')
    if any(is_git(part) for part in Path(rel).parts):
        raise value.error(f'case "{name}": path "{written}" points into version-control metadata')
    return Path(rel).as_posix(), os.path.realpath(path)


def _within(real: str, roots: list[str]) -> bool:
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def _file(value: LocatedNode, name: str, folder: Path, roots: list[str], key: str) -> str:
    rel, real = _inside(value, name, folder)
    info = os.stat(real)
    if not _within(real, roots) or not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        raise value.error(
            f'case "{name}": {key} "{value.as_str()}" resolves (through a link) outside the '
            "case directory and the plugin under test, or is not a plain single-link file"
        )
    return rel


def _folder(value: LocatedNode, name: str, folder: Path, roots: list[str]) -> str:
    rel, real = _inside(value, name, folder)
    if not _within(real, roots):
        raise value.error(
            f'case "{name}": add_dirs entry "{value.as_str()}" resolves (through a link) '
            "outside the case directory and the plugin under test \u2014 it may only grant "
            "reads inside them"
        )
    if not os.path.isdir(real):
        raise value.error(f'case "{name}": add_dirs entry "{value.as_str()}" is not a folder')
    # Links are not entered; a case file is one that is no folder (a link to a file too).
    for below, _, entry in walk(real, skip_vanished=True, skip_unreadable=True):
        if is_git(entry.name) or (entry.name in CASE_FILES and not os.path.isdir(entry.path)):
            raise value.error(
                f'case "{name}": an add_dirs entry points inside a directory that holds case '
                "definitions or version-control data \u2014 point it at the fixtures themselves",
                hint=f"found in {posixpath.dirname(below) or os.curdir}",
            )
    return rel
