"""Grader kinds by their key in a stage of `ci-evals.yaml` (`ci_evals.registry`).

Built in: `checks`, `graders` (command graders), `mcp`, `plugin_eval` (the
graders of `claude plugin eval` cases); a package adds a kind
with an entry point in group `ci_evals.graders` naming its `GraderKind`
(grading.kinds.base), and its key is then a stage key. A kind's module is imported
only when a stage uses its key (the suite loader on the hook path never pays
for the mcp checker). Results list the built-in kinds first, in this order,
then the others by key.
"""

from __future__ import annotations

from collections.abc import Iterable

from ci_evals.grading.kinds.base import GraderKind
from ci_evals.registry import Registry

KINDS: Registry[GraderKind] = Registry(
    "grader kind",
    "ci_evals.graders",
    {
        "checks": "ci_evals.grading.kinds.checks.grader:KIND",
        "graders": "ci_evals.grading.kinds.command:KIND",
        "mcp": "ci_evals.grading.kinds.mcp:KIND",
        "plugin_eval": "ci_evals.grading.kinds.plugin_eval:KIND",
    },
)


def in_order(keys: Iterable[str]) -> list[str]:
    """`keys` (a stage's grader keys) in the order of its results."""
    builtin = KINDS.builtin
    keys = set(keys)
    return [k for k in builtin if k in keys] + sorted(k for k in keys if k not in builtin)
