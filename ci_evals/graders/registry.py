"""Grader kinds by their key in a stage of `ci-evals.yaml`.

Adding a kind is one module (a `GraderKind` and its `Grader`s, see `base`)
and one line here. The order is the order of a stage's results.
"""

from __future__ import annotations

from ci_evals.graders import checks, command, mcp
from ci_evals.graders.base import GraderKind

KINDS: dict[str, GraderKind] = {
    checks.KIND.key: checks.KIND,
    command.KIND.key: command.KIND,
    mcp.KIND.key: mcp.KIND,
}
