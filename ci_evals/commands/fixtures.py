"""`ci-evals fixtures update --from RUN_DIR --stage K`: a good run's stage becomes fixture K.

A fixture is what later stages are graded on top of, so a promotion must never
outrun the verdict: only a run of this suite and plugin (`--force` overrides
that alone), whose `results.json` agrees with itself (`report.verify`), whose
stage K `passed`, whose saved state still meets stage K's contract and holds
exactly the files recorded, deleting none and adding no `.git`. A link the stage
made comes back as a link only when it stays inside the workspace; the new
fixture is written files first, by descriptor, links last (`fs.links`).

Fixture K becomes exactly the files stage K added or changed, built beside the
old folder and swapped in; a promotion that breaks a later stage's `consumes` is
rolled back. Every rule: docs/contracts.md (*Refreshing fixtures from a good run*).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ci_evals.errors import EXIT_FAIL, EXIT_OK, UserError
from ci_evals.fs.digest import file_sha256, tree_sha256
from ci_evals.fs.links import lay, outside, through_link
from ci_evals.fs.state import AFTER_DIR, links_file, state_links, view_state
from ci_evals.fs.walk import walk

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult, ScenarioResult, StageResult
    from ci_evals.suite.load import Scenario, Stage, Suite


class _Link(NamedTuple):
    """A link the stage made, as its saved state recorded it: made again, never read."""

    target: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    update = actions.add_parser(
        "update", help="promote a passing run's saved stage state to the stage's fixture"
    )
    update.add_argument("--from", dest="run_dir", type=Path, required=True, metavar="RUN_DIR")
    update.add_argument("--stage", required=True, metavar="K|NAME", help="the stage to promote")
    update.add_argument(
        "--scenario", metavar="ID", help="whose run (required when the run has several)"
    )
    update.add_argument(
        "--repeat", type=int, metavar="I", help="which repeat, 1-based (required with several)"
    )
    update.add_argument(
        "--suite", type=Path, help="the suite file (default: the one the run recorded)"
    )
    update.add_argument(
        "--force",
        action="store_true",
        help="promote a run of another suite or plugin revision",
    )
    update.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")


def run(args: argparse.Namespace) -> int:
    from ci_evals.results.model import (  # noqa: PLC0415
        read_results,
        require_own_run,
        require_path_names,
    )
    from ci_evals.suite.load import load_suite  # noqa: PLC0415

    run_dir = args.run_dir.resolve()
    result = read_results(run_dir / "results.json")
    require_own_run(result, run_dir / "results.json", "promote a fixture from")
    require_path_names(result, run_dir / "results.json")  # its ids find the saved state
    suite_path = args.suite or Path(result.suite_file)
    suite = load_suite(suite_path)
    _same_revision(result, suite, force=args.force)
    _consistent(result, run_dir / "results.json")
    stage = suite.stage(args.stage)
    ran = _scenario_result(result, args.scenario, args.repeat)
    scenario = suite.scenario(ran.id)
    stage_result = _passed_stage(ran, stage)
    folder = result.folder_of(ran)
    state = run_dir / folder / f"{stage.number}-{stage.name}" / AFTER_DIR
    if not state.is_dir():
        raise UserError(f"no saved state for stage {stage.number} ({stage.name}): {state}")
    # What it produced first: a record that leads out is named as such, not as a
    # link the contract's view of the state could not make.
    files = _produced_files(stage_result, state, suite, stage, scenario)
    _contract_holds(suite, stage, state)

    target = suite.fixture_dir(stage, scenario)
    added, changed, removed = _diff(files, target)
    shown = os.path.relpath(target)
    print(f"fixture {shown} from {args.run_dir}: scenario {ran.id}, stage {stage.number}")
    for label, paths in (("added", added), ("changed", changed), ("removed", removed)):
        for path in paths:
            print(f"  {label:8} {path}")
    print(f"{len(added)} added, {len(changed)} changed, {len(removed)} removed")
    if args.dry_run:
        print("dry run: nothing written")
        return EXIT_OK
    if not (added or changed or removed):
        print("the fixture already holds exactly this")
        return EXIT_OK
    old = _swap_in(files, target)
    try:
        problems = _later_contracts(suite, scenario)
    except BaseException:  # the check refused to lay the fixtures, or Ctrl-C: put it back
        _roll_back(target, old)
        raise
    if problems:
        _roll_back(target, old)
        for line in problems:
            print(line)
        print(f"not promoted: {len(problems)} contract problem(s) with the new fixture")
        return EXIT_FAIL
    if old is not None:
        shutil.rmtree(old)
    print(f"updated {shown}; the fixtures hold every contract")
    return EXIT_OK


def _same_revision(result: RunResult, suite: Suite, *, force: bool) -> None:
    if Path(result.suite_file).resolve() != suite.file.resolve():
        other = f"the run is of another suite: {result.suite_file}"
    elif result.suite_sha256 != file_sha256(suite.file):
        other = f"{suite.display} changed since the run"
    elif result.plugin_sha256 != tree_sha256(suite.plugin.path, suite.plugin.files):
        other = f"the plugin {suite.plugin.path} changed since the run"
    else:
        return
    if result.suite_sha256 is None or result.plugin_sha256 is None:
        other = "the run did not record its suite and plugin revision"
    if force:
        print(f"warning: {other} (--force)")
        return
    raise UserError(
        other,
        field="--from",
        hint="a fixture must be what this suite and plugin produce: run again, "
        "or pass --force to promote it anyway",
    )


def _consistent(result: RunResult, file: Path) -> None:
    """The check `report` runs (`report.verify`): a file that contradicts itself — a
    status edited to `passed` over a failed verdict — vouches for no stage of it."""
    from ci_evals.report.verify import problems  # noqa: PLC0415 - the scoring rules

    found = problems(result)
    if found:
        raise UserError(
            f"the results file is inconsistent ({len(found)} problem(s)), so no stage of it "
            f"can be promoted: {found[0]}",
            file=file,
            hint="it was changed after the run; `ci-evals report` lists every problem",
        )


def _scenario_result(result: RunResult, wanted: str | None, repeat: int | None) -> ScenarioResult:
    ids = list(dict.fromkeys(s.id for s in result.scenarios))
    if wanted is None:
        if len(ids) != 1:
            raise UserError(
                f"the run has {len(ids)} scenarios",
                field="--scenario",
                hint=f"one of: {', '.join(ids)}",
            )
        wanted = ids[0]
    runs = [s for s in result.scenarios if s.id == wanted]
    if not runs:
        raise UserError(
            f"the run has no scenario {wanted!r}",
            field="--scenario",
            hint=f"one of: {', '.join(ids)}",
        )
    if repeat is None:
        if len(runs) > 1:
            raise UserError(
                f"scenario {wanted!r} ran {len(runs)} times",
                field="--repeat",
                hint=f"1..{len(runs)}",
            )
        return runs[0]
    chosen = [s for s in runs if s.repeat == repeat - 1]
    if not chosen:
        raise UserError(
            f"no repeat {repeat} of {wanted!r}", field="--repeat", hint=f"1..{len(runs)}"
        )
    return chosen[0]


def _passed_stage(ran: ScenarioResult, stage: Stage) -> StageResult:
    found = next((s for s in ran.stages if s.number == stage.number), None)
    if found is None:
        raise UserError(
            f"stage {stage.number} ({stage.name}) did not run in this run", field="--stage"
        )
    if found.status != "passed":
        why = f": {found.error}" if found.error else ""
        raise UserError(
            f"stage {stage.number} ({stage.name}) of scenario {ran.id!r} ended {found.status}{why}",
            field="--stage",
            hint="only a stage whose graders passed becomes a fixture",
        )
    return found


def _contract_holds(suite: Suite, stage: Stage, state: Path) -> None:
    from ci_evals.grading.kinds.checks.run import run_checks  # noqa: PLC0415

    if stage.contract is None:
        return
    grader = stage.contract.grader()
    if grader is None:
        return
    with tempfile.TemporaryDirectory(prefix="ci-evals-contract-") as work:
        # The checks see the stage's links, made again from the record (`view_state`).
        view = view_state(state, Path(work) / "state") if state_links(state) else state
        failed = [c for c in run_checks(grader.checks, view).criteria if not c.passed]
    if failed:
        first = failed[0]
        raise UserError(
            f"the saved state breaks stage {stage.number}'s contract: "
            f"{first.id.removeprefix('contract:')}: {first.detail}",
            file=suite.display,
            hint="the contract changed since the run, or the stage did not meet it",
        )


def _produced_files(
    stage_result: StageResult, state: Path, suite: Suite, stage: Stage, scenario: Scenario
) -> dict[str, Path | _Link]:
    """The files stage K added or changed, from its saved state (checked against the record)."""
    from ci_evals.suite.contracts import seed_folder  # noqa: PLC0415 - not at start-up

    if stage_result.produced_omitted:
        raise UserError(
            f"stage {stage.number} ({stage.name}) changed {stage_result.produced_omitted} "
            "more file(s) than results.json lists (its listing's byte budget): a fixture "
            "needs every one",
            field="--stage",
            hint="make the stage write fewer files, or shorter paths",
        )
    links = state_links(state)
    files: dict[str, Path | _Link] = {}
    for change in stage_result.produced:
        if change.change == "deleted":
            seed = seed_folder(suite.fixtures_for(scenario))
            laid = [
                *([seed] if seed else []),
                *(suite.fixture_dir(s, scenario) for s in suite.stages[: stage.number - 1]),
            ]
            earlier = [folder for folder in laid if (folder / change.path).exists()]
            if earlier:
                raise UserError(
                    f"stage {stage.number} deleted {change.path}, a file of "
                    f"{os.path.relpath(earlier[-1])}: a fixture cannot delete it",
                    field="--stage",
                )
            continue
        _no_repository(change.path)
        _not_through_a_link(links, change.path, state)
        path = _inside(state, change.path)
        if change.kind == "file":
            if not path.is_file() or path.is_symlink() or file_sha256(path) != change.sha256:
                raise UserError(
                    f"{path} is not what the run recorded (SHA-256 differs or missing)",
                    field="--from",
                    hint="the run folder was changed after the run",
                )
            files[change.path] = path
        elif links.get(change.path) != change.target or change.target is None:
            raise UserError(
                f"{change.path} is not the link the run recorded",
                file=links_file(state),
                field="--from",
                hint="the run folder was changed after the run",
            )
        else:
            _link_stays_inside(links, change.path, change.target)
            files[change.path] = _Link(change.target)
    if not files:
        raise UserError(f"stage {stage.number} ({stage.name}) produced no file", field="--stage")
    return files


def _no_repository(recorded: str) -> None:
    """A `.git` the agent wrote (any case: `.GIT` is `.git` on macOS) must not become
    part of the user's repository: `git add -A` there would stage a repository of the
    agent's (its files never committed), whose `core.fsmonitor` every later `git status`
    of the user's repository then runs."""
    if ".git" in (part.lower() for part in recorded.split("/")):
        raise UserError(
            f"{recorded} is inside a .git folder (or is one): a fixture cannot hold a "
            "repository the agent wrote",
            field="--stage",
            hint="make the stage leave no .git in its output (`git: true` gives a scenario "
            "a repository workspace whose .git is never recorded)",
        )


