"""The grading data: criteria, what each grader returned, and a stage's verdict.

These are pydantic models (frozen, unknown fields rejected) so `results.json`
can embed them as they are and read them back for re-grading and reports.

A *criterion* is one scored line of a scorecard:

- `checklist` — score 0 or 1; passes on 1.
- `analytic` — score 1-5; passes on a score at or above the policy's
  threshold, and the stage needs the (weighted) mean at or above it.

The kind is decided by where the criterion is defined (a rubric folder, a
rubric's `type:` field, or the grader itself), never by the score's value.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

CriterionKind = Literal["checklist", "analytic"]
Verdict = Literal["passed", "failed", "error"]

# Where a criterion came from: one of the built-in graders, or the name of the
# grader kind a package registers (entry-point group `ci_evals.graders`), so
# its criteria say whose they are. Grading checks that a source is one of
# these (`grade_state.files`); a results file is read wherever it is reported,
# perhaps where that package is not installed, so here a source is checked
# only to be a name: letters, digits, `_`, `-`, `.`, at most 64 characters.
BUILTIN_SOURCES = ("reviewer", "check", "command", "mcp", "plugin_eval")
CriterionSource = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]

CHECKLIST_SCORES = (0.0, 1.0)
ANALYTIC_MIN = 1.0
ANALYTIC_MAX = 5.0


class FrozenRecord(BaseModel):
    """A results record: immutable, and a key it does not know is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Criterion(FrozenRecord):
    """One scored criterion, from a reviewer, a deterministic check, a command, an
    MCP server's sub-test or a grader kind a package adds (`source`)."""

    id: str = Field(min_length=1)
    kind: CriterionKind
    # None when there is nothing to score (e.g. a skipped JUnit test case).
    score: float | None
    passed: bool
    weight: float = Field(default=1.0, ge=0.0)
    # Advisory criteria are reported but never fail the stage.
    advisory: bool = False
    rationale: str = ""
    source: CriterionSource
    # Why a check failed, which file it looked at, a command's output tail.
    detail: str = ""
    # The rubric file that defines a reviewer criterion, and its content hash.
    rubric: str | None = None
    rubric_sha256: str | None = None


class RubricRef(FrozenRecord):
    """A rubric file a reviewer was graded against (recorded for reproducibility)."""

    id: str
    kind: CriterionKind | None
    path: str
    sha256: str


class RawOutput(FrozenRecord):
    """A grader's raw output as saved in the run folder (never inside the workspace)."""

    path: str | None = None
    sha256: str
    size: int = Field(ge=0)


class GraderResult(FrozenRecord):
    """What one grader produced for one stage run.

    `error` set means the grader could not produce a trustworthy scorecard
    (unparseable reviewer output, a command that could not start, an invalid
    results file): the stage verdict is then `error`, never a pass.
    """

    grader: str = Field(min_length=1)
    criteria: tuple[Criterion, ...] = ()
    error: str | None = None
    raw_output: RawOutput | None = None
    judge_model: str | None = None
    rubrics: tuple[RubricRef, ...] = ()
    warnings: tuple[str, ...] = ()
    # A reviewer run: what it cost, its trajectory (relative to the run folder
    # once recorded), and `reviewer.fingerprint` of its agent file, prompt
    # template and rubrics (a saved scorecard is re-used only while it matches).
    cost_usd: float | None = None
    trajectory: str | None = None
    fingerprint: str | None = None
    # Set when re-grading re-used a saved scorecard instead of running the reviewer.
    reused: bool = False


class StageVerdict(FrozenRecord):
    """A stage's verdict under a scoring policy, with everything that led to it."""

    verdict: Verdict
    # One line a person can act on: which criteria failed, the mean vs the threshold.
    reason: str
    # The grader results with the policy applied to each criterion
    # (weights, advisory, and `passed` for analytic scores vs the threshold).
    graders: tuple[GraderResult, ...]
    # None when the stage has no (non-advisory) criterion of that kind.
    checklist_all_passed: bool | None
    analytic_mean: float | None
    analytic_threshold: float
    # The seed's binary sub-test score: weighted fraction of criteria passed, 0-100.
    binary_score: float | None
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def criteria(self) -> tuple[Criterion, ...]:
        """Every criterion of every grader, in grader order."""
        return tuple(c for result in self.graders for c in result.criteria)
