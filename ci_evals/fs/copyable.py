"""Can a folder be copied with its links followed (as the plugin is)? Find out first.

The plugin is copied into every workspace and every reviewer's copy with
`shutil.copytree(symlinks=False)`. A named pipe, a socket or a device in it, a
link that dangles, or a link back to a folder it is in (`templates/loop -> .`)
each makes that copy fail mid-run, once per scenario. `copy_problem` walks the
folder the way the copy will and names the first such entry, so the suite can
refuse it before anything starts. A link into `/proc`, `/sys` or `/dev` is
refused too: the copy would carry this machine's state (`/proc/self/environ`,
with ci-evals' API key) to the agent.

A pull request is hostile: a link it commits (`-> ../../.git/config`, which holds
the job's token after `actions/checkout`) would hand what it points at to the
agent, the model and the artifact. So every link is resolved as the system
resolves it, and one that ends outside `within` (the repository), or in a `.git`
at any depth, is refused (`outside_problem`). docs/isolation.md (*Links a pull
request commits*).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.fs.plugin_files import PluginFiles, taker
from ci_evals.fs.walk import Kind, walk
from ci_evals.text import display_path

GIT_DIR = ".git"

# Views of the running machine, not files anyone wrote: `/proc/self/environ`
# reads as a regular file holding ci-evals' own environment (its API key), so a
# link to it would copy that into every workspace the agent reads.
_HOST_STATE = ("/proc", "/sys", "/dev")


def host_state_problem(real: str) -> str | None:
    """What is wrong with a link that resolves to `real` in `/proc`, `/sys` or `/dev`, or None."""
    for top in _HOST_STATE:
        if real == top or real.startswith(top + "/"):
            return (
                f"is a link into {top} ({real}): a view of this machine, not a file; "
                "copy the file itself into the folder"
            )
    return None


COPY_HINT = (
    "the plugin folder is copied into every workspace, links followed; remove or fix that entry"
)


def is_git(name: str) -> bool:
    """Whether a name is git's folder (any case: a case-insensitive file system opens it)."""
    return name.lower() == GIT_DIR


def confinement(folder: Path) -> Path:
    """The real folder the links of a suite in `folder` may lead into: its repository's top.

    Outside a git repository, `folder` itself: nothing says where a repository
    would end, so nothing above the suite's own folder is trusted (fail closed).
    """
    try:
        top = git.toplevel(folder)
    except UserError:
        top = folder
    return Path(os.path.realpath(top))


def outside_problem(real: str, within: str | os.PathLike[str]) -> str | None:
    """What is wrong with a path that resolves to `real` when it may lead only into
    `within` (a real path) and not into a `.git` below it, or None."""
    relative = os.path.relpath(real, within)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return f"leads outside {os.fspath(within)} (to {real})"
    if any(is_git(part) for part in relative.split(os.sep)):
        return f"leads into git's own files ({real})"
    return None


def holds_repository_problem(
    folder: str | os.PathLike[str], within: str | os.PathLike[str]
) -> str | None:
    """What is wrong with laying `folder` (a fixture, a scaffold) into a workspace
    when it is the top of the repository `within`, or above it, or None.

    The top holds `.git` (with the job's token) and what no commit put there:
    files a CI step wrote into the checkout (`gha-creds-*.json`), earlier run folders.
    """
    top = os.path.realpath(within)
    if not os.path.lexists(os.path.join(top, GIT_DIR)):
        return None
    real = os.path.realpath(folder)
    relative = os.path.relpath(top, real)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        return None  # below the top: its .git is not in it
    return (
        f"is the repository's top or above it ({real}): it holds .git and files no commit "
        "put there (a CI job's credentials, earlier runs); name a folder below the top"
    )


_LINK_HINT = (
    "links may lead only to files of the repository, outside .git: copy the file in instead"
)


def escape_problem(path: str, within: str | os.PathLike[str]) -> str | None:
    """What is wrong with the link (or a path through links) `path` if it resolves
    outside `within` or into a `.git`, or None; one clause naming where it points."""
    problem = outside_problem(os.path.realpath(path), within)
    if problem is None:
        return None
    try:
        target = f"is a link to {os.readlink(path)!r} that "
    except OSError:  # not a link itself: a folder it lies in is one, or none is
        if os.path.realpath(path) == os.path.normpath(os.path.abspath(path)):
            return (
                f"{problem.replace('leads', 'lies', 1)}; a suite names only files of its "
                "repository, outside .git (outside any git repository: below the suite's "
                "own folder): move the file, or make one git repository hold both"
            )
        target = "is reached through a link that "
    return f"{target}{problem}; {_LINK_HINT}"