def _inside(state: Path, recorded: str) -> Path:
    """`recorded` (a path from results.json: data, not trusted) under `state`: relative,
    no `..`, and through no linked folder — else it could read, and the fixture write,
    a file anywhere."""
    parts = recorded.split("/")
    if recorded.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise UserError(
            f"results.json records {recorded!r}: not a path inside the stage's saved state",
            field="--from",
            hint="the run folder was changed after the run",
        )
    path = state.joinpath(*parts)
    folder = os.path.realpath(path.parent)
    if os.path.commonpath([folder, os.path.realpath(state)]) != os.path.realpath(state):
        raise UserError(
            f"results.json records {recorded!r}: not a path inside the stage's saved state "
            "(a folder on the way is a link)",
            field="--from",
        )
    return path


def _not_through_a_link(links: dict[str, str], recorded: str, state: Path) -> None:
    """A path the record says runs through a link (`a -> ../..`, then `a/x`) would be
    written wherever that link points, not in the fixture."""
    through = through_link(links, recorded)
    if through is not None:
        raise UserError(
            f"results.json records {recorded!r}, inside {through!r}, which the run recorded "
            "as a link: a fixture is not written through a link",
            file=links_file(state),
            field="--from",
            hint="the run folder was changed after the run",
        )


def _link_stays_inside(links: dict[str, str], recorded: str, target: str) -> None:
    """A fixture is copied into every later workspace: a link in it may point only at
    another file of that workspace, as the system resolves it: through the other
    links the stage left (`d -> .`, then `e -> d/..` is the workspace's parent)."""
    problem = outside(links, recorded, target)
    if problem is not None:
        raise UserError(
            f"{recorded} is a link to {target!r}, which {problem}: a fixture cannot hold it "
            "(it points outside the workspace)",
            field="--stage",
            hint="make the stage write a file there (or a link inside the workspace)",
        )


