"""How a stage's verdict is decided, graded or not: one place.

A graded stage: `evaluate`, its graders' criteria under the `ScoringPolicy`
(docs/grading.md, *Scoring policy*; the suite's and the stage's `scoring:`
keys are read by `grading.config`). Fail closed: a grader error, no criteria,
or only advisory ones make the stage `error`: nothing was held to a standard.
A stage without such a verdict: `stage_verdict`, from its status, so that it
still counts toward k-of-n (`summary`):

| stage status | counts as |
|---|---|
| `passed` / `failed` / `error` with a verdict | that verdict |
| `completed`: no graders / graders but never graded | passed / error |
| `limit` (turns, time, budget) | failed: a limit is the agent's failure |
| `error` from the agent, `skipped`, `pending`, `running` | error: nothing was judged |
| `error` with `endpoint_misses` (whatever its verdict) | error: the stub did not answer |

Cheap to import (the suite loader takes the policy): pydantic only once a
verdict is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from ci_evals.results import DEFAULT_ANALYTIC_THRESHOLD, NOT_GRADED, normalize_id

if TYPE_CHECKING:  # pydantic stays out of the config loaders' import cost
    from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict, Verdict
    from ci_evals.results.model import StageResult


def _frozen_map(values: Mapping[str, float] | None = None) -> Mapping[str, float]:
    return MappingProxyType(dict(values or {}))


@dataclass(frozen=True)
class PolicyOverride:
    """What a suite or a stage sets; `None` / empty means "keep the outer value"."""

    analytic_threshold: float | None = None
    weights: Mapping[str, float] = field(default_factory=_frozen_map)
    advisory: frozenset[str] = frozenset()
    binary_threshold: float | None = None


@dataclass(frozen=True)
class ScoringPolicy:
    analytic_threshold: float = DEFAULT_ANALYTIC_THRESHOLD
    # Keyed by normalised criterion id (see `normalize_id`).
    weights: Mapping[str, float] = field(default_factory=_frozen_map)
    advisory: frozenset[str] = frozenset()
    binary_threshold: float | None = None

    def __post_init__(self) -> None:
        # Look-ups normalise ids; so must the keys, however the policy was built.
        weights = {normalize_id(k): v for k, v in self.weights.items()}
        object.__setattr__(self, "weights", _frozen_map(weights))
        object.__setattr__(self, "advisory", frozenset(normalize_id(a) for a in self.advisory))

    def merge(self, override: PolicyOverride) -> ScoringPolicy:
        """This policy with `override` on top: scalars replace, weights merge by id,
        advisory ids add up (a stage can mark more criteria advisory, not fewer)."""
        weights = dict(self.weights)
        weights.update({normalize_id(k): v for k, v in override.weights.items()})
        return replace(
            self,
            analytic_threshold=(
                self.analytic_threshold
                if override.analytic_threshold is None
                else override.analytic_threshold
            ),
            weights=_frozen_map(weights),
            advisory=self.advisory | {normalize_id(a) for a in override.advisory},
            binary_threshold=(
                self.binary_threshold
                if override.binary_threshold is None
                else override.binary_threshold
            ),
        )

    def weight(self, criterion_id: str) -> float:
        return self.weights.get(normalize_id(criterion_id), 1.0)

    def is_advisory(self, criterion_id: str) -> bool:
        return normalize_id(criterion_id) in self.advisory


def apply_policy(criterion: Criterion, policy: ScoringPolicy) -> Criterion:
    """The criterion as the policy sees it: weight, advisory, and `passed` from its score.

    Everything is recomputed from the id and the score, so re-grading a saved
    verdict under another policy gives what grading the raw results would.
    An unscored criterion (a skipped test) is always advisory.
    """
    passed = criterion.passed
    if criterion.score is not None:
        if criterion.kind == "checklist":
            passed = criterion.score == 1.0
        else:
            passed = criterion.score >= policy.analytic_threshold
    return criterion.model_copy(
        update={
            "passed": passed,
            "weight": policy.weight(criterion.id),
            "advisory": criterion.score is None or policy.is_advisory(criterion.id),
        }
    )


def evaluate(results: Sequence[GraderResult], policy: ScoringPolicy) -> StageVerdict:
    """The stage's verdict from its graders' results under `policy`."""
    from ci_evals.results.criteria import StageVerdict  # noqa: PLC0415 - see TYPE_CHECKING

    graders = tuple(
        r.model_copy(update={"criteria": tuple(apply_policy(c, policy) for c in r.criteria)})
        for r in results
    )
    criteria = [c for r in graders for c in r.criteria]
    scoring = [c for c in criteria if not c.advisory]
    checklist = [c for c in scoring if c.kind == "checklist"]
    analytic = [c for c in scoring if c.kind == "analytic"]

    checklist_ok = all(c.passed for c in checklist) if checklist else None
    analytic_mean = _weighted_mean(analytic)
    binary = _binary_score(scoring)
    warnings = tuple(w for r in graders for w in r.warnings)

    def verdict(kind: Verdict, reason: str, error: str | None = None) -> StageVerdict:
        return StageVerdict(
            verdict=kind,
            reason=reason,
            graders=graders,
            checklist_all_passed=checklist_ok,
            analytic_mean=analytic_mean,
            analytic_threshold=policy.analytic_threshold,
            binary_score=binary,
            error=error,
            warnings=warnings,
        )

    errors = [f"{r.grader}: {r.error}" for r in graders if r.error is not None]
    if errors:
        return verdict("error", errors[0], error="; ".join(errors))
    if not criteria:
        message = "no criteria: the graders produced nothing to judge"
        return verdict("error", message, error=message)
    if not scoring:
        message = "every criterion is advisory: nothing decides the verdict"
        return verdict("error", message, error=message)

    failures = []
    failed_items = [c.id for c in checklist if not c.passed]
    if failed_items:
        failures.append(
            f"checklist {len(failed_items)} of {len(checklist)} failed: " + ", ".join(failed_items)
        )
    # All analytic weights 0 leaves no mean: the analytic rule then decides nothing.
    if analytic_mean is not None and analytic_mean < policy.analytic_threshold:
        failures.append(
            f"analytic mean {analytic_mean:.2f} < {policy.analytic_threshold:g}"
            f" (low: {', '.join(c.id for c in analytic if not c.passed)})"
        )
    if policy.binary_threshold is not None and (binary is None or binary < policy.binary_threshold):
        shown = "n/a" if binary is None else f"{binary:.1f}"
        failures.append(f"binary score {shown} < {policy.binary_threshold:g}")
    if failures:
        return verdict("failed", "; ".join(failures))
    return verdict("passed", _summary(checklist, analytic_mean, binary))


def stage_verdict(result: StageResult, *, after_agent: bool = False) -> StageVerdict:
    """The stage's recorded verdict, or one standing in for a run without a verdict.

    `after_agent`: an earlier stage's agent worked in this stage's workspace (the
    stage is not the first the run ran in it). A stage of such a workspace that
    never reached the model is then `failed`, not an error: what stopped the CLI
    (a `!`git ...`` expansion that finds no repository) may be that agent's work
    — it can delete or corrupt the workspace's `.git` — and an error would take
    the run out of the k-of-n count ("not a verdict on the agent").
    """
    from ci_evals.results.criteria import StageVerdict  # noqa: PLC0415 - see TYPE_CHECKING

    stub_missed = result.status == "error" and bool(result.endpoint_misses)
    if (
        result.grading is not None
        and result.status in ("passed", "failed", "error")
        and not stub_missed  # graded on answers nobody scripted: its verdict says nothing
    ):
        return result.grading
    kind: Verdict
    if stub_missed:
        kind, reason = "error", result.error or "the stub model had no scripted answer"
    elif result.status == "completed" and result.graded:
        kind, reason = "error", NOT_GRADED
    elif result.status == "completed":
        kind, reason = "passed", "completed (no graders)"
    elif result.status == "limit":
        kind, reason = "failed", f"hit its {result.limit_hit} limit"
    elif result.status == "error" and not result.model_ran and after_agent:
        kind = "failed"
        reason = f"in the workspace the stages before left: {result.error or 'no verdict'}"
    else:
        kind, reason = "error", f"{result.status}: {result.error or 'no verdict'}"
    return StageVerdict(
        verdict=kind,
        reason=reason,
        graders=(),
        checklist_all_passed=None,
        analytic_mean=None,
        analytic_threshold=DEFAULT_ANALYTIC_THRESHOLD,
        binary_score=None,
        error=reason if kind == "error" else None,
    )


def _weighted_mean(criteria: Sequence[Criterion]) -> float | None:
    scored = [(c.score, c.weight) for c in criteria if c.score is not None]
    total = sum(weight for _, weight in scored)
    if not scored or total == 0:
        return None
    return sum(score * weight for score, weight in scored) / total


def _binary_score(criteria: Sequence[Criterion]) -> float | None:
    total = sum(c.weight for c in criteria)
    if not criteria or total == 0:
        return None
    return 100.0 * sum(c.weight for c in criteria if c.passed) / total


def _summary(checklist: Sequence[Criterion], mean: float | None, binary: float | None) -> str:
    parts = []
    if checklist:
        parts.append(f"checklist {len(checklist)}/{len(checklist)}")
    if mean is not None:
        parts.append(f"analytic mean {mean:.2f}")
    if binary is not None:
        parts.append(f"binary score {binary:.1f}")
    return "; ".join(parts)
