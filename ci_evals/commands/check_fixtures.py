"""`ci-evals check-fixtures`: grade the curated fixtures; known-good work must pass.

Its arguments; the check is `ci_evals.run.check_fixtures` (docs/grading.md):
first the fixtures against the phase contracts (`--contracts-only` stops there:
the `ci-evals-fixtures` pre-commit hook), then each fixture graded with its
stage's graders.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ci_evals.commands import output
from ci_evals.run import isolation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", type=Path, help="the suite file (default: ci-evals.yaml found upwards)"
    )
    parser.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="N|NAME",
        help="check only this stage's fixture (repeatable; default: every stage that has "
        "a fixture and graders)",
    )
    parser.add_argument(
        "--scenario",
        metavar="ID",
        help="the scenario whose inputs fill the reviewer prompt, and whose fixtures are "
        "checked if it has its own (default: the first)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME|stub:PATH|replay:RUN_DIR",
        help="the reviewers' model (stub:PATH: offline; replay:RUN_DIR: a run recorded "
        "with --record, served back, docs/replay.md)",
    )
    parser.add_argument(
        "--no-reviewer", action="store_true", help="checks and command graders only"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="report folder (default: .ci-evals/check-fixtures/<time>)",
    )
    parser.add_argument("--keep-workspace", action="store_true", help="keep the laid-down fixtures")
    parser.add_argument(
        "--contracts-only",
        action="store_true",
        help="only check the fixtures against the stages' produces/consumes contracts "
        "(no model, no graders; what the ci-evals-fixtures pre-commit hook runs)",
    )
    isolation.add_option(parser)
    output.add_verbosity(parser)


def run(args: argparse.Namespace) -> int:
    from ci_evals.run import check_fixtures  # noqa: PLC0415

    return check_fixtures.run(args, dict(os.environ))  # the environment, read once
