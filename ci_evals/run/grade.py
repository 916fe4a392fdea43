"""`ci-evals grade RUN_DIR` (its arguments: `ci_evals.commands.grade`): re-grade
a saved run without running any agent stage.

Reads `RUN_DIR/results.json` and each graded stage's saved workspace state
(`<stage folder>/after/`), runs the suite's *current* checks, command graders
and scoring policy on it, and writes a new results file next to the old one
(`results.regraded-<time>.json`, or `--output`); the run's own `results.json`
is never changed. Reviewer scorecards are re-used when the reviewer's agent
file, prompt and rubrics are unchanged, else the reviewer runs again
(`--reviewer`, see `ci_evals.grade_state.regrade`). Exit 0 when every stage
passed (or completed), 1 otherwise; 2 (nothing written) when the saved
results file is inconsistent (`inconsistencies`: the command passes
`ci_evals.report.verify.problems`, a layer above this one).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.fs import upload
from ci_evals.run import isolation
from ci_evals.text import inert

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ci_evals.endpoints.base import Endpoint
    from ci_evals.grade_state.regrade import Target
    from ci_evals.results.model import RunResult

    # Every way a results file disagrees with itself, one line each.
    Inconsistencies = Callable[[RunResult], list[str]]

REGRADE_PREFIX = "regrade-"


def _check_consistent(saved: RunResult, run_dir: Path, inconsistencies: Inconsistencies) -> None:
    """Refuse to re-grade a results file that contradicts itself (exit 2, problems on stderr).

    Re-grading recomputes only the stages it can grade again; the rest would
    carry the file's claims into a new file that looks trustworthy. An imported
    run has no stage to grade again: refused too.
    """
    from ci_evals.results.model import require_own_run  # noqa: PLC0415 - pydantic

    require_own_run(saved, run_dir / "results.json", "re-grade")
    found = inconsistencies(saved)
    if not found:
        return
    for problem in found:
        print(f"ci-evals grade: {inert(problem)}", file=sys.stderr)
    raise UserError(
        f"the results file is inconsistent ({len(found)} problem(s), listed above)",
        file=run_dir / "results.json",
        hint="re-grade only a results file as the run wrote it",
    )


def _check_endpoint(
    endpoint: Endpoint, environ: Mapping[str, str], result: RunResult, targets: list[Target]
) -> bool:
    """Whether the re-grade asks a model (a reviewer runs again, a case's judges are
    asked again); then the endpoint must answer (one line naming `--model` if not:
    fail closed, a judge never asked is no verdict)."""
    from ci_evals.grade_state import regrade  # noqa: PLC0415

    reruns = list(regrade.reruns(targets))
    judged = list(regrade.judged(targets))
    if reruns:
        first = reruns[0]
        endpoint.check(
            environ,
            f"the reviewer of {first.scenario.id} stage {first.result.number} "
            f"({first.result.name}) has to run again ({first.why}): it",
            hint="--reviewer skip leaves the reviewers out",
        )
    elif judged:
        first = judged[0]
        endpoint.check(
            environ,
            f"the llm/baseline judges of {regrade.label(result, first.scenario)} stage "
            f"{first.result.number} ({first.result.name}) are asked again: the re-grade",
        )
    return bool(reruns or judged)


def run(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    inconsistencies: Inconsistencies,
    on_result: Callable[[RunResult, Path, Path, int], None] | None = None,
) -> int:
    """The re-grade `args` ask for (see the module doc), with the environment the
    command read (`environ`); exit 0, 1 or 2. `on_result` is told the re-graded run,
    its folder, the new results file and the exit code."""
    from ci_evals.agents.environment import (  # noqa: PLC0415 - heavy imports below
        environment_for,
    )
    from ci_evals.agents.registry import build_agent  # noqa: PLC0415
    from ci_evals.endpoints.base import EndpointOptions  # noqa: PLC0415
    from ci_evals.endpoints.registry import endpoint_for, no_endpoint  # noqa: PLC0415
    from ci_evals.grade_state import regrade  # noqa: PLC0415
    from ci_evals.results.model import read_results, require_path_names  # noqa: PLC0415
    from ci_evals.run.runner import forwarded  # noqa: PLC0415
    from ci_evals.suite.load import load_suite  # noqa: PLC0415

    run_dir = args.run_dir.resolve()
    saved = read_results(run_dir)
    require_path_names(saved, run_dir / "results.json")  # its ids find the saved states
    _check_consistent(saved, run_dir, inconsistencies)
    suite_file = args.suite or Path(saved.suite_file)
    if not suite_file.is_file():
        raise UserError(
            f"the run's suite file is gone: {suite_file}", field="--suite", hint="pass --suite"
        )
    suite = load_suite(suite_file)
    result = saved.model_copy(deep=True)
    targets, notes = regrade.plan(result, suite, run_dir, args.reviewer)
    reruns = list(regrade.reruns(targets))
    endpoint = endpoint_for(args.model)
    asks = _check_endpoint(endpoint, environ, result, targets)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    out_dir = run_dir / f"{REGRADE_PREFIX}{stamp}"
    output = (args.output or run_dir / f"results.regraded-{stamp}.json").resolve()
    if output == (run_dir / "results.json").resolve():
        raise UserError("will not overwrite the run's own results.json", field="--output")

    runs_programs = bool(reruns) or any(
        g.sandboxed for t in targets for g in t.stage.grading.graders
    )
    sandbox = isolation.choose(args, suite, environ, needed=runs_programs)
    sandbox = isolation.prepare(sandbox, environ)
    # The suite's budget, for what the re-grade asks a model (a fresh one: the run's was
    # the run's), through the proxy as in `run`.
    options = EndpointOptions(default_model=saved.model or suite.model, budget_usd=suite.budget_usd)
    with (
        upload.sealed(out_dir, "the re-graded folder"),  # the graders' outputs; CI uploads it
        endpoint.open(environ, options) if asks else no_endpoint(options) as opened,
    ):
        env_for = environment_for(environ, opened.env, sandbox)
        agent = build_agent(suite.agent) if reruns else None
        asyncio.run(
            regrade.regrade(
                targets,
                suite=suite,
                run_dir=run_dir,
                out_dir=out_dir,
                agent=agent,
                env_for=env_for,
                model=opened.model,
                sandbox=sandbox,
                new_caller=opened.new_caller,
                endpoint=opened.env if asks else None,
            )
        )
    metered = opened.meter() if opened.meter is not None else None
    regrade.finish(result, suite, forwarded(metered) if metered is not None else None)
    regrade.write(output, result)
    _say(result, targets, notes, quiet=getattr(args, "verbosity", 0) < 0)
    print(f"results: {output}")
    from ci_evals.results.summary import exit_code  # noqa: PLC0415

    code = exit_code(result)
    if on_result is not None:
        on_result(result, run_dir, output, code)
    return code


def _say(result: RunResult, targets: list[Target], notes: list[str], *, quiet: bool) -> None:
    """Each re-graded stage's verdict before and after, the notes, the repeats table
    (nothing when quiet: the results line and the exit code say the verdict)."""
    from ci_evals.grade_state import regrade  # noqa: PLC0415
    from ci_evals.results.summary import repeat_table  # noqa: PLC0415

    if quiet:
        return
    for target in targets:
        line = (
            f"{regrade.label(result, target.scenario)} stage {target.result.number} "
            f"{target.result.name}: "
            f"{target.before} -> {target.result.status} (reviewer: {target.reviewer})"
        )
        if target.result.error:
            line += f" - {target.result.error}"
        print(inert(line))  # ids from the results file, the reviewer's error
    for note in notes:
        print(note)
    if result.repeated:
        print(repeat_table(result.summaries))
