"""`ci-evals plan`: a run's work units split into K shards, as CI's job matrix.

One suite (`--suite`, `--from-stage`/`--base` exactly as `run` decides them,
`--scenario`, `--repeat`) or `--tasks` (every task x configuration): the
split is `run.shard`'s, so `run --shard I/K` with the same inputs runs what
shard I was given here. What it chose goes to stderr; stdout is the matrix.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from ci_evals.run import run_command as single
from ci_evals.run import shard, tasks
from ci_evals.suite.load import find_suite, load_suite


@dataclass(frozen=True)
class Matrix:
    """What `ci-evals plan` prints (`matrix`, for `strategy.matrix`) and its step outputs."""

    matrix: str  # {"include": [{"shard": "I/K", "from_stage": "N"}, ...]}; no entry: nothing to run
    shards: int
    from_stage: str  # "none": nothing to run; "" with --tasks (every task whole)

    @property
    def outputs(self) -> dict[str, str]:
        return {"matrix": self.matrix, "shards": str(self.shards), "from_stage": self.from_stage}


def plan(args: argparse.Namespace) -> Matrix:
    """The job matrix of `args`' run split into `args.shards` shards; what it chose on stderr."""
    durations = shard.read_durations(args.durations)
    budget = None
    if args.tasks is not None:
        assignment, from_stage = tasks.assignment(args, durations), ""
    else:
        assignment_or_none, from_stage, budget = _suite_plan(args, durations)
        if assignment_or_none is None:
            return Matrix(_matrix([]), shards=0, from_stage="none")
        assignment = assignment_or_none
    if assignment.count < args.shards:
        print(
            f"ci-evals plan: {len(assignment.units)} work unit(s): {assignment.count} shard(s), "
            f"not {args.shards}",
            file=sys.stderr,
        )
    for k in range(1, assignment.count + 1):
        part = assignment.record(k, budget_usd=budget).budget_usd
        print(
            f"shard {k}/{assignment.count}: {len(assignment.positions(k))} unit(s), "
            f"estimate {assignment.load(k):.1f}"
            + ("" if part is None else f", budget ${part:.4f} of the run's ${budget:.4f}"),
            file=sys.stderr,
        )
    entries: list[dict[str, str]] = [
        {"shard": f"{k}/{assignment.count}"} | ({"from_stage": from_stage} if from_stage else {})
        for k in range(1, assignment.count + 1)
    ]
    return Matrix(_matrix(entries), shards=assignment.count, from_stage=from_stage)


def _suite_plan(
    args: argparse.Namespace, durations: shard.Durations
) -> tuple[shard.Assignment | None, str, float | None]:
    """The suite's assignment (None: nothing to run), its first stage and its budget."""
    suite = load_suite(args.suite or find_suite(Path.cwd()))
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the matrix
        start = single.from_stage_of(suite, args)
        scenarios = single.scenarios_for(suite, args, start)
    from_stage = start.stage
    if from_stage is None or not scenarios:
        return None, "none", None
    repeat = args.repeat or suite.grading.repeat
    if args.repeat:  # as `run`: --repeat overrides a case's runs
        scenarios = tuple(replace(s, repeat=None) for s in scenarios)
    assignment = shard.suite_assignment(
        suite, from_stage, scenarios, repeat, count=args.shards, durations=durations
    )
    return assignment, str(from_stage.number), suite.budget_usd


def _matrix(entries: list[dict[str, str]]) -> str:
    return json.dumps({"include": entries}, separators=(",", ":"))
