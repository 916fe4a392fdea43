"""`ci-evals check-fixtures` (its arguments: `ci_evals.commands.check_fixtures`):
grade the curated fixtures; known-good work must pass.

A fixture `fixtures/<k>-<name>-output/` is stage k's curated output. Laid down as
the workspace after stage k would be, it is graded with stage k's reviewer,
checks and command graders — exactly as a run grades the stage (trajectory
checks left out: a fixture has no trajectory). A fixture that does not pass
means the rubric, the reviewer, a check or a threshold changed so that it would
fail good work (or the fixture went stale).

First, before any model is called, every fixture set is checked against the
phase contracts (`workspace.fixture_contracts`); a stale fixture is one line
naming the fixture file, the contract field and its line, and stops the command
(exit 1). `--contracts-only` does only that, fast enough for the pre-commit hook.
Exit 0 when every checked fixture passed, 1 listing those that did not.
docs/grading.md (*Checking the fixtures*).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import EXIT_FAIL, EXIT_OK, UserError
from ci_evals.fs import upload
from ci_evals.fs.walk import walk
from ci_evals.run import isolation
from ci_evals.text import display_path, inert

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ci_evals.endpoints.base import Endpoint
    from ci_evals.results.criteria import StageVerdict
    from ci_evals.suite.load import Scenario, Stage, Suite

OUT_DIR = Path(".ci-evals") / "check-fixtures"
REPORT_FILE = "check-fixtures.json"


def _contracts(suite: Suite, scenario: Scenario | None) -> int:
    """The fixtures against the contracts; prints every problem. Exit code."""
    from ci_evals.workspace import fixture_contracts  # noqa: PLC0415

    report = fixture_contracts.check(suite, scenario)
    for note in report.notes:
        print(f"note: {note}")
    for line in report.problems:
        print(inert(line))  # quotes the fixtures: a pull request's files
    if report.problems:
        print(
            f"{len(report.problems)} contract problem(s) in the fixtures: update the fixtures "
            "(ci-evals fixtures update --from RUN_DIR --stage K) or the contract"
        )
        return EXIT_FAIL
    if report.checked:
        print(f"contracts: {report.checked} item(s) hold on the fixtures")
    else:
        print("contracts: none declared (produces/consumes, docs/contracts.md)")
    return EXIT_OK


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """The contracts, then (unless `--contracts-only`) the fixtures graded, with the
    environment the command read (`environ`); exit 0 or 1. Imports only what the
    contracts need before `--contracts-only` returns (the hook)."""
    from ci_evals.suite.load import find_suite, load_suite  # noqa: PLC0415

    if args.suite:
        suite = load_suite(args.suite)
    else:
        found = find_suite(Path.cwd())
        suite = load_suite(found, os.path.relpath(found))  # messages name it as you would
    if suite.plugin_evals is not None:
        return _cases(suite, contracts_only=args.contracts_only)
    chosen = suite.scenario(args.scenario) if args.scenario else None
    # Stale fixtures are found before any model is called.
    code = _contracts(suite, chosen)
    if code != EXIT_OK or args.contracts_only:
        return code
    return _grade(args, suite, chosen or suite.scenarios[0], environ)


def _cases(suite: Suite, *, contracts_only: bool) -> int:
    """A suite of cases has no fixtures: each case starts from an empty workspace and
    its graders grade its own run. The hook (`--contracts-only`) has nothing to check
    and says so; a check of the fixtures is refused, never passed on nothing."""
    if contracts_only:
        print("contracts: none (a suite of cases, plugin_evals:, has no fixtures)")
        return EXIT_OK
    raise UserError(
        "check-fixtures: a suite of cases (plugin_evals:) has no fixtures to grade: each "
        "case starts from an empty workspace and is graded on its own run",
        file=suite.display,
        hint="check the cases with `ci-evals check`, and their graders on the stub "
        "with `ci-evals run --model stub:FILE`",
    )


def _grade(
    args: argparse.Namespace, suite: Suite, scenario: Scenario, environ: Mapping[str, str]
) -> int:
    """Each chosen fixture graded with its stage's graders, as a run grades the stage
    (`-q`: only the fixtures that fail are said; `-v`: every criterion too)."""
    import asyncio  # noqa: PLC0415 - ~30 ms the --contracts-only hook never needs

    from ci_evals.agents import Abort  # noqa: PLC0415
    from ci_evals.agents.environment import (  # noqa: PLC0415 - heavy imports below
        environment_for,
    )
    from ci_evals.agents.registry import build_agent  # noqa: PLC0415
    from ci_evals.endpoints.base import EndpointOptions  # noqa: PLC0415
    from ci_evals.endpoints.registry import no_endpoint  # noqa: PLC0415
    from ci_evals.grade_state.pipeline import GradeJob, grade_state  # noqa: PLC0415

    seed = _check_seed(suite, scenario)
    stages, notes = _chosen(suite, args.stage, scenario)
    if not stages:
        for note in notes:
            print(note)
        print("no fixture to check" if seed is None else "no other fixture to check")
        return EXIT_OK
    reviewing = not args.no_reviewer and any(s.grading.reviewer for s in stages)
    endpoint = _endpoint(args.model, environ, reviewing)
    # Where it runs is settled (or refused) before anything is written.
    runs_programs = reviewing or any(g.sandboxed for s in stages for g in s.grading.graders)
    sandbox = isolation.choose(args, suite, environ, needed=runs_programs)
    sandbox = isolation.prepare(sandbox, environ)
    out, work = _folders(args.out)
    with upload.sealed(out, "the check-fixtures folder"):  # CI uploads it
        report: list[dict[str, object]] = []
        failing: list[str] = []
        options = EndpointOptions(default_model=suite.model)
        with endpoint.open(environ, options) if reviewing else no_endpoint(options) as opened:
            env_for = environment_for(environ, opened.env, sandbox)
            agent = build_agent(suite.agent) if reviewing else None
            try:
                for stage in stages:
                    state = _lay_down(suite, stage, scenario, work / stage.fixture_dirname)
                    graded = replace(stage, grading=stage.grading.files_only())
                    job = GradeJob(
                        suite=suite,
                        stage=graded,
                        scenario=scenario,
                        state=state,
                        trajectory=None,
                        out_dir=out / stage.fixture_dirname,
                        work_dir=work / stage.fixture_dirname / "grading",
                        run_dir=out,
                        env_for=env_for,
                        model=opened.model,
                        keep=args.keep_workspace,
                        sandbox=sandbox,
                    )
                    job.out_dir.mkdir(parents=True, exist_ok=True)
                    verdict = asyncio.run(
                        grade_state(job, agent=agent, abort=Abort(), skip_reviewer=args.no_reviewer)
                    )
                    name = _name(suite, suite.fixture_dir(stage, scenario))
                    _say(f"{name} (stage {stage.number} {stage.name})", verdict, args.verbosity)
                    report.append(
                        {"stage": stage.number, "fixture": name, **verdict.model_dump(mode="json")}
                    )
                    if verdict.verdict != "passed":
                        failing.append(name)
            finally:
                _done_with(work, keep=args.keep_workspace)
        (out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for note in notes if args.verbosity >= 0 else ():
        print(note)
    print(f"report: {out / REPORT_FILE}")
    if failing:
        print(f"{len(failing)} fixture(s) would fail: {', '.join(failing)}")
        return EXIT_FAIL
    return EXIT_OK


def _say(fixture: str, verdict: StageVerdict, verbosity: int) -> None:
    """A fixture's verdict (`-q`: only one that did not pass; `-v`: each criterion).
    Inert: it quotes the fixtures and the reviewer, a pull request's text."""
    if verbosity >= 0 or verdict.verdict != "passed":
        print(inert(f"{fixture}: {verdict.verdict} - {verdict.reason}"))
    for criterion in verdict.criteria if verbosity > 0 else ():
        mark = "pass" if criterion.passed else "FAIL"
        why = f": {criterion.rationale}" if criterion.rationale else ""
        print(inert(f"  {mark} {criterion.id}{why}")[:300])


