"""`copy_plugin`: the plugin's folder copied for a workspace or a grader.

Links are followed: a link out of the plugin folder becomes a copy of what it
points at, so nothing in the copy leads back into the repository. The copy is
named `plugin/`, not after the plugin, so a plugin Claude Code names after its
folder or its marketplace entry (it has no manifest of its own) gets one
written into the copy that says the same name (`suite.plugin_source`).

What a link leads to must lie inside `within` (the repository) and outside
its `.git` (`fs.copyable`). The suite checked that at load, but a link can be
swapped between that check and this copy, so the copy checks again what it
actually opens: each file's real path is read from its open descriptor
(`/proc/self/fd`), each folder's just before it is listed, and anything
outside is refused. `.git` entries are left out: a plugin at the
repository's top holds the repository's own. Given `files` (`Plugin.files`),
the copy takes only those (`fs.plugin_files`: what a commit would hold, less
ci-evals' own suite, fixtures, stubs and run folders).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs.copy import copy_file
from ci_evals.fs.copyable import escape_problem, is_git, outside_problem
from ci_evals.fs.plugin_files import PluginFiles
from ci_evals.text import display_path

MANIFEST = ".claude-plugin/plugin.json"


def copy_plugin(
    source: Path,
    dest: Path,
    manifest: Mapping[str, object] | None = None,
    *,
    within: Path,
    files: PluginFiles | None = None,
) -> None:
    """Copy `source` to `dest` (which must not exist), every file in it (of `files`,
    when given) and every file its links lead to inside `within`; write `manifest`
    into the copy."""
    real_within = os.path.realpath(within)
    top = os.fspath(source)

    def folder(path: str, names: list[str]) -> list[str]:
        problem = escape_problem(path, real_within)
        if problem is not None:
            raise UserError(f"plugin folder {display_path(path)} {problem}")
        if files is None:
            return [name for name in names if is_git(name)]
        base = os.path.relpath(path, top)
        prefix = "" if base == os.curdir else Path(base).as_posix() + "/"
        return [
            name
            for name in names
            if is_git(name)
            or not files.takes(
                prefix + name,
                os.path.join(path, name),
                folder=_real_folder(os.path.join(path, name)),
            )
        ]

    def copy(src: str, dst: str) -> None:
        def opened(fd: int, info: os.stat_result) -> None:
            real = _opened_path(fd, info, src)
            if real is None:
                problem: str | None = "was replaced while copied"
            else:
                problem = outside_problem(real, real_within)
            if problem is not None:
                raise UserError(
                    f"plugin file {display_path(src)} {problem} when copied; links may lead "
                    f"only to files of {display_path(real_within)}, outside .git"
                )

        copy_file(src, dst, check=opened)

    try:
        shutil.copytree(source, dest, symlinks=False, ignore=folder, copy_function=copy)
        if manifest is not None:
            path = dest / MANIFEST
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps(dict(manifest), indent=2) + "\n", encoding="utf-8")
    except (OSError, shutil.Error) as exc:
        raise UserError(f"cannot copy the plugin {display_path(source)}: {_why(exc)}") from None


def _why(exc: OSError | shutil.Error) -> str:
    """One reason: copytree's error lists every file it failed on (a full disk: all
    of them, as one 10,000-character blob); the first, and how many more."""
    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if isinstance(failures, list) and failures and isinstance(failures[0], tuple):
        _, target, why = [*failures[0], "", "", ""][:3]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"{why}: {target}{more}"
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _real_folder(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _opened_path(fd: int, info: os.stat_result, path: str) -> str | None:
    """The real path of the file open as `fd`: what the kernel opened, whatever
    `path` names now. Without `/proc`, the path resolved now if it is still
    that same file; None when it is not (replaced meanwhile)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    real = os.path.realpath(path)
    try:
        now = os.stat(real)
    except OSError:
        return None
    return real if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino) else None