def named_problem(
    text: str, base: str | os.PathLike[str], within: str | os.PathLike[str]
) -> str | None:
    """What is wrong with a file a suite, a stub script or a grader names as `text`
    (relative to `base`, the folder of the file naming it), or None.

    The one rule for every such path: relative (an absolute path names a file
    of this machine, not of the repository), and resolving, links followed,
    inside `within` (the repository: `confinement`) and outside any `.git`.
    A `..` that stays inside the repository is fine.
    """
    if os.path.isabs(text):
        return (
            f"is an absolute path; name a file of the repository, relative to {display_path(base)}"
        )
    return escape_problem(os.path.join(base, text), within)


def escaping_link(
    root: str | os.PathLike[str], within: str | os.PathLike[str]
) -> tuple[str, str] | None:
    """(path, what is wrong) for the first link under `root` (or `root` itself) that
    leads outside `within` or into a `.git`, or None. Only links are looked at
    (one `stat` each), so this is cheap enough for the pre-commit hook."""
    top = os.fspath(root)
    problem = escape_problem(top, within)
    if problem is not None:
        return top, problem
    try:
        for rel, _, entry in walk(top, follow_links=True, exclude=_git_entries(top)):
            if entry.is_symlink() and not in_git(rel):
                problem = escape_problem(entry.path, within)
                if problem is not None:
                    return entry.path, problem
    except OSError as exc:  # a folder that cannot be listed: its links unseen
        return exc.filename or top, f"cannot be read ({exc.strerror or exc})"
    return None


def in_git(rel: str) -> bool:
    """Whether a relative POSIX path is a `.git` or below one: never copied."""
    return any(is_git(part) for part in rel.split("/"))


def _git_entries(top: str) -> tuple[str, ...]:
    """The `.git` entries at the top of a folder: its own repository's, never copied."""
    try:
        return tuple(name for name in os.listdir(top) if is_git(name))
    except OSError:
        return ()


_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def copy_problem(
    root: str | os.PathLike[str],
    within: str | os.PathLike[str] | None = None,
    files: PluginFiles | None = None,
) -> tuple[str, str] | None:
    """(path, what is wrong) for the first entry a link-following copy cannot copy, or None.

    Links are followed (a link to shared files elsewhere is fine); each folder
    is entered with the chain of real folders above it, so a link to one of
    them, or to a folder holding one of them, is a loop. With `within`, a link
    (or the folder itself) that leads outside it or into a `.git` is refused
    (`escape_problem`). `.git` entries are not looked at: the copy leaves them,
    and with `files` so is everything else the copy leaves (`fs.plugin_files`).
    """
    top = os.fspath(root)
    if within is not None and (problem := escape_problem(top, within)) is not None:
        return top, problem
    walked = walk(top, follow_links=True, exclude=_git_entries(top), takes=taker(files))
    while True:
        try:
            found = next(walked, None)
        except OSError as exc:  # a folder that cannot be listed
            return exc.filename or top, f"cannot be read ({exc.strerror or exc})"
        if found is None:
            return None
        rel, kind, entry = found
        if not in_git(rel) and (problem := _entry_problem(entry, kind, within)) is not None:
            return entry.path, problem


def _entry_problem(
    entry: os.DirEntry[str], kind: Kind, within: str | os.PathLike[str] | None
) -> str | None:
    """What `copy_problem` finds wrong with one entry of the walk, or None."""
    path = entry.path
    if kind == "link":  # cannot be followed
        try:
            os.stat(path)
        except OSError as exc:
            return _link_problem(path, exc)
    if entry.is_symlink() or kind in ("dir", "loop"):
        problem = host_state_problem(os.path.realpath(path))
        if problem is None and within is not None and entry.is_symlink():
            problem = escape_problem(path, within)
        if problem is None and kind == "loop":
            what = repr(os.readlink(path)) if entry.is_symlink() else os.path.realpath(path)
            problem = f"is a link to {what}, a folder it is inside (copying it would never end)"
        if problem is not None:
            return problem
    if kind == "other":
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        what = _KINDS.get(stat.S_IFMT(mode), "not a file or folder")
        via = " (through a link)" if entry.is_symlink() else ""
        return f"is {what}{via}; only files, folders and links can be copied"
    return None


def _link_problem(path: str, exc: OSError) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    if isinstance(exc, FileNotFoundError):
        return f"is a dangling link (to {target!r}, which does not exist)"
    return f"is a link to {target!r} that cannot be followed ({exc.strerror or exc})"
