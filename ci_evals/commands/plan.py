"""`ci-evals plan`: split a run into shards for CI's job matrix (docs/scale-out.md).

Prints `{"include": [{"shard": "I/K", ...}, ...]}` for `strategy.matrix` (no
entry: nothing to run; with `--json` inside the `ci-evals/plan/1` document)
and, in GitHub Actions, the step outputs `matrix`, `shards` and `from_stage`.
The split is `ci_evals.run.plan_shards.plan`'s.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ci_evals.commands import output
from ci_evals.commands.run import durations_option, positive_int
from ci_evals.errors import EXIT_OK
from ci_evals.github import actions as gha


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--suite", type=Path, help="the suite file (default: ci-evals.yaml found upwards)"
    )
    what.add_argument(
        "--tasks", type=Path, metavar="DIR", help="plan `run --tasks DIR` instead of one suite"
    )
    parser.add_argument(
        "--matrix", type=Path, metavar="FILE", help="with --tasks: the agent configurations"
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-stage", metavar="N|NAME", help="first stage to run (default: 1)")
    start.add_argument(
        "--base",
        metavar="REV",
        help="from the lowest stage the change BASE...HEAD can affect (as `run --base`)",
    )
    parser.add_argument(
        "--scenario", action="append", default=[], metavar="ID", help="only this scenario"
    )
    parser.add_argument(
        "--repeat", type=positive_int, metavar="K", help="runs per scenario (as `run --repeat`)"
    )
    parser.add_argument(
        "--shards", type=positive_int, required=True, metavar="K", help="how many shards"
    )
    durations_option(parser)
    output.add_json(
        parser,
        "plan",
        "the matrix, with the shard count and first stage; without it stdout is the bare matrix",
    )


def run(args: argparse.Namespace) -> int:
    from ci_evals.run import plan_shards  # noqa: PLC0415

    planned = plan_shards.plan(args)
    if args.emit is not None:
        import json  # noqa: PLC0415

        args.emit(
            EXIT_OK,
            {
                "matrix": json.loads(planned.matrix),
                "shards": planned.shards,
                "from_stage": planned.from_stage or None,
            },
        )
    else:  # what `strategy.matrix: ${{ fromJSON(...) }}` reads as it is
        print(planned.matrix)
    env = gha.ActionsEnv.from_environ(os.environ)
    if env is not None:
        gha.write_outputs(env, planned.outputs)
    return EXIT_OK
