"""The grading keys of `ci-evals.yaml`, validated at load into frozen records.

The suite loader keeps these keys as positioned YAML (`Stage.extra`,
`Suite.extra`); it calls `load_stage_grading` / `load_suite_grading` on them
and gets file:line errors for free. Per stage: `reviewer` (the plugin's own
review agent: `reviewer/config.py`), `checks` (`kinds/checks/`), `graders`
(command graders: `kinds/command.py`), `mcp` (`kinds/mcp.py`) and `scoring`
(overriding the suite's: `load_policy` here, the rules in `results.verdict`).
A stage key that is none of these may be a grader kind a package adds
(`kinds.registry`); `grader_keys` tells the suite loader which keys those are.
Suite level: `scoring`, `repeat` (runs per scenario, default 1) and
`pass_at_least` (k of `repeat`; default: all).

Every key, with an example: docs/grading.md (*In `ci-evals.yaml`*).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from ci_evals.errors import Problems, UserError
from ci_evals.grading.kinds.base import Grader, LoadContext
from ci_evals.grading.kinds.plugin_eval import PluginEvalGrader
from ci_evals.grading.kinds.registry import KINDS, in_order
from ci_evals.grading.reviewer.config import ReviewerConfig, load_reviewer
from ci_evals.results import normalize_id
from ci_evals.results.verdict import PolicyOverride

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

# The built-in grading keys of a stage (`grader_keys` adds the installed kinds').
STAGE_KEYS = ("reviewer", *KINDS.builtin, "scoring")
SUITE_KEYS = ("scoring", "repeat", "pass_at_least", "stop_repeats_early", "gate", "flaky_bounds")


@dataclass(frozen=True)
class StageGrading:
    reviewer: ReviewerConfig | None = None
    graders: tuple[Grader, ...] = ()  # every other grader, in registry order
    scoring: PolicyOverride = field(default_factory=PolicyOverride)

    @property
    def empty(self) -> bool:
        """No grader at all: the stage can only be `completed`, never `passed`."""
        return self.reviewer is None and not self.graders

    @property
    def writes(self) -> bool:
        """Some grader may change the folder: grade a private copy."""
        return any(grader.writes for grader in self.graders)

    @property
    def sandboxed(self) -> bool:
        """Something runs in a sandbox: the reviewer's CLI or a grader's program."""
        return self.reviewer is not None or any(g.sandboxed for g in self.graders)

    def for_arm(self, arm: Literal["with", "without"] | None) -> StageGrading:
        """These graders as `arm` of a run with and without the plugin grades them
        (None: a single-arm run, unchanged): a case's graders under `claude plugin
        eval`'s with-only rule, its with-only graders advisory in the with-arm."""
        if arm is None or not any(isinstance(g, PluginEvalGrader) for g in self.graders):
            return self
        graders = tuple(
            g.for_arm(arm) if isinstance(g, PluginEvalGrader) else g for g in self.graders
        )
        advisory = {n for g in graders if isinstance(g, PluginEvalGrader) for n in g.not_scored}
        scoring = replace(self.scoring, advisory=self.scoring.advisory | advisory)
        return replace(self, graders=graders, scoring=scoring)

    def files_only(self) -> StageGrading:
        """Without the checks that read a trajectory (a fixture has none)."""
        graders = tuple(grader.files_only() for grader in self.graders)
        return StageGrading(reviewer=self.reviewer, graders=graders, scoring=self.scoring)


@dataclass(frozen=True)
class SuiteGrading:
    scoring: PolicyOverride = field(default_factory=PolicyOverride)
    repeat: int = 1
    pass_at_least: int | None = None  # None: every repeat must pass
    # Start no further repeat of a scenario once its k-of-K verdict cannot change
    # (`ci_evals.run.adaptive`).
    stop_repeats_early: bool = False
    # `stable`: the report gates only on criteria stable on main's history (`report
    # --history`); a flaky one reports, never silently passes (`ci_evals.report.flakes`).
    gate: Literal["all", "stable"] = "all"
    flaky_bounds: tuple[float, float] | None = None  # None: 0,1 (both passed and failed)


def grader_keys(keys: Iterable[str], known: Collection[str]) -> tuple[str, ...]:
    """The keys among `keys` that are not in `known` (a stage's other keys) but name an
    installed grader kind. Installed metadata is read only when there is such a key."""
    return tuple(key for key in keys if key not in known and key in KINDS)