def _diff(files: dict[str, Path | _Link], target: Path) -> tuple[list[str], list[str], list[str]]:
    old: dict[str, str] = {}
    if target.is_dir():
        old = {rel: e.path for rel, kind, e in walk(target) if kind != "dir"}
    added = sorted(p for p in files if p not in old)
    removed = sorted(p for p in old if p not in files)
    changed = sorted(p for p in files if p in old and not _same(files[p], Path(old[p])))
    return added, changed, removed


def _same(new: Path | _Link, old: Path) -> bool:
    if isinstance(new, _Link) or old.is_symlink():
        return isinstance(new, _Link) and old.is_symlink() and new.target == os.readlink(old)
    return filecmp.cmp(new, old, shallow=False)


def _swap_in(files: dict[str, Path | _Link], target: Path) -> Path | None:
    """Write the new fixture beside `target` and swap it in; the old one's new place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    old = None
    try:
        # Files first, each folder walked by descriptor, links last: nothing is written
        # through a link, whatever the record holds (`fs.links`).
        plain = {rel: source for rel, source in files.items() if isinstance(source, Path)}
        links = {rel: link.target for rel, link in files.items() if isinstance(link, _Link)}
        lay(new, plain, links, create_folders=True)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rmdir(old)
            os.rename(target, old)
        os.rename(new, target)
    except BaseException:  # Ctrl-C included: the old fixture is put back
        shutil.rmtree(new, ignore_errors=True)
        if old is not None and not target.exists():
            os.rename(old, target)
        raise
    return old


def _roll_back(target: Path, old: Path | None) -> None:
    shutil.rmtree(target)
    if old is not None:
        os.rename(old, target)


def _later_contracts(suite: Suite, scenario: Scenario) -> list[str]:
    from ci_evals.workspace import fixture_contracts  # noqa: PLC0415

    chosen = scenario if scenario.fixtures is not None else None
    return list(fixture_contracts.check(suite, chosen).problems)
