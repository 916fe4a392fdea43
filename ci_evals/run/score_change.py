"""Did this run's scores change — between its repeats, or since the last run of the
same suite on the same endpoint? Then an endpoint's note on why scores move (the
stub's rotating variants) is worth its line under the table; else it is noise
printed on every run.

The last run is the newest other run folder beside this one (`.ci-evals/runs/`)
whose results name the same suite and endpoint. No such run (the first, or
another suite's only) counts as a change: a newcomer's first run is when the
note explains most. Any results file that cannot be read is passed over; a
missing comparison always says the note (fail towards saying it).
"""

from __future__ import annotations

import os
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.results.model import RESULTS_FILE, RunResult, read_results

_LOOK_AT = 8  # other run folders read at most, newest first

# Per (scenario, stage): each repeat's status and criteria (id, score, passed).
Scores = dict[tuple[str, str], list[tuple[object, ...]]]


def scores_changed(result: RunResult, run_dir: Path) -> bool:
    """True when the repeats of a scenario's stage differ, or the last comparable
    run's scores differ from these (or there is none to compare with)."""
    mine = _scores(result)
    if any(len(set(repeats)) > 1 for repeats in mine.values()):
        return True
    last = _last_run(result, run_dir)
    return last is None or _scores(last) != mine


def _scores(result: RunResult) -> Scores:
    found: Scores = {}
    for scenario in result.scenarios:
        for stage in scenario.stages:
            criteria = () if stage.grading is None else stage.grading.criteria
            found.setdefault((scenario.id, stage.name), []).append(
                (stage.status, *((c.id, c.score, c.passed) for c in criteria))
            )
    return found


def _last_run(result: RunResult, run_dir: Path) -> RunResult | None:
    """The newest other run beside `run_dir` of the same suite and endpoint."""
    try:
        siblings = [
            entry
            for entry in os.scandir(run_dir.parent)
            if entry.is_dir(follow_symlinks=False) and entry.path != str(run_dir)
        ]
    except OSError:
        return None
    newest = sorted(siblings, key=_mtime, reverse=True)[:_LOOK_AT]
    for entry in newest:
        path = Path(entry.path) / RESULTS_FILE
        if not path.is_file():
            continue
        try:
            other = read_results(path)
        except UserError:
            continue
        if (other.suite, other.model_endpoint) == (result.suite, result.model_endpoint):
            return other
    return None


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0