def load_stage_grading(
    extra: Mapping[str, LocatedNode],
    *,
    suite_dir: Path,
    plugin_dir: Path,
    within: Path,
    problems: Problems | None = None,
) -> StageGrading:
    """A stage's grading keys (`STAGE_KEYS` and `grader_keys`); each grader kind loads
    (and validates) its own key, and only the kinds used are imported. Rubric
    problems go to `problems` (default: raised at once)."""
    if problems is None:
        problems = Problems()
    ctx = LoadContext(suite_dir=suite_dir, plugin_dir=plugin_dir, within=within)
    graders: list[Grader] = []
    for key in in_order(k for k in extra if k not in ("reviewer", "scoring")):
        try:
            kind = KINDS.get(key)
        except UserError as exc:
            raise extra[key].error(exc.message, hint=exc.hint) from None
        why = kind.available()
        if why is not None:
            raise extra[key].error(
                f"grader kind {key} cannot run here: {why}", hint="run where it can"
            )
        graders.extend(kind.load(extra[key], ctx))
    scoring = load_policy(extra["scoring"]) if "scoring" in extra else PolicyOverride()
    return StageGrading(
        reviewer=(
            load_reviewer(extra["reviewer"], plugin_dir, suite_dir, problems)
            if "reviewer" in extra
            else None
        ),
        graders=tuple(graders),
        scoring=_with_grader_defaults(scoring, tuple(graders)),
    )


def _with_grader_defaults(scoring: PolicyOverride, graders: tuple[Grader, ...]) -> PolicyOverride:
    """The stage's `scoring:` on top of what graders configure for their own criteria
    (an mcp grader's advisory sub-tests and weights): they go through the policy like
    any other, so re-grading and `report` recompute them alike. The stage's weights
    win; advisory ids add up."""
    weights: dict[str, float] = {}
    advisory: set[str] = set()
    for grader in graders:
        own = grader.scoring
        if own is not None:
            weights.update(own.weights)
            advisory.update(own.advisory)
    if not weights and not advisory:
        return scoring
    weights.update(scoring.weights)
    return replace(scoring, weights=MappingProxyType(weights), advisory=scoring.advisory | advisory)


def load_suite_grading(extra: Mapping[str, LocatedNode]) -> SuiteGrading:
    """The suite-level grading keys (any subset of `SUITE_KEYS`)."""
    repeat = extra["repeat"].as_int(minimum=1) if "repeat" in extra else 1
    pass_at_least = None
    if "pass_at_least" in extra:
        pass_at_least = extra["pass_at_least"].as_int(minimum=1)
        if pass_at_least > repeat:
            raise extra["pass_at_least"].error(
                f"is {pass_at_least} but repeat is {repeat}",
                hint="set repeat: to at least pass_at_least",
            )
    return SuiteGrading(
        scoring=load_policy(extra["scoring"]) if "scoring" in extra else PolicyOverride(),
        repeat=repeat,
        pass_at_least=pass_at_least,
        stop_repeats_early=(
            extra["stop_repeats_early"].as_bool() if "stop_repeats_early" in extra else False
        ),
        gate=_gate(extra["gate"]) if "gate" in extra else "all",
        flaky_bounds=_flaky_bounds(extra["flaky_bounds"]) if "flaky_bounds" in extra else None,
    )


# The keys of a `scoring:` mapping (suite or stage level) and its checklist rules.
POLICY_KEYS = (
    "checklist",
    "analytic_mean_at_least",
    "binary_score_at_least",
    "weights",
    "advisory",
)
CHECKLIST_RULES = ("all-pass",)


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
        weights=MappingProxyType(weights),
        advisory=advisory,
        binary_threshold=binary,
    )


def _gate(field: LocatedNode) -> Literal["all", "stable"]:
    value = field.as_str()
    if value == "stable":
        return "stable"
    if value == "all":
        return "all"
    raise field.error(f"is {value!r}", hint="gate: all (the default) or stable")


def _flaky_bounds(field: LocatedNode) -> tuple[float, float]:
    """`[LOW, HIGH]`, 0 <= LOW < HIGH <= 1: a pass rate strictly between them is flaky."""
    hint = "flaky_bounds: [LOW, HIGH] with 0 <= LOW < HIGH <= 1, e.g. [0.1, 0.9]"
    items = field.sequence()
    if len(items) != 2:
        raise field.error(f"has {len(items)} item(s), not 2", hint=hint)
    low, high = (item.as_number(minimum=0.0) for item in items)
    if not 0.0 <= low < high <= 1.0:
        raise field.error(f"is [{low}, {high}]", hint=hint)
    return low, high