def _folders(given: Path | None) -> tuple[Path, Path]:
    """The output folder (`--out`, made) and a fresh one for the laid-down fixtures:
    outside it, as `run`'s workspaces, since they hold links (the plugin's components,
    a fixture's own) and the output folder is what CI uploads."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = (given or OUT_DIR / stamp).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return out, Path(tempfile.mkdtemp(prefix="ci-evals-fixtures-"))


def _done_with(work: Path, *, keep: bool) -> None:
    if keep:
        print(f"laid-down fixtures kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def _check_seed(suite: Suite, scenario: Scenario) -> Path | None:
    """The stage-1 seed, laid down as a run lays it (a bad link or entry, or a
    second seed, is the usual one-line error); one line saying it was."""
    from ci_evals.workspace.create import check_fixtures  # noqa: PLC0415

    seed = suite.seed_dir(scenario)
    if seed is None:
        return None
    check_fixtures(suite, 1, scenario)
    files = sum(1 for _, kind, _ in walk(seed) if kind != "dir")
    print(f"{_name(suite, seed)} (seed of stage 1): lays down, {files} file(s) and link(s)")
    return seed


def _name(suite: Suite, fixture: Path) -> str:
    """`fixtures/3-plan-output`, `fixtures/globex/0-codebase`: as the suite names it."""
    return f"{suite.fixtures.name}/{fixture.relative_to(suite.fixtures).as_posix()}"


def _endpoint(model: str | None, environ: Mapping[str, str], reviewing: bool) -> Endpoint:
    from ci_evals.endpoints.registry import endpoint_for  # noqa: PLC0415

    endpoint = endpoint_for(model)
    if reviewing:
        endpoint.check(
            environ,
            "checking fixtures with their reviewers",
            hint="--no-reviewer leaves the reviewers out",
        )
    return endpoint


def _chosen(suite: Suite, keys: list[str], scenario: Scenario) -> tuple[list[Stage], list[str]]:
    """The stages whose fixture (`scenario`'s) to check, and notes on those left out."""
    if keys:
        stages = [suite.stage(key) for key in dict.fromkeys(keys)]
        for stage in stages:
            if not suite.fixture_dir(stage, scenario).is_dir():
                raise UserError(
                    f"stage {stage.number} ({stage.name}) has no fixture folder: "
                    f"{display_path(suite.fixture_dir(stage, scenario))}",
                    field="--stage",
                )
            if stage.grading.empty:
                raise UserError(
                    f"stage {stage.number} ({stage.name}) has no graders", field="--stage"
                )
        return stages, []
    stages, notes = [], []
    for stage in suite.stages:
        has_fixture = suite.fixture_dir(stage, scenario).is_dir()
        if has_fixture and not stage.grading.empty:
            stages.append(stage)
        elif not stage.grading.empty:
            notes.append(f"stage {stage.number} ({stage.name}): graders but no fixture")
    return stages, notes


def _lay_down(suite: Suite, stage: Stage, scenario: Scenario, parent: Path) -> Path:
    """The workspace as it would be after `stage`: fixtures 1..k, laid as a run
    lays them (the same checks: no .git, nothing ignored, no link out). Returns its root."""
    from ci_evals.workspace.create import create_workspace  # noqa: PLC0415

    return create_workspace(suite, stage.number, parent, scenario, after=True).root
