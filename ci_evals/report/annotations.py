"""What a run's annotations say: one per stage that did not pass.

Pure data (`Note`: level, title, message); `commands.report` turns them into
escaped `::error`/`::warning` workflow commands, at most 10 per level (GitHub
drops the rest silently), and the step summary lists every one of them under
*Not passed*. Levels: `error` for a stage that failed, errored or was never
finished, and for a run that did not pass though no stage says so (`run_reason`);
`warning` for one skipped because an earlier stage did not pass, for a file a
stage left that addresses its reviewer (an advisory flag, any verdict), and
for a run the stub model served (its verdict is a wiring check, not the model's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ci_evals.report import (
    flagged_criteria,
    reason,
    run_outcomes,
    run_problems,
    run_reason,
    scenario_label,
    stage_label,
)
from ci_evals.text import one_line

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult

MESSAGE_LIMIT = 1000


@dataclass(frozen=True)
class Note:
    level: Literal["error", "warning"]
    title: str
    message: str


def run_notes(result: RunResult, problems: Sequence[str] | None = None) -> list[Note]:
    """The annotations for `result`, errors first, in stage order within a level."""
    found = run_problems(result, problems)
    errors: list[Note] = [
        Note("error", "ci-evals: results file inconsistent", one_line(p, MESSAGE_LIMIT))
        for p in found
    ]
    why = run_reason(result, found)
    if why:
        errors.append(Note("error", f"ci-evals: the run is {result.status}", one_line(why)))
    warnings: list[Note] = []
    for scenario, stage, kind in run_outcomes(result):
        title = f"ci-evals: {scenario_label(result, scenario)} stage {stage_label(stage)}"
        warnings.extend(
            Note("warning", title, one_line(c.detail, MESSAGE_LIMIT))
            for c in flagged_criteria(stage)
        )
        if kind == "passed":
            continue
        text = one_line(f"{stage.status}: {reason(result, stage)}", MESSAGE_LIMIT)
        if kind == "skipped":
            warnings.append(Note("warning", title, text))
        else:
            errors.append(Note("error", title, text))
    if result.model_endpoint.startswith("stub:"):
        warnings.append(
            Note(
                "warning",
                "ci-evals: stub model",
                "the stub model served this run: a wiring check (plugin, stages, graders), "
                "not a verdict on any model",
            )
        )
    elif result.origin_note:  # a replay's recording, or who ran an imported run
        title = "imported run" if result.imported_from else "replayed recording"
        warnings.append(Note("warning", f"ci-evals: {title}", one_line(result.origin_note)))
    return errors + warnings
