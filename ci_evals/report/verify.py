"""May a report believe this results file? `problems` lists every reason it may not.

`ci_evals.results.consistency` checks how the file's parts fit together; this
adds the scoring rules (`ci_evals.results.verdict`): every recorded verdict is
evaluated again from its own criteria, under the policy the file records for it — the analytic
threshold, and each criterion's weight and advisory flag — and must come out
the same: each criterion's `passed` from its score, the checklist flag, the
analytic mean, the binary score, and a `passed` verdict passing again.

A `failed` verdict that evaluates to a pass is left alone: the binary-score
threshold is not recorded, and a failure claims nothing a report could be
fooled by. The policy itself (which threshold, which criteria are advisory)
comes from the file, so a consistent rewrite of it is not caught; the suite
would be needed for that, and the report reads nothing but the file.

`report` and `grade` treat any problem as an error of the whole run.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ci_evals.results import normalize_id
from ci_evals.results.consistency import problems as file_problems
from ci_evals.results.consistency import stage_where
from ci_evals.results.verdict import ScoringPolicy, evaluate

if TYPE_CHECKING:
    from ci_evals.results.criteria import StageVerdict
    from ci_evals.results.model import RunResult


def problems(result: RunResult) -> list[str]:
    """Every inconsistency in `result` (the file's own and the scoring rules'), one line each."""
    found = file_problems(result)
    for scenario in result.scenarios:
        for stage in scenario.stages:
            if stage.grading is not None:
                where = stage_where(result, scenario, stage)
                found += [f"{where}: {p}" for p in verdict_problems(stage.grading)]
    for case in result.imported_from.cases if result.imported_from else ():
        for index, stage in enumerate(case.without):  # an imported without-plugin arm
            if stage.grading is not None:
                where = f"{case.scenario} without the plugin, run {index + 1}"
                found += [f"{where}: {p}" for p in verdict_problems(stage.grading)]
    return found


def verdict_problems(verdict: StageVerdict) -> list[str]:
    """Where `verdict` differs from evaluating its own criteria under its own policy again."""
    criteria = verdict.criteria
    weights: dict[str, float] = {}
    advisory: set[str] = set()
    found: list[str] = []
    for c in criteria:
        key = normalize_id(c.id)
        if weights.setdefault(key, c.weight) != c.weight:
            found.append(f"criterion {c.id} has two different weights")
        if c.advisory and c.score is not None:
            advisory.add(key)
    for c in criteria:
        if c.score is not None and (normalize_id(c.id) in advisory) != c.advisory:
            found.append(f"criterion {c.id} is advisory in one place and not in another")
    policy = ScoringPolicy(
        analytic_threshold=verdict.analytic_threshold,
        weights=weights,
        advisory=frozenset(advisory),
    )
    again = evaluate(verdict.graders, policy)
    for recorded, recomputed in zip(criteria, again.criteria, strict=True):
        if recorded.passed != recomputed.passed:
            score = "-" if recorded.score is None else f"{recorded.score:g}"
            found.append(
                f"criterion {recorded.id} ({recorded.kind}, score {score}) is recorded "
                f"{'passed' if recorded.passed else 'failed'} but the scoring rules say "
                f"{'passed' if recomputed.passed else 'failed'} "
                f"(threshold {verdict.analytic_threshold:g})"
            )
    if verdict.checklist_all_passed != again.checklist_all_passed:
        found.append(
            f"checklist_all_passed is {verdict.checklist_all_passed} but the criteria give "
            f"{again.checklist_all_passed}"
        )
    for name, mine, theirs in (
        ("analytic_mean", verdict.analytic_mean, again.analytic_mean),
        ("binary_score", verdict.binary_score, again.binary_score),
    ):
        if not _close(mine, theirs):
            found.append(f"{name} is {_shown(mine)} but the criteria give {_shown(theirs)}")
    if verdict.verdict == "passed" and again.verdict != "passed":
        found.append(f"verdict passed but the scoring rules say {again.verdict}: {again.reason}")
    return found


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _shown(value: float | None) -> str:
    return "null" if value is None else f"{value:g}"
