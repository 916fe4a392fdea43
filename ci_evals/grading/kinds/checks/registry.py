"""The kinds of check, by the key that names one in a stage's `checks:` list.

The one table of checks: the loader takes each kind's keys from here, `run`
runs what they load, and tests hold the shipped JSON Schema and
docs/grading.md to it. Built in only (a package adds a whole grader kind
instead, `grading.kinds.registry`); the order is that of `one of: ...` in
the loader's messages.
"""

from __future__ import annotations

from ci_evals.grading.kinds.checks.base import CheckKind
from ci_evals.registry import Registry

CHECK_KINDS: Registry[CheckKind] = Registry(
    "check kind",
    None,
    {
        "files": "ci_evals.grading.kinds.checks.files:FilesExist",
        "headings": "ci_evals.grading.kinds.checks.headings:HasHeadings",
        "front_matter": "ci_evals.grading.kinds.checks.front_matter:HasFrontMatter",
        "json_schema": "ci_evals.grading.kinds.checks.json_schema:JsonSchema",
        "equals_length": "ci_evals.grading.kinds.checks.equals_length:EqualsLength",
        "trajectory": "ci_evals.grading.kinds.checks.trajectory:TrajectoryUse",
    },
)
