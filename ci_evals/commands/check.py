"""`ci-evals check`: everything `run` validates before it starts, with nothing started.

The suite, its stage map, the slash commands and reviewer agents it names, the
rubric files, the scenarios, the fixtures a `--from-stage` needs, the stub
script of `--model stub:PATH` (or a key for the real API), the sandbox: the
very checks `run` makes (`run.run_command.prepare`), but every problem is listed
instead of stopping at the first. No stub server, agent or workspace is
started. It also asks Claude Code's own loader about the plugin, as `init`
does (`plugin list`, which starts nothing of the plugin): a plugin it refuses
is a problem, a part it drops a note. Exit 0 when a run could start, 2 with
one line per problem. A suite
git ignores (superpowers ignores `evals/`) runs, so it is a warning line, not
a problem: the pull request that should run it would never see it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ci_evals.agents import plugin_load
from ci_evals.commands import output
from ci_evals.commands.run import allow_tools_option, positive_int
from ci_evals.errors import EXIT_OK, EXIT_USAGE, Problems, UserError
from ci_evals.grading.kinds.checks.trajectory import TrajectoryUse
from ci_evals.run import isolation
from ci_evals.run.run_command import prepare
from ci_evals.suite import committed, references
from ci_evals.suite.load import Plugin, Stage
from ci_evals.suite.plugin_source import MANIFEST
from ci_evals.text import display_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", type=Path, help="the suite file (default: ci-evals.yaml found upwards)"
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-stage",
        metavar="N|NAME",
        help="check what a run from this stage needs: the fixtures of the stages before it",
    )
    start.add_argument(
        "--base", metavar="REV", help="the stage the change BASE...HEAD can affect (as run)"
    )
    parser.add_argument(
        "--scenario", action="append", default=[], metavar="ID", help="only this scenario"
    )
    parser.add_argument(
        "--model",
        metavar="NAME|stub:PATH|replay:RUN_DIR",
        help="the model the run will use; stub:PATH loads and checks that stub script, "
        "replay:RUN_DIR that recording (docs/replay.md)",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        metavar="K",
        help="the run's --repeat (checked with pass_at_least)",
    )
    allow_tools_option(parser)
    isolation.add_option(parser)
    output.add_json(parser, "check", "every problem with its file, line, column and field")


def _by_place(found: list[UserError]) -> list[UserError]:
    """File by file, in line order (stable: same-line problems keep their order)."""
    return sorted(found, key=lambda p: (p.file or "", p.line or 0))


def run(args: argparse.Namespace) -> int:
    emit: output.Emit | None = args.emit
    problems = Problems(collect=True)
    ready = prepare(args, dict(os.environ), problems)
    if ready is not None:
        for line in _load_check(ready.suite.plugin, problems):
            print(f"ci-evals check: {line}", file=sys.stderr)
    if problems.found:
        # Two scenarios sharing the suite's fixtures find the same missing folder.
        unique = {str(problem): problem for problem in _by_place(problems.found)}
        return _refused(list(unique.values()), emit)
    assert ready is not None
    suite = ready.suite
    unserved = getattr(ready.endpoint, "unserved", None)  # a stub script: its rules
    if callable(unserved):
        lines = unserved([_needs(stage) for stage in suite.stages])
        if lines:  # the stub script's: no place in a file but the script's
            return _refused([UserError(line) for line in lines], emit)
    parts = [
        f"{os.path.relpath(suite.file)}: {_count(len(suite.stages), 'stage')}",
        _count(len(ready.scenarios), "scenario"),
    ]
    if suite.stage_map is not None:
        parts.append(f"stage map {os.path.relpath(suite.stage_map)}")
    if ready.endpoint is not None:
        parts.append(f"model {ready.endpoint.name}")
    if ready.from_stage is not None:
        parts.append(f"from stage {ready.from_stage.number} ({ready.from_stage.name})")
    print("ci-evals check: OK: " + ", ".join(parts))
    files = [suite.file] + ([suite.stage_map] if suite.stage_map is not None else [])
    hidden = committed.hidden_line(files)
    if hidden is not None:  # it runs here, but a pull request would never run it
        print(f"ci-evals check: warning: {hidden}", file=sys.stderr)
    if emit is not None:
        checked = {
            "file": os.path.relpath(suite.file),
            "stages": len(suite.stages),
            "scenarios": len(ready.scenarios),
            "stage_map": None if suite.stage_map is None else os.path.relpath(suite.stage_map),
            "model_endpoint": None if ready.endpoint is None else ready.endpoint.name,
            "from_stage": None if ready.from_stage is None else ready.from_stage.number,
        }
        warnings = [] if hidden is None else [hidden]
        emit(EXIT_OK, {"ok": True, "problems": [], "warnings": warnings, "suite": checked})
    return EXIT_OK


def _refused(found: list[UserError], emit: output.Emit | None) -> int:
    """Print each problem and the count (and the JSON document under `--json`): exit 2."""
    for problem in found:
        print(f"ci-evals check: {problem}", file=sys.stderr)
    print(f"ci-evals check: {_count(len(found), 'problem')}; nothing was started", file=sys.stderr)
    if emit is not None:
        problems = [output.problem(problem) for problem in found]
        emit(EXIT_USAGE, {"ok": False, "problems": problems, "warnings": [], "suite": None})
    return EXIT_USAGE


def _load_check(plugin: Plugin, problems: Problems) -> list[str]:
    """Claude Code's own loader on the plugin (`agents.plugin_load`, ~0.4 s), as
    `init` asks it: a plugin it refuses is a problem quoting its reason (every
    stage would fail with it); the parts it drops, or that it could not be asked
    (no CLI installed), are notes. A plugin without a manifest of its own or a
    marketplace entry is named after its folder: nothing there can be refused."""
    manifest = plugin.path / MANIFEST
    if plugin.files is None or (plugin.marketplace is None and not manifest.is_file()):
        return []  # the built-in empty plugin, or no manifest to refuse
    verdict = plugin_load.ask(plugin.path, plugin.manifest_to_write)
    refused = plugin_load.refusal(verdict)
    if refused is not None:
        where = plugin.marketplace or manifest
        problems.report(UserError(refused, file=display_path(where), hint=plugin_load.FIX_HINT))
    return plugin_load.notes(verdict)


def _needs(stage: Stage) -> tuple[str, str | None, tuple[str, ...]]:
    """What a stub script must answer for `stage`: the slash command its prompt
    starts with (None: a plain prompt, or a command named by a placeholder) and the
    subagents its trajectory checks want."""
    pieces = stage.prompt.pieces
    first = pieces[0][1] if pieces and not pieces[0][0] else ""
    found = references.slash_commands(stage.prompt)
    command = None
    if found and first.lstrip().startswith(f"/{found[0][0]}:{found[0][1]}"):
        command = f"{found[0][0]}:{found[0][1]}"
    agents = tuple(
        check.name
        for grader in stage.grading.graders
        for check in getattr(grader, "checks", ())
        if isinstance(check, TrajectoryUse) and check.what == "subagent" and check.used
    )
    return stage.name, command, agents


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
