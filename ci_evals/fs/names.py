"""The rule a name read from a suite or a results file must pass to become one
component of a path: a scenario id, a stage name, a task's folder
(docs/scale-out.md, *Names that become paths*). Names ci-evals makes itself are
made safe where they are made: an agent configuration's folder (`suite.matrix`:
its number and a slug) and a mock's (`workspace.mock_server`: Claude Code's rule).

A suite's ids are checked with it at load, and every id read back from a results
file, a shard or an artifact is checked with it again before it is joined to a
folder: a results file travels between jobs, and `../escape`, an absolute path or
a name too long for the file system must be refused, not followed.
"""

from __future__ import annotations

import re

# Letters, digits, `.`, `_`, `-`, starting with a letter or digit: no separator (`/`,
# `\`), no NUL, never `.` or `..`, never absolute, never hidden.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Far below a file system's 255 bytes: folders and pages join a few names and a number.
MAX_NAME = 64
RULE = f"letters, digits, '.', '_' and '-', starting with a letter or digit, at most {MAX_NAME}"


_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def as_name(text: str, fallback: str) -> str:
    """`text` with each run of characters a name cannot hold as one `-`, and `-`/`.`
    trimmed from its ends (`fallback` when nothing is left): a `claude plugin eval`
    case's scenario id, from its free-form name."""
    return _NOT_NAME.sub("-", text).strip("-.") or fallback


def name_problem(name: object) -> str | None:
    """Why `name` may not be one path component, or None when it may."""
    if not isinstance(name, str):
        return f"{name!r} is not a string"
    if not _NAME.fullmatch(name):
        return f"{_shown(name)} is not a name ({RULE})"
    if len(name) > MAX_NAME:
        return f"{_shown(name)} is {len(name)} characters long, more than {MAX_NAME}"
    return None


def _shown(name: str) -> str:
    """`name` quoted and cut short: the message stays one line of a readable length."""
    text = repr(name)
    return text if len(text) <= 40 else text[:37] + "..."
