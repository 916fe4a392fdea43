"""Which suite and which source a run evaluated, recorded in `results.json`.

A later run is compared with this one (`ci-evals report --baseline`): the
comparison refuses a run of another suite (`SuiteIdentity`: the suite file's
path in the repository and the plugin's name) and says when the baseline did
not run at the merge base of the change (`Revision`). Nothing here is trusted
for a verdict; it only tells a reader whether two runs are comparable.
"""

from __future__ import annotations

from pathlib import Path

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.results.model import Revision, SuiteIdentity
from ci_evals.selection.decide import Selection
from ci_evals.suite.load import Suite


def _top(suite: Suite) -> Path | None:
    try:
        return git.toplevel(suite.root).resolve()
    except UserError:
        return None  # not in a git repository: nothing to record


def _relative(path: Path, top: Path) -> str | None:
    """`path` relative to `top` (POSIX), or None when it lies outside."""
    try:
        return path.resolve().relative_to(top).as_posix()
    except ValueError:
        return None


def suite_identity(suite: Suite) -> SuiteIdentity:
    top = _top(suite)
    path = _relative(suite.file, top) if top is not None else None
    return SuiteIdentity(path=path or suite.file.name, plugin=suite.plugin.name)


def revision(suite: Suite, selection: Selection | None = None) -> Revision | None:
    """HEAD, whether the suite's own files differ from it, and `--base`'s merge base."""
    top = _top(suite)
    if top is None:
        return None
    commit = git.rev_parse(top, "HEAD")
    if commit is None:
        return None  # a repository without a commit yet
    inside = [suite.file, suite.plugin.path, suite.fixtures]
    if suite.stage_map is not None:
        inside.append(suite.stage_map)
    paths = [p for p in (_relative(path, top) for path in inside) if p is not None]
    # An empty path list would ask about the whole tree: the run folder, caches.
    dirty = bool(paths) and git.has_changes(top, [p or "." for p in paths])
    merge_base = None
    if selection is not None and len(selection.merge_bases) == 1:
        merge_base = selection.merge_bases[0]
    return Revision(
        commit=commit,
        dirty=dirty,
        base=selection.base if selection is not None else None,
        merge_base=merge_base,
    )
