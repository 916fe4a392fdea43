"""`ci-evals grade RUN_DIR`: re-grade a saved run without running any agent stage.

Its arguments; the re-grade is `ci_evals.run.grade` (docs/grading.md), given
the report's consistency check (`ci_evals.report.verify`): a results file that
contradicts itself is refused, exit 2.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.commands import output
from ci_evals.run import isolation

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder")
    parser.add_argument(
        "--suite", type=Path, help="the suite file (default: the one the run recorded)"
    )
    parser.add_argument(
        "--reviewer",
        choices=("auto", "reuse", "rerun", "skip"),
        default="auto",
        help="re-use saved scorecards (auto: while the reviewer's agent file, prompt and "
        "rubrics are unchanged), run the reviewer again, or leave it out (default: auto)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME|stub:PATH|replay:RUN_DIR",
        help="the model for reviewers that run again and for the judges (llm, baseline) of "
        "a run of cases, which are always asked again (stub:PATH runs offline; "
        "replay:RUN_DIR serves a run recorded with --record back, docs/replay.md; default: "
        "the API through ci-evals' proxy, ANTHROPIC_API_KEY, the suite's budget_usd)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="the new results file (default: RUN_DIR/results.regraded-<time>.json)",
    )
    isolation.add_option(parser)
    output.add_json(parser, "grade", "the re-graded run's verdict, counts and cost")
    output.add_verbosity(parser)


def run(args: argparse.Namespace) -> int:
    from ci_evals.report.verify import problems  # noqa: PLC0415 - pydantic, the scoring rules
    from ci_evals.results.outcome import run_document  # noqa: PLC0415
    from ci_evals.run import grade  # noqa: PLC0415

    environ = dict(os.environ)  # read once, here; run/ reads os.environ no more
    emit: output.Emit | None = args.emit
    if emit is None:
        return grade.run(args, environ, inconsistencies=problems)

    def on_result(result: RunResult, run_dir: Path, results: Path, code: int) -> None:
        document = run_document(result, run_dir, results)
        emit(code, {"verdict": document["verdict"], "run": document})

    return grade.run(args, environ, inconsistencies=problems, on_result=on_result)
