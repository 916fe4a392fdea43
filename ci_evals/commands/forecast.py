"""`ci-evals forecast`: price a run before it starts, and gate the spend.

    ci-evals forecast --base origin/main --history .ci-evals/baseline [--history ...]

Selects what `run` would run with the same options (`--from-stage` or
`--base`, `--scenario`, `--units`, `--repeat`), prices it from the history —
the results of the base branch's last runs (`ci-evals baseline fetch`'s
folder, or any results file or run folder), most recent first — and prints
one line ("this run will run 3 of 10 stages x 2 scenarios: ~$2.10, ~6 min;
the base's last full run: $9.80"). In GitHub Actions it also writes the table
to the job summary, the step outputs `forecast_usd`, `unknown` and `gate`,
and with `--comment` the sticky PR comment (the report replaces it later).

The gate: `--max-usd` (default: the suite's `max_forecast_usd`). A forecast
above it, or with a part no history priced, is not started: exit 1, gate
`waiting`, and the comment says it waits for the label `--approve-label`
(default `ci-evals:approve-spend`) on the pull request, or a run by
`workflow_dispatch`; either opens it (gate `approved`, exit 0). Pricing is
`ci_evals.report.forecast`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.commands.report import add_comment_key
from ci_evals.commands.run import positive_int
from ci_evals.errors import EXIT_FAIL, EXIT_OK, UserError
from ci_evals.github import actions as gha

if TYPE_CHECKING:
    from ci_evals.report.forecast import Forecast, Planned
    from ci_evals.suite.load import Scenario, Suite

APPROVE_LABEL = "ci-evals:approve-spend"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", type=Path, help="the suite file (default: ci-evals.yaml found upwards)"
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-stage", metavar="N|NAME", help="first stage to run (default: 1)")
    start.add_argument(
        "--base", metavar="REV", help="from the lowest stage BASE...HEAD can affect (as run)"
    )
    parser.add_argument(
        "--scenario", action="append", default=[], metavar="ID", help="only this scenario"
    )
    parser.add_argument("--units", metavar="IDS", help="only these units (as run --units)")
    parser.add_argument("--repeat", type=positive_int, metavar="K", help="runs per scenario")
    parser.add_argument(
        "--jobs", type=positive_int, default=1, metavar="N", help="as run --jobs (for the time)"
    )
    parser.add_argument(
        "--shards", type=positive_int, default=1, metavar="K", help="runners (for the time)"
    )
    parser.add_argument(
        "--history",
        action="append",
        default=[],
        type=Path,
        metavar="RESULTS",
        help="a results file or run folder of the base's earlier runs, most recent first "
        "(repeatable; none: every price is unknown)",
    )
    parser.add_argument(
        "--max-usd",
        type=float,
        metavar="X",
        help="wait for approval above this (default: the suite's max_forecast_usd)",
    )
    parser.add_argument(
        "--approve-label",
        default=APPROVE_LABEL,
        metavar="NAME",
        help=f"the pull-request label that approves a run above the gate (default {APPROVE_LABEL})",
    )
    parser.add_argument(
        "--comment", action="store_true", help="in Actions on a pull request: the sticky comment"
    )
    add_comment_key(parser)


def run(args: argparse.Namespace) -> int:
    from ci_evals.commands.report import check_comment_key, post_comment  # noqa: PLC0415
    from ci_evals.report.forecast import forecast  # noqa: PLC0415 - pydantic
    from ci_evals.results.model import read_results  # noqa: PLC0415
    from ci_evals.run import run_command  # noqa: PLC0415
    from ci_evals.suite.load import find_suite, load_suite  # noqa: PLC0415

    if args.comment:
        check_comment_key(args.comment_key)
    if args.max_usd is not None and not args.max_usd > 0:
        raise UserError(f"--max-usd {args.max_usd}: must be above 0", field="--max-usd")
    suite = load_suite(args.suite or find_suite(Path.cwd()))
    history = [read_results(path) for path in args.history]  # each checked, one line if not
    start = run_command.from_stage_of(suite, args)
    scenarios = run_command.scenarios_for(suite, args, start) if start.stage is not None else ()
    env = gha.ActionsEnv.from_environ()
    if start.stage is None or not scenarios:
        print("ci-evals forecast: nothing to run: nothing to price")
        if env is not None:
            gha.write_outputs(env, {"forecast_usd": "0", "unknown": "0", "gate": "open"})
        return EXIT_OK
    planned = _planned(suite, start.stage.number, scenarios, args.repeat)
    priced = forecast(
        planned,
        history,
        stages_total=len(suite.stages),
        scenarios_total=len(suite.scenarios),
        jobs=args.jobs,
        shards=args.shards,
    )
    limit = args.max_usd if args.max_usd is not None else suite.max_forecast_usd
    gate, text = _gate(priced, limit, _approval(env, args.approve_label), args.approve_label)
    print(priced.headline())
    if text:
        print(text.replace("**", ""), file=sys.stderr if gate == "waiting" else sys.stdout)
    markdown = priced.markdown(text)
    if env is not None:
        gha.append_summary(env, markdown)
        gha.write_outputs(
            env,
            {
                "forecast_usd": f"{priced.cost:.4f}",
                "unknown": str(priced.unknown_runs),
                "gate": gate,
            },
        )
    if args.comment:
        post_comment(env, markdown, key=args.comment_key)
    return EXIT_FAIL if gate == "waiting" else EXIT_OK


def _planned(
    suite: Suite, first: int, scenarios: tuple[Scenario, ...], repeat: int | None
) -> list[Planned]:
    """What `run` would run: each scenario's stages from `first` on (a case its own
    one), each as many times as its repeats."""
    from ci_evals.report.forecast import Planned  # noqa: PLC0415

    planned = []
    for scenario in scenarios:
        runs = repeat or scenario.repeat or suite.grading.repeat
        stages = (scenario.stage,) if scenario.stage is not None else suite.stages[first - 1 :]
        planned += [Planned(scenario.id, stage.number, stage.name, runs) for stage in stages]
    return planned


def _gate(
    priced: Forecast, limit: float | None, approval: str | None, label: str
) -> tuple[str, str]:
    """(`open`, `approved` or `waiting`, what to say of it)."""
    if limit is None or not priced.over(limit):
        return "open", ""
    why = (
        f"part of it has no history ({priced.unknown_runs} stage run(s) unknown)"
        if priced.unknown_runs
        else f"the forecast ${priced.cost:,.2f} is above max_forecast_usd ${limit:,.2f}"
    )
    if approval is not None:
        return "approved", f"**Approved:** {why}, and the run goes on: {approval}."
    return "waiting", (
        f"**Waiting for approval:** {why}, so the run does not start. A maintainer adds "
        f"the label `{label}` to the pull request, or runs the workflow by "
        "`workflow_dispatch`, to start it."
    )


def _approval(env: gha.ActionsEnv | None, label: str) -> str | None:
    """Who approved a run above the gate: a `workflow_dispatch` (a person with write
    access started it), or the label on the pull request; None: no one."""
    if env is None or env.event_name is None:
        return None
    if env.event_name == "workflow_dispatch":
        return "started by workflow_dispatch"
    if env.event_path is None:
        return None
    from ci_evals.github.event import PULL_REQUEST_EVENTS, load_event  # noqa: PLC0415

    if env.event_name not in PULL_REQUEST_EVENTS:
        return None
    pull = load_event(env.event_path).get("pull_request")
    labels = pull.get("labels") if isinstance(pull, dict) else None
    names = (
        {x.get("name") for x in labels if isinstance(x, dict)}
        if isinstance(labels, list)
        else set()
    )
    return f"the pull request has the label {label!r}" if label in names else None
