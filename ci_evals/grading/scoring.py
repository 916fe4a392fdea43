"""The scoring policy: when does a stage pass?

Default (the seed's): every checklist criterion scores 1 and the mean of the
analytic criteria is at least 3.0. Configurable per suite and per stage:

- `analytic_mean_at_least` (`analytic_threshold`) — the analytic mean's pass
  mark, also each analytic criterion's own `passed`;
- `weights` — per criterion id; used for the analytic mean and the binary score;
- `advisory` — criterion ids that are reported but never fail the stage;
- `binary_score_at_least` (`binary_threshold`) — optionally, a minimum binary
  score (0-100).

With repeats, the k-of-n rule is the suite's `pass_at_least` (see `stats`).

Fail closed: a grader error makes the stage `error`; so do zero criteria, or
only advisory ones — nothing was held to a standard, so nothing passed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from ci_evals.grading.reviewer.rubrics import normalize_id
from ci_evals.results import DEFAULT_ANALYTIC_THRESHOLD

if TYPE_CHECKING:  # pydantic stays out of the config loaders' import cost
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict, Verdict

POLICY_KEYS = (
    "checklist",
    "analytic_mean_at_least",
    "binary_score_at_least",
    "weights",
    "advisory",
)
CHECKLIST_RULES = ("all-pass",)


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
    # Keyed by normalised criterion id (see rubrics.normalize_id).
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


def load_policy(field: LocatedNode) -> PolicyOverride:
    """A `scoring:` mapping from ci-evals.yaml (suite or stage level).

    ```yaml
    scoring:
      checklist: all-pass            # the only rule so far (and the default)
      analytic_mean_at_least: 3.0
      binary_score_at_least: 80      # optional
      weights: {coherence: 2}
      advisory: [style-nits]
    ```
    """
    keys = field.mapping(POLICY_KEYS, what="scoring mapping")
    if "checklist" in keys and keys["checklist"].as_str() not in CHECKLIST_RULES:
        raise keys["checklist"].error(
            f"unknown checklist rule {keys['checklist'].as_str()!r}",
            hint="'all-pass'; to let a criterion fail without failing the stage, list it "
            "under 'advisory'",
        )
    threshold = None
    if "analytic_mean_at_least" in keys:
        threshold = keys["analytic_mean_at_least"].as_number(minimum=1.0)
        if threshold > 5.0:
            raise keys["analytic_mean_at_least"].error(
                f"must be at most 5 (analytic scores are 1-5), got {threshold}"
            )
    weights: dict[str, float] = {}
    if "weights" in keys:
        from ci_evals.config.yaml_source import ANY_KEY  # noqa: PLC0415 - loaded: `field` is one

        for name, value in keys["weights"].mapping(ANY_KEY, what="mapping of id: weight").items():
            weights[normalize_id(name)] = value.as_number(minimum=0.0)
    advisory: frozenset[str] = frozenset()
    if "advisory" in keys:
        advisory = frozenset(normalize_id(a) for a in keys["advisory"].as_str_list())
    binary = None
    if "binary_score_at_least" in keys:
        binary = keys["binary_score_at_least"].as_number(minimum=0.0)
        if binary > 100.0:
            raise keys["binary_score_at_least"].error(f"must be at most 100, got {binary}")
    return PolicyOverride(
        analytic_threshold=threshold,
        weights=_frozen_map(weights),
        advisory=advisory,
        binary_threshold=binary,
    )


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
