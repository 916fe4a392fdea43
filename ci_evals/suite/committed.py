"""Whether git would commit a suite: the `.gitignore` rule that hides it, in one line.

obra/superpowers ignores `evals/` (its own eval harness lives elsewhere), so
a suite drafted into `evals/superpowers/` runs locally and never reaches the
pull request that should run it. Git cannot re-include a file below an
excluded folder (`!evals/x/` after `evals/` does nothing), so the line says
the two ways that work. `init` prints it after drafting, and `check` with
its OK line.
"""

from __future__ import annotations

import os
from pathlib import Path

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.text import display_path

# Cases `init --format cases` drafts sit in the plugin's eval folder, which the
# CLI finds by the manifest alone (and a folder below an ignored one cannot be
# re-included: the rule itself must go).
CASES_ADVICE = (
    "drop the rule, or name another eval folder in the plugin's manifest "
    '("experimental": {"evals": "DIR"}) and draft again'
)


def hidden_line(
    files: list[Path], *, what: str = "the suite", advice: str | None = None
) -> str | None:
    """One line when git ignores the first of `files` (a suite, its map; `what`)
    that it does, saying by which rule and what to do (`advice`, else un-ignore
    its folder or draft it elsewhere); None when a commit takes them all (or they
    are in no work tree: nothing to commit them to)."""
    for path in files:
        try:
            rule = git.ignoring_rule(path.parent, path.name)
        except (git.GitError, OSError):
            return None  # not in a work tree
        if rule is None:
            continue
        source = Path(rule.source)  # as git names it: from the top, or absolute
        if not source.is_absolute():
            source = git.toplevel(path.parent) / source
        return (
            f"{display_path(path)} is ignored by git ({display_path(source)}:{rule.line}: "
            f"{rule.pattern}): {what} would not be committed, nor run on a pull request; "
            + (
                advice
                or f"un-ignore its folder ({_unignore(rule.pattern, path)}), or draft the "
                "suite elsewhere (ci-evals init --into DIR)"
            )
        )
    return None


def _unignore(pattern: str, path: Path) -> str:
    """The lines that un-ignore the suite's folder below a folder pattern (`evals/`)."""
    try:
        top = git.toplevel(path.parent)
    except UserError:
        return f"!{path.parent.name}/ after {pattern}"
    rel = Path(os.path.relpath(path.parent, top)).as_posix()
    first = rel.split("/")[0]
    if pattern.rstrip("/") == first and "/" in rel:
        return f"{first}/* and !/{rel}/ in place of {pattern}"
    return f"!/{rel}/ after {pattern}"
