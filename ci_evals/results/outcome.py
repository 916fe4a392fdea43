"""A run as a program reads it: verdict, counts, cost and one row per stage run.

The `run` object of `run --json`, `merge --json`, `grade --json` and `report
--json` (schemas in `ci_evals/schemas/cli/`, docs/json.md): built from the
results file alone, so every command says the same thing about one run. The
verdict is `summary.exit_code`'s, the rule every exit code follows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ci_evals.results.model import RESULTS_FILE, RunResult, StageResult
from ci_evals.results.summary import exit_code
from ci_evals.results.verdict import stage_verdict

# The verdict of each stage run, counted (every key present, 0 when none).
VERDICTS = ("passed", "failed", "error")


def cost_kind(model_endpoint: str) -> str:
    """`real` for the API, `simulated` for a stub's scripted tokens, `replayed` for a
    recording's: a cost a program reads must not pass for a bill when none was paid."""
    if model_endpoint.startswith("stub:"):
        return "simulated"
    if model_endpoint.startswith("replay:"):
        return "replayed"
    return "real"


def run_verdict(result: RunResult) -> str:
    """`passed` or `failed` (by the exit rule), or `interrupted`."""
    if result.status == "interrupted":
        return "interrupted"
    return "passed" if exit_code(result) == 0 else "failed"


def run_document(
    result: RunResult, run_dir: Path, results_file: Path | None = None
) -> dict[str, Any]:
    """The `run` object: what the run was, what it decided, what it cost.
    `results_file`: where it was read (default: the run folder's own)."""
    rows: list[dict[str, Any]] = []
    counts = dict.fromkeys(VERDICTS, 0)
    input_tokens = output_tokens = 0
    reviewers = 0.0
    for scenario in result.scenarios:
        for position, stage in enumerate(scenario.stages):
            verdict = stage_verdict(stage, after_agent=position > 0)
            counts[verdict.verdict] += 1
            input_tokens += stage.input_tokens or 0
            output_tokens += stage.output_tokens or 0
            reviewers += stage.grading_cost_usd or 0.0
            rows.append(
                {
                    "scenario": scenario.id,
                    "repeat": scenario.repeat,
                    "arm": scenario.arm,
                    "number": stage.number,
                    "name": stage.name,
                    "status": stage.status,
                    "verdict": verdict.verdict,
                    "reason": verdict.reason,
                    "criteria": _criteria(stage),
                    "analytic_mean": verdict.analytic_mean,
                    "turns": stage.turns,
                    "cost_usd": stage.cost_usd,
                    "duration_s": stage.duration_s,
                }
            )
    return {
        "run_id": result.run_id,
        "run_dir": str(run_dir),
        "results_file": str(results_file or run_dir / RESULTS_FILE),
        "status": result.status,
        "verdict": run_verdict(result),
        "model": result.model,
        "model_endpoint": result.model_endpoint,
        "isolated": result.isolated,
        "from_stage": result.from_stage,
        "counts": {
            "scenarios": len({scenario.id for scenario in result.scenarios}),
            "stage_runs": len(rows),
            **counts,
        },
        "cost": {
            "total_usd": result.total_cost_usd,
            "reviewers_usd": reviewers,
            "budget_usd": result.budget_usd,
            "kind": cost_kind(result.model_endpoint),
        },
        "tokens": {"input": input_tokens, "output": output_tokens},
        "stages": rows,
    }


def _criteria(stage: StageResult) -> dict[str, int] | None:
    """Counted (not advisory) criteria passed of total; None for an ungraded stage."""
    if stage.grading is None:
        return None
    counted = [c for c in stage.grading.criteria if not c.advisory]
    return {"passed": sum(1 for c in counted if c.passed), "total": len(counted)}
