"""`ci-evals run`: run stages N..last of a suite's scenarios through the real agent.

Everything is checked before anything starts (one line, exit 2): the suite,
the stage, the scenarios, the fixtures for the stages before N, the model
endpoint. Then the run folder is made, the stub model started if asked for,
and the `Runner` takes over, grading every stage that completes
(`ci_evals.run.grading_hook`). Exit 0 when every stage passed (or completed,
without graders) — over `--repeat` runs, under the k-of-n rule — 1 when any
did not, 130 when interrupted (Ctrl-C or SIGTERM; partial results are written).

This module is the arguments; the run is `ci_evals.run.run_command` (one suite) and
`ci_evals.run.tasks` (`--tasks`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals.commands import output
from ci_evals.errors import EXIT_OK, UserError
from ci_evals.run import isolation

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--suite", type=Path, help="the suite file (default: ci-evals.yaml found upwards)"
    )
    what.add_argument(
        "--tasks",
        type=Path,
        metavar="DIR",
        help="run every task DIR/*/ci-evals.yaml, once per agent configuration, and "
        "print a table per configuration (docs/loop-agent.md)",
    )
    parser.add_argument(
        "--matrix",
        type=Path,
        metavar="FILE",
        help="with --tasks: the agent configurations to run (models x system prompts x "
        "tool sets; default: each task's own)",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-stage", metavar="N|NAME", help="first stage to run live (default: 1)"
    )
    start.add_argument(
        "--base",
        metavar="REV",
        help="run from the lowest stage the change BASE...HEAD can affect (as compute-stage)",
    )
    parser.add_argument(
        "--base-run",
        type=Path,
        metavar="DIR",
        help="with --base: the base branch's saved run (a run folder, or `baseline fetch "
        "--out DIR`); when the change touches only graders it is re-graded instead of "
        "running the agent (docs/run.md)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="ID",
        help="run only this scenario (repeatable)",
    )
    parser.add_argument(
        "--units",
        metavar="IDS",
        help="run only these units, space-separated, as compute-stage's `units` output "
        "names them (`all`: every one); one this suite does not run is left out, none "
        "left: nothing to run",
    )
    parser.add_argument(
        "--model",
        metavar="NAME|stub:PATH|replay:RUN_DIR",
        help="model name, or stub:PATH to run offline on the stub model serving that script, "
        "or replay:RUN_DIR to serve a run recorded with --record back (docs/replay.md)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="scenarios (and repeats) in parallel",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        metavar="K",
        help="run each scenario K times (default: the suite's `repeat:`, else 1)",
    )
    parser.add_argument(
        "--ablation",
        choices=("with-without", "none"),
        help="with-without: also run every unit without the plugin and report the score "
        "with, without and the delta (default: the suite's `ablation:`, else none)",
    )
    parser.add_argument(
        "--out", type=Path, metavar="DIR", help="run folder (default: .ci-evals/runs/<run-id>)"
    )
    allow_tools_option(parser)
    add_shard_options(parser)
    isolation.add_option(parser)
    parser.add_argument(
        "--record",
        action="store_true",
        help="record every model request and response (key and token removed) in "
        "RUN_DIR/model-exchanges.jsonl (the real API or the stub; replay it with "
        "--model replay:RUN_DIR)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="finish the interrupted or partly errored run in RUN_DIR: the stages that "
        "passed are kept (verified), the rest run again (docs/run.md)",
    )
    parser.add_argument(
        "--keep-workspace",
        action="store_true",
        help="keep each scenario's workspace (under $TMPDIR; its path is printed) "
        "instead of removing it at the end",
    )
    output.add_json(parser, "run", "the verdict, counts, cost and run folder")
    output.add_verbosity(parser)


def allow_tools_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-tools",
        action="append",
        metavar="LIST",
        help="a suite of cases (plugin_evals:): the tools granted to every case, as "
        "claude plugin eval --allow-tools (Write, Edit, Bash, WebFetch, mcp__*, "
        "Tool(rule); commas or spaces between them; repeatable), instead of "
        "plugin_evals.allow_tools (docs/plugin-evals.md)",
    )


def add_shard_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard",
        metavar="I/K",
        help="run only shard I of K, as `ci-evals plan` split the run (docs/scale-out.md)",
    )
    durations_option(parser)


def durations_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--durations",
        type=Path,
        metavar="RESULTS",
        help="balance shards by the stage durations of this earlier results file or run "
        "folder (with --tasks: a benchmark folder); default: one per stage",
    )


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def run(args: argparse.Namespace) -> int:
    from ci_evals.run import process_environment  # noqa: PLC0415

    if args.tasks is not None and args.resume is not None:
        raise UserError("--resume finishes one suite's run", hint="leave --tasks out")
    if args.tasks is not None:  # many suites: the benchmark
        if args.emit is not None:
            raise UserError(
                "--json is one run's document; --tasks writes its benchmark as JSON already",
                field="--json",
                hint="read DIR/benchmark.json in the --out folder",
            )
        from ci_evals.run import tasks  # noqa: PLC0415

        return tasks.run(args, process_environment.take(os.environ))
    if args.matrix is not None:
        raise UserError("--matrix varies the agent over many tasks", hint="add --tasks DIR")
    from ci_evals.report.verify import problems  # noqa: PLC0415 - a --base-run re-grade
    from ci_evals.run import run_command  # noqa: PLC0415

    # Read once, the shard key and the credentials out of the process's (and its /proc
    # entry's) before anything starts; run/ reads os.environ no more.
    started = process_environment.take(os.environ)
    emit: output.Emit | None = args.emit
    if emit is None:
        return run_command.run(
            args, started, problems=_saved_run_problems, inconsistencies=problems
        )
    documents: list[dict[str, Any]] = []

    def on_result(result: RunResult, run_dir: Path, code: int) -> None:
        from ci_evals.results.outcome import run_document  # noqa: PLC0415

        documents.append(run_document(result, run_dir))

    code = run_command.run(
        args, started, on_result, problems=_saved_run_problems, inconsistencies=problems
    )
    if documents:
        emit(code, {"verdict": documents[0]["verdict"], "run": documents[0]})
    else:  # the change (or --units) left nothing to run: no run folder
        assert code == EXIT_OK
        emit(code, {"verdict": "nothing-to-run", "run": None})
    return code


def _saved_run_problems(result: RunResult, folder: Path) -> list[str]:
    """What `report` checks of a run folder before it believes it: the file against
    itself and the scoring rules (`report.verify`), and against the graders' files
    beside it (`report.evidence`); `run --resume` keeps nothing of a run with any."""
    from ci_evals.report import evidence, verify  # noqa: PLC0415 - pydantic

    return [*verify.problems(result), *evidence.problems(result, folder)]
