"""Can a folder be copied with its links followed (as the plugin is)? Find out first.

The plugin is copied into every workspace and every reviewer's copy with
`shutil.copytree(symlinks=False)`. A named pipe, a socket or a device in it, a
link that dangles, or a link back to a folder it is in (`templates/loop -> .`,
which a copy following links would repeat until paths are too long) each makes
that copy fail mid-run, once per scenario. `copy_problem` walks the folder the
way the copy will and names the first such entry, so the suite can refuse it
before anything starts. A link into `/proc`, `/sys` or `/dev` is refused too:
the copy would carry this machine's state (ci-evals' own environment, with
its API key, through `/proc/self/environ`) to the agent.
"""

from __future__ import annotations

import os
import stat

from ci_evals.fs.walk import walk

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


_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def copy_problem(root: str | os.PathLike[str]) -> tuple[str, str] | None:
    """(path, what is wrong) for the first entry a link-following copy cannot copy, or None.

    Links are followed (a link to shared files elsewhere is fine); each folder
    is entered with the chain of real folders above it, so a link to one of
    them, or to a folder holding one of them, is a loop.
    """
    top = os.fspath(root)
    walked = walk(top, follow_links=True)
    while True:
        try:
            found = next(walked, None)
        except OSError as exc:  # a folder that cannot be listed
            return exc.filename or top, f"cannot be read ({exc.strerror or exc})"
        if found is None:
            return None
        _, kind, entry = found
        path = entry.path
        if kind == "link":  # cannot be followed
            try:
                os.stat(path)
            except OSError as exc:
                return path, _link_problem(path, exc)
        if entry.is_symlink() or kind in ("dir", "loop"):
            real = os.path.realpath(path)
            problem = host_state_problem(real)
            if problem is None and kind == "loop":
                what = repr(os.readlink(path)) if entry.is_symlink() else real
                problem = f"is a link to {what}, a folder it is inside (copying it would never end)"
            if problem is not None:
                return path, problem
        if kind == "other":
            try:
                mode = os.stat(path).st_mode
            except OSError as exc:
                return path, f"cannot be read ({exc.strerror or exc})"
            what = _KINDS.get(stat.S_IFMT(mode), "not a file or folder")
            via = " (through a link)" if entry.is_symlink() else ""
            return path, f"is {what}{via}; only files, folders and links can be copied"


def _link_problem(path: str, exc: OSError) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    if isinstance(exc, FileNotFoundError):
        return f"is a dangling link (to {target!r}, which does not exist)"
    return f"is a link to {target!r} that cannot be followed ({exc.strerror or exc})"
