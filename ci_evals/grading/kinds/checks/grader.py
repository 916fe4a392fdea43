"""The `checks` grader kind: a stage's `checks:` loaded and graded as one
`GraderResult` named "checks"."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ci_evals.grading.kinds.checks.base import Check
from ci_evals.grading.kinds.checks.load import load_checks
from ci_evals.grading.kinds.checks.run import run_checks

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import GradeContext, LoadContext
    from ci_evals.results.criteria import GraderResult


@dataclass(frozen=True)
class ChecksGrader:
    """A stage's `checks:`, graded together as one `GraderResult` ("checks")."""

    checks: tuple[Check, ...]
    name: str = "checks"
    writes: bool = False
    sandboxed: bool = False  # reads files in this process; runs nothing
    scoring: None = None  # no defaults of its own for its criteria

    def grade(self, ctx: GradeContext) -> GraderResult:
        return run_checks(self.checks, ctx.folder, ctx.trajectory, grader=self.name)

    def files_only(self) -> ChecksGrader:
        """Without the trajectory checks (a fixture has no trajectory)."""
        return replace(self, checks=tuple(c for c in self.checks if not c.reads_trajectory))


class _ChecksKind:
    name = "checks"

    def available(self) -> str | None:
        return None  # it reads files in this process

    def load(self, value: LocatedNode, ctx: LoadContext) -> tuple[ChecksGrader, ...]:
        return (
            ChecksGrader(
                load_checks(
                    value, suite_dir=ctx.suite_dir, plugin_dir=ctx.plugin_dir, within=ctx.within
                )
            ),
        )


KIND = _ChecksKind()
