"""The stage map's `global` globs: a change they match runs every stage.

A global is a glob with exactly the entries' meaning (gitignore style, see
`ci_evals.selection.glob_syntax`), relative to the stage map's folder instead of
`root` — what the same line would mean in a `.gitignore` kept next to the map.
So `ci-evals.yaml` matches that name at any depth below the map's folder,
`/ci-evals.yaml` only the one beside the map, `stub/**` everything under
`stub/`. Leading `./` and `../` segments move that folder (to reach a
workflow file from a map kept in a sub-folder); what follows them is anchored
there, since the line has a slash.

Two forms are worked out at load time (and cached with the map):
- `repo_glob`: the same glob relative to the repository top, which any
  changed path is matched against;
- `under_root`: globs relative to `root` matching exactly the paths under root
  that the global matches, so that `compute-stage` tests them in the entries'
  own pass over each changed file instead of in a second look-up. Where no
  such rewrite is exact (a wildcard folder above root, `*/plugin/x`), it says
  so and `compute-stage` tests such paths one by one.
"""

from __future__ import annotations

from ci_evals.selection.glob_syntax import is_literal, literal_glob
from ci_evals.selection.matcher import GlobMatcher

# `under_root`'s answer for a global that matches everything under root.
EVERYTHING = "**"


# What git reads when it checks files out, so a change to one changes the plugin
# and fixtures every stage reads without touching one of their files: a
# `.gitattributes` line (`working-tree-encoding`, `eol`, `text`, a `filter`)
# rewrites them; `.gitmodules` moves or swaps a submodule; `.lfsconfig` says
# where LFS content comes from. Always global (`stage_map.checkout_globals`).
CHECKOUT_FILES = (".gitattributes", ".gitmodules", ".lfsconfig")


def split_navigation(written: str) -> tuple[int, str]:
    """(how many folders up, the glob) for a written global: `../../x/*.md` -> (2, "/x/*.md").

    Leading `.` and `..` segments are folder moves, not part of the glob; what
    follows them is anchored (a `/` in the middle of a line anchors it). An
    empty glob (`..`, `./`) is left for the loader to reject.
    """
    segments = written.split("/")
    moves = 0
    while moves < len(segments) and segments[moves] in (".", ".."):
        moves += 1
    if not moves:
        return 0, written
    rest = "/".join(segments[moves:])
    return segments[:moves].count(".."), ("/" + rest if rest else "")


def _anchored(glob: str) -> bool:
    return "/" in glob.rstrip("/")


def _normal(glob: str) -> str:
    """`glob` with a leading `**/` before one name dropped: gitignore means the same."""
    # Not `**/` alone (every folder's contents): dropping it would leave nothing.
    if glob.startswith("**/") and glob[3:] and not _anchored(glob[3:]):
        return glob[3:]
    return glob


def _folder_glob(folder: str) -> str:
    """`folder` (literal, repo-relative) as the start of an anchored glob, no slash at the end."""
    return literal_glob(folder) if folder else ""


def repo_glob(base: str, glob: str) -> str:
    """`glob`, relative to the literal folder `base`, as a glob relative to `base`'s top.

    Exact for every path: an anchored glob is prefixed with the folder, a
    glob without a slash may match at any depth below it (`base/**/NAME`).
    """
    glob = _normal(glob)
    if not base:
        return glob
    if _anchored(glob):
        return f"{_folder_glob(base)}/{glob.lstrip('/')}"
    return f"{_folder_glob(base)}/**/{glob}"


def under_root(  # noqa: PLR0911 - one answer per case of the rewrite
    base: str, glob: str, root: str
) -> tuple[str, ...] | None:
    """Root-relative globs matching exactly the paths under `root` that `glob` matches.

    `base` and `root` are repo-relative literal folders ("" = the top).
    `()`: it matches nothing under root; `(EVERYTHING,)`: everything there;
    None: no exact rewrite is known (a wildcard in the folders above root).
    """
    glob = _normal(glob)
    if base == root or (not root) or base.startswith(root + "/"):
        return (repo_glob(base[len(root) :].lstrip("/"), glob),)
    if base and not root.startswith(base + "/"):
        return ()  # the global only matches paths under base, which is beside root
    above = root[len(base) :].lstrip("/").split("/")  # root's folders below base
    dir_only = glob.endswith("/")
    if not _anchored(glob):
        # A name that any folder down to root matches covers all of root;
        # otherwise it matches what the same name matches below root.
        name = glob.rstrip("/") if dir_only else glob
        # `name` can be all spaces (` /`: a folder named " ", which git allows);
        # the matcher refuses a blank glob, and such a name is a literal.
        if not name.strip():
            covers = name in above
        else:
            try:
                covers = bool(GlobMatcher([name]).matches("/".join(above)))  # all folders
            except ValueError:  # `\[ /`: a folder name the matcher cannot take alone
                return None
        if covers:
            return (EVERYTHING,)
        return (glob,)
    segments = glob.strip("/").split("/")
    for position, folder in enumerate(above):
        if position == len(segments):
            return (EVERYTHING,)  # the glob names a folder root is in
        segment = segments[position]
        if not is_literal(segment):
            return None
        if segment != folder:
            return ()
    if len(segments) == len(above):
        return (EVERYTHING,)  # the glob names root itself
    return ("/" + "/".join(segments[len(above) :]) + ("/" if dir_only else ""),)
