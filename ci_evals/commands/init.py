"""`ci-evals init [PLUGIN_DIR] [--plugin NAME]`: draft a suite for a plugin, never
overwriting a file. PLUGIN_DIR is the plugin's folder (with or without a manifest,
as Claude Code loads it), or with `--plugin` a marketplace's folder.

It writes, in the current folder, a stage map (`suite.draft`), a suite (the stages
`--stages` names, else phases of commands that read each other's output, or one
stage with a scenario per independent command; the first line printed says which
and why), a placeholder fixture per stage, a stub script that writes what the
drafted checks look for, a `.pre-commit-config.yaml`, and — when no workflow runs
ci-evals yet — `.github/workflows/evals.yml` (`suite.draft_workflow`). A file that
exists is kept and said so. What it writes passes `check-coverage` and
`ci-evals check` as it is, and runs end to end on the stub model. A plugin with
`claude plugin eval` cases gets a suite running them; `--format cases` first
drafts such cases (`suite.draft_case_files`). The walk-through:
docs/onboarding.md (*Draft the suite: `ci-evals init`*).
"""

from __future__ import annotations

import argparse
import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from ci_evals import git
from ci_evals.agents import plugin_load
from ci_evals.errors import EXIT_OK, UserError
from ci_evals.fs.copyable import COPY_HINT, confinement, copy_problem
from ci_evals.fs.plugin_files import not_the_plugins, plugin_files
from ci_evals.suite import (
    command_shell,
    committed,
    draft_case_files,
    draft_case_map,
    draft_cases,
    draft_shapes,
    draft_workflow,
    precommit,
)
from ci_evals.suite import draft as drafting
from ci_evals.suite.draft_unread import unread_files
from ci_evals.suite.plugin_source import (
    MANIFEST,
    MARKETPLACE,
    PluginSource,
    is_marketplace,
    plugin_at,
    plugin_in_marketplace,
    read_marketplace,
)
from ci_evals.text import display_path

SUITE = "ci-evals.yaml"
STAGE_MAP = "stage_map.yaml"
PRECOMMIT = ".pre-commit-config.yaml"
RUNS = ".ci-evals"  # where `run` and `check-fixtures` write, below the current folder
GIT_DIR = ".git"
OURS = (SUITE, STAGE_MAP, "stub/", "fixtures/", PRECOMMIT)  # what init writes
FORMATS = ("stages", "cases")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "plugin",
        nargs="?",
        default=".",
        metavar="PLUGIN_DIR",
        help="the plugin's folder (its .claude-plugin/plugin.json is optional), or a "
        "marketplace's (holding .claude-plugin/marketplace.json) with --plugin (default: .)",
    )
    parser.add_argument(
        "--plugin",
        metavar="NAME",
        dest="plugin_name",
        help="the marketplace's plugin to draft a suite for (PLUGIN_DIR is the marketplace)",
    )
    parser.add_argument(
        "--into",
        metavar="DIR",
        help="the folder to draft the suite in (default: evals/NAME with --plugin, one "
        "folder per plugin of a marketplace; else the current folder)",
    )
    parser.add_argument(
        "--stages",
        metavar="A,B=CMD,...",
        help="the stages, in order, each running the command of its name, the plugin's "
        "only command, or CMD (default: phases when the commands read each other's "
        "output, else one stage with a scenario per command)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="stages",
        help="stages: ci-evals' own suite (stages, scenarios, fixtures; the default); "
        "cases: claude plugin eval cases in the plugin's eval folder, one per command, "
        "skill, agent and SessionStart hook check, which `claude plugin eval` runs too "
        "(for a plugin without phases; a plugin that has cases gets a suite running them)",
    )
    parser.add_argument(
        "--action",
        metavar="OWNER/NAME@SHA",
        help="the ci-evals action the drafted .github/workflows/evals.yml uses, pinned to "
        "a full commit SHA (default: the commit this ci-evals was installed from, when known)",
    )
    parser.add_argument(
        "--independent",
        action="store_true",
        help="one stage with a scenario per command, even when a command reads a file "
        "another writes (each then runs alone in its own workspace)",
    )


def run(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    given = Path(os.path.abspath(args.plugin))
    if not given.is_dir():
        raise UserError(f"no such folder: {args.plugin}", hint="pass the plugin's folder")
    source = _plugin_source(given, args.plugin, args.plugin_name)
    plugin_dir = source.path
    top = git.toplevel(cwd)  # the stage map lives in a repository
    pin = draft_workflow.action_pin(args.action)  # a bad --action: before any file
    here = _suite_folder(args, cwd, top, source)
    marketplace = None
    if args.plugin_name is not None:
        marketplace = (Path(os.path.relpath(given, here)).as_posix(), args.plugin_name)
    plugin_rel = Path(os.path.relpath(plugin_dir, here)).as_posix()
    if plugin_rel.startswith("../") and not plugin_dir.is_relative_to(top):
        raise UserError(
            f"{args.plugin} is outside the repository {top}",
            hint="copy or vendor the plugin into the repository first",
        )
    _refuse_uncopyable(plugin_dir, top, here)
    load_notes = _refuse_unloadable(source)
    files = _plugin_files(plugin_dir, here)
    hook_file = top / PRECOMMIT
    files = [path for path in files if plugin_dir / path != hook_file]
    global_paths = _global_paths(source, here, hook_file)
    where = _DraftTarget(here=here, cwd=cwd, top=top, files=files, global_paths=global_paths)
    as_cases = _as_cases(args, source, where, marketplace, load_notes, pin)
    if as_cases is not None:
        return as_cases
    if args.independent and args.stages is not None:
        raise UserError(
            "--independent and --stages ask for opposite drafts",
            field="--independent",
            hint="give one: --stages for phases, --independent for a scenario per command",
        )
    plan = drafting.plan(
        source,
        plugin_rel,
        files,
        args.stages,
        global_paths,
        marketplace=marketplace,
        independent=args.independent,
    )
    plan = replace(plan, unread=unread_files(plugin_dir, files))

    written: list[str] = []
    kept: list[str] = []

    def put(path: Path, text: str) -> None:
        _put(path, text, cwd, written, kept)

    put(here / STAGE_MAP, with_schema(drafting.render_stage_map(plan), STAGE_MAP, here, top))
    put(here / SUITE, with_schema(drafting.render_suite(plan), SUITE, here, top))
    put(here / plan.stub_file, drafting.render_stub(plan))
    for stage in plan.stages:
        folder = here / plan.fixture_dir(stage)
        if folder.exists():
            kept.append(os.path.relpath(folder, cwd) + "/")
        else:
            put(folder / plan.output_file(stage), drafting.render_fixture(stage))
    map_path = Path(os.path.relpath(here / STAGE_MAP, top)).as_posix()
    suite_path = Path(os.path.relpath(here / SUITE, top)).as_posix()
    put(hook_file, _stage_hooks(map_path, suite_path))
    workflow = _draft_workflow(pin, top, cwd, suite_path, map_path, written, kept)
    ignored = _ignore_run_folders(here, cwd)

    print(f"drafted {plan.why}")
    _say(written, kept, ignored, [*load_notes, *_cases_instead(plan)], workflow)
    if os.path.relpath(hook_file, cwd) in kept:
        print(_hook_line(hook_file, map_path, cwd))
    _next(here, cwd, plan.stub_file)
    return EXIT_OK


# The JSON Schemas the package ships for the two files (docs/json.md).
SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
SCHEMA_OF = {SUITE: "ci-evals.schema.json", STAGE_MAP: "stage_map.schema.json"}
MODELINE = "# yaml-language-server: $schema="


def with_schema(text: str, name: str, here: Path, top: Path) -> str:
    """`text`, the draft of `name` (`ci-evals.yaml` or `stage_map.yaml`), headed by
    the modeline that gives an editor its schema: this install's, by a path relative
    to the suite's folder. Only when that lies inside the repository (a `.venv`
    there, as the README makes it, or ci-evals itself): a path out of it, committed,
    would name nothing on another machine. Then no line is written (docs/json.md
    says how to point an editor at the schemas)."""
    schema = SCHEMAS / SCHEMA_OF[name]
    if not schema.is_relative_to(top.resolve()):
        return text
    relative = Path(os.path.relpath(schema, here.resolve())).as_posix()
    return f"{MODELINE}{relative}\n{text}"


def _as_cases(  # noqa: PLR0917 - run's places, passed on
    args: argparse.Namespace,
    source: PluginSource,
    where: _DraftTarget,
    marketplace: tuple[str, str] | None,
    notes: list[str],
    pin: draft_workflow.ActionPin,
) -> int | None:
    """The plugin's own `claude plugin eval` cases: a suite that runs them; with
    `--format cases` and none yet, cases drafted first. None: draft stages."""
    evals, cases = draft_cases.find_cases(source)
    if not cases and args.format == "cases":
        _refuse_stage_options(args)
        return _init_case_files(source, evals, where, marketplace=marketplace, notes=notes, pin=pin)
    if cases:
        return _init_cases(
            source, evals, cases, where, marketplace=marketplace, notes=notes, pin=pin
        )
    return None


def _refuse_stage_options(args: argparse.Namespace) -> None:
    if args.stages is not None or args.independent:
        raise UserError(
            "--stages and --independent draft stages, not cases",
            field="--format",
            hint="leave them out with --format cases (each case runs alone)",
        )


def _cases_instead(plan: drafting.Draft) -> list[str]:
    """A draft without phases (no commands, or independent ones) could be cases."""
    if plan.calls or not any(stage.kind == "command" for stage in plan.stages):
        return [
            "note: no phases: `ci-evals init --format cases` drafts claude plugin eval "
            "cases instead, which `claude plugin eval` runs too (docs/onboarding.md)"
        ]
    return []


def _stage_hooks(map_path: str, suite_path: str) -> str:
    """The pre-commit file for a suite of stages: coverage, and its fixtures' contracts."""
    return drafting.render_precommit(
        None if map_path == STAGE_MAP else map_path,
        fixtures=True,
        suite_arg=None if suite_path == SUITE else suite_path,
    )


def _draft_workflow(  # noqa: PLR0917 - the draft's places, both call sites
    pin: draft_workflow.ActionPin,
    top: Path,
    cwd: Path,
    suite_path: str,
    map_path: str,
    written: list[str],
    kept: list[str],
) -> str:
    """Write .github/workflows/evals.yml when no workflow of the repository runs
    ci-evals yet; the line to print about it ("" when nothing to say)."""
    running = draft_workflow.workflows_running_ci_evals(top)
    if running:
        shown = os.path.relpath(top / running[0], cwd)
        if suite_path == SUITE:
            return f"{shown} runs ci-evals already: no workflow drafted"
        return (
            f"{shown} runs ci-evals already: no workflow drafted; for this suite add a "
            f"ci-evals step with suite: {suite_path} and stage-map: {map_path}"
        )
    path = top / draft_workflow.WORKFLOW
    text = draft_workflow.render_workflow(
        pin,
        suite=None if suite_path == SUITE else suite_path,
        stage_map=None if map_path == STAGE_MAP else map_path,
    )
    _put(path, text, cwd, written, kept)
    shown = os.path.relpath(path, cwd)
    if shown in kept:
        return ""
    if pin.placeholder:
        return (
            f"{shown}: replace {pin.uses} with the repository you host or mirror ci-evals "
            "in at a full commit SHA (or draft again with --action OWNER/NAME@SHA)"
        )
    return f"{shown}: the action pinned to {pin.uses} ({pin.source})"


def _put(path: Path, text: str, cwd: Path, written: list[str], kept: list[str]) -> None:
    """Write `path` unless it exists (then it is kept, and said so)."""
    shown = os.path.relpath(path, cwd)
    if os.path.lexists(path):
        kept.append(shown)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as handle:  # never over a file made meanwhile
        handle.write(text)
    written.append(shown)


@dataclass(frozen=True)
class _DraftTarget:
    """Where a case suite is drafted, and what the map it drafts covers."""

    here: Path  # the suite's folder
    cwd: Path
    top: Path  # the repository's
    files: list[str]  # the plugin's files (plugin-relative), ci-evals' own left out
    global_paths: list[str]  # the map's globals, relative to `here`


def _init_case_files(
    source: PluginSource,
    evals: Path,
    where: _DraftTarget,
    *,
    marketplace: tuple[str, str] | None,
    notes: list[str],
    pin: draft_workflow.ActionPin,
) -> int:
    """`--format cases` on a plugin without cases: a `claude plugin eval` case per
    part in its eval folder (`draft_case_files`), then the suite that runs them."""
    planned = draft_case_files.plan(source)
    written: list[str] = []
    kept: list[str] = []
    for case in planned.cases:
        _put(evals / case.folder / draft_case_files.CASE_FILE, case.text, where.cwd, written, kept)
    # Read back as `claude plugin eval` finds them: a folder kept as it was counts.
    evals, cases = draft_cases.find_cases(source)
    parts = [case.part for case in planned.cases]
    listed = ", ".join(parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")
    shown = os.path.relpath(evals, where.cwd)
    why = (
        f"drafted {len(planned.cases)} claude plugin eval case(s) in {shown}/, one per "
        f"part ({listed}), and a suite running them (plugin_evals:) on the stub"
    )
    unchecked = [f"note: no case checks {line}" for line in planned.unchecked]
    files = [evals / case.folder / draft_case_files.CASE_FILE for case in planned.cases]
    # superpowers ignores `evals/`
    hidden = committed.hidden_line(files, what="the cases", advice=committed.CASES_ADVICE)
    if hidden is not None:
        unchecked.append(f"note: {hidden}")
    cli_line = (
        f"the cases run with Claude Code's own runner too: claude plugin eval "
        f"{shlex.quote(os.path.relpath(source.path, where.cwd))} --trust-plugin"
    )
    return _init_cases(
        source,
        evals,
        cases,
        where,
        marketplace=marketplace,
        notes=[*notes, *unchecked],
        pin=pin,
        drafted_cases=(why, written, kept, cli_line),
    )


def _init_cases(
    source: PluginSource,
    evals: Path,
    cases: list[Path],
    where: _DraftTarget,
    *,
    marketplace: tuple[str, str] | None,
    notes: list[str],
    pin: draft_workflow.ActionPin,
    drafted_cases: tuple[str, list[str], list[str], str] | None = None,
) -> int:
    """A plugin with eval cases: the suite runs them (`plugin_evals:`), the stub
    script satisfies them, and the stage map sends each plugin file to the cases
    that reach it (`draft_case_map`), checked on every commit by the hook.
    `drafted_cases`: the cases `--format cases` just wrote (the first line to
    print, what it wrote and kept, the line running them with the CLI)."""
    here, cwd = where.here, where.cwd
    hooks = draft_shapes.hooks(source.path, source.manifest)
    drafted = draft_cases.draft(
        evals,
        cases,
        source.path,
        fired=draft_case_files.fired_lines(hooks, source.path),
        repeat_last=bool(draft_shapes.loops(hooks)),
    )
    # Granted besides the stub's calls: what the shell expansions of the commands
    # the cases invoke need (the run's grant, not the commands' allowed-tools).
    shell = command_shell.shell_grants(source, [case.prompt for case in drafted.cases])
    grants = tuple(dict.fromkeys((*drafted.grants, *shell)))
    plugin: object = Path(os.path.relpath(source.path, here)).as_posix()
    if marketplace is not None:
        plugin = {"marketplace": marketplace[0], "name": marketplace[1]}
    line = yaml.safe_dump({"plugin": plugin}, default_flow_style=False, width=1 << 16).strip()
    shown = Path(os.path.relpath(evals, here)).as_posix() + "/"
    stub_file = f"stub/{source.name}.yaml"
    first, written, kept, cli_line = drafted_cases or (None, [], [], None)
    workflow = ""
    _put(
        here / SUITE,
        with_schema(
            draft_cases.render_suite(line, source.name, shown, grants),
            SUITE,
            here,
            where.top,
        ),
        cwd,
        written,
        kept,
    )
    _put(here / stub_file, draft_cases.render_stub(drafted), cwd, written, kept)
    coverage = evals.is_relative_to(source.path)
    if coverage:  # a map selects cases only in an eval folder inside the plugin
        inside = evals.relative_to(source.path).as_posix() + "/"
        files = [path for path in where.files if not path.startswith(inside)]
        found = draft_case_map.entries(
            source.name, source.path, files, drafted.cases, unread_files(source.path, files)
        )
        text = draft_case_map.render(
            Path(os.path.relpath(source.path, here)).as_posix(),
            Path(os.path.relpath(evals, here)).as_posix(),
            found,
            where.global_paths,
            marketplace=marketplace,
        )
        _put(here / STAGE_MAP, with_schema(text, STAGE_MAP, here, where.top), cwd, written, kept)
        hook_file = where.top / PRECOMMIT
        map_path = Path(os.path.relpath(here / STAGE_MAP, where.top)).as_posix()
        _put(
            hook_file,
            drafting.render_precommit(None if map_path == STAGE_MAP else map_path),
            cwd,
            written,
            kept,
        )
        # The action selects with the map: without one there is nothing to draft.
        suite_path = Path(os.path.relpath(here / SUITE, where.top)).as_posix()
        workflow = _draft_workflow(pin, where.top, cwd, suite_path, map_path, written, kept)
    ignored = _ignore_run_folders(here, cwd)
    print(
        first
        or f"drafted a suite running the plugin's {len(drafted.cases)} claude plugin eval "
        f"case(s) in {shown} (plugin_evals:), each on the stub as its graders ask"
        + (
            ", and a stage map sending each plugin file to the cases that name it"
            if coverage
            else ""
        )
    )
    _say(written, kept, ignored, notes, workflow)
    if coverage and os.path.relpath(where.top / PRECOMMIT, cwd) in kept:
        map_path = Path(os.path.relpath(here / STAGE_MAP, where.top)).as_posix()
        print(_hook_line(where.top / PRECOMMIT, map_path, cwd))
    for unmet in drafted.unmet:
        print(f"not satisfied on the stub: {unmet} (see {stub_file})")
    if cli_line is not None:
        print(cli_line)
    _next(here, cwd, stub_file, coverage=coverage)
    return EXIT_OK


def _next(here: Path, cwd: Path, stub_file: str, *, coverage: bool = True) -> None:
    """What to look at, then the commands to run next."""
    hidden = committed.hidden_line([here / SUITE, *([here / STAGE_MAP] if coverage else [])])
    if hidden is not None:
        print(hidden)
    stub = f"stub:{stub_file}"
    # Every command finds the suite and its map from the current folder upward:
    # run from the suite's folder, they can only take this suite.
    go = "" if here == cwd else f"cd {shlex.quote(os.path.relpath(here, cwd))} && "
    coverage_step = "ci-evals check-coverage && " if coverage else ""
    print(
        f"next: {go}git add -A && {coverage_step}"
        f"ci-evals check --model {stub} && ci-evals run --model {stub}"
    )


def _suite_folder(args: argparse.Namespace, cwd: Path, top: Path, source: PluginSource) -> Path:
    """Where the suite is drafted. One folder per suite: a marketplace's plugins each
    get their own (`evals/NAME`), so a second `init --plugin` never mixes its
    suite, fixtures or stub with the first's."""
    into = args.into or (f"evals/{source.name}" if args.plugin_name is not None else ".")
    here = Path(os.path.normpath(cwd / into))
    if not here.is_relative_to(top) or GIT_DIR in here.relative_to(top).parts:
        raise UserError(
            f"{into} is outside the repository {top}",
            field="--into",
            hint="draft the suite inside the repository, outside .git",
        )
    return here


def _global_paths(source: PluginSource, here: Path, hook_file: Path) -> list[str]:
    """The map's `global` paths (relative to `here`): a change to one runs every stage."""
    plugin_dir = source.path
    # What init writes inside the plugin folder itself (PLUGIN_DIR = ., or a suite
    # folder inside it) must not read as plugin files: it is global instead.
    inside = plugin_dir == here or here.is_relative_to(plugin_dir)
    # The stub script answers every stage of a stub run: a change to it runs all.
    global_paths = [SUITE, "stub"] if inside else [SUITE, "/stub/"]
    if hook_file.is_relative_to(plugin_dir):  # a plugin at the top holds the hook's file
        hook = Path(os.path.relpath(hook_file, here)).as_posix()
        global_paths.append(hook if hook.startswith("../") else PRECOMMIT)
    workflow = hook_file.parent / draft_workflow.WORKFLOW
    if workflow.is_relative_to(plugin_dir):  # so is the workflow it drafts
        shown = Path(os.path.relpath(workflow, here)).as_posix()
        global_paths.append(shown if shown.startswith("../") else "/" + draft_workflow.WORKFLOW)
    if inside:  # the .gitignore init writes (or extends) for the run folders
        global_paths.append("/.gitignore")
    # A marketplace's plugin: the map compares its entry (`marketplace:`), so the
    # file is no global (public marketplaces edit it in most commits).
    return global_paths


def _refuse_uncopyable(plugin_dir: Path, top: Path, here: Path) -> None:
    """What the draft reads of the plugin (its commands' text) ends up in files it
    writes, to be committed: a link out of the repository is refused first, as
    everything `run` would refuse to copy (and only that: a `.venv` git ignores,
    or a suite drafted here before, is no part of the copy)."""
    own = [(here, "the suite's folder"), *((here / name, name) for name in OURS)]
    found = copy_problem(plugin_dir, confinement(top), plugin_files(plugin_dir, own))
    if found is not None:
        where, problem = found
        raise UserError(f"{display_path(where)} {problem}", hint=COPY_HINT)


def _refuse_unloadable(source: PluginSource) -> list[str]:
    """Refuse a plugin Claude Code's loader refuses (a draft of it could only fail
    every stage, `Claude Code did not load the plugin`), in one line quoting the
    CLI's reason; the lines to print for what it loads less a part, or could not
    be asked. Only a manifest makes the loader refuse a whole plugin: without
    one (named after its folder) nothing is asked."""
    if source.origin == "folder name":
        return []
    verdict = plugin_load.ask(source.path, source.manifest_to_write)
    manifest = source.marketplace if source.origin == "marketplace entry" else None
    refused = plugin_load.refusal(verdict)
    if refused is not None:
        raise UserError(
            refused,
            file=manifest or source.path / MANIFEST,
            hint=plugin_load.FIX_HINT,
        )
    return plugin_load.notes(verdict)


def _say(
    written: list[str], kept: list[str], ignored: str, notes: list[str], workflow: str = ""
) -> None:
    """What init wrote and kept; `workflow`: the line about the drafted workflow."""
    for line in notes:
        print(line)
    for shown in written:
        print(f"wrote {shown}")
    if ignored:
        print(ignored)
    for shown in kept:
        print(f"kept {shown} (exists; not overwritten)")
    if workflow:
        print(workflow)


def _hook_line(path: Path, map_path: str, cwd: Path) -> str:
    """The map in the pre-commit file that exists: added to its hook, or what to add."""
    shown = os.path.relpath(path, cwd)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read it: {exc}", file=path) from None
    if not precommit.has_hook(text):
        hook = drafting.render_precommit(None if map_path == STAGE_MAP else map_path)
        return f"add to {shown}'s repos:\n" + hook[hook.index("  - repo: local") :].rstrip("\n")
    args = precommit.hook_args(text) or []
    named = precommit.maps_of(args)
    if map_path in named or (not named and map_path == STAGE_MAP):
        return f"{shown}: its {precommit.HOOK_ID} hook checks {map_path} already"
    top_map = (path.parent / STAGE_MAP).is_file()
    if precommit.add_map(path, map_path, top_map=top_map):
        return f"added --map {map_path} to the {precommit.HOOK_ID} hook in {shown}"
    return (
        f"add [--map, {map_path}] to the args of the {precommit.HOOK_ID} hook in {shown} "
        "(it takes --map once per stage map)"
    )


def _ignore_run_folders(here: Path, cwd: Path) -> str:
    """Make git ignore `.ci-evals/` (run folders: never committed), as `git add -A`
    comes next; what was done, or "" when it was ignored already."""
    if git.is_ignored(here, f"{RUNS}/x"):
        return ""
    path = here / ".gitignore"
    try:
        before = path.read_bytes() if path.exists() else b""
        with path.open("ab") as handle:
            sep = b"" if not before or before.endswith(b"\n") else b"\n"
            handle.write(sep + f"/{RUNS}/\n".encode())
    except OSError as exc:
        raise UserError(f"cannot add /{RUNS}/ to it: {exc.strerror or exc}", file=path) from None
    shown = os.path.relpath(path, cwd)
    if before:
        return f"added /{RUNS}/ to {shown} (run folders, never committed)"
    return f"wrote {shown}: /{RUNS}/ (run folders, never committed)"


def _plugin_source(folder: Path, shown: str, name: str | None) -> PluginSource:
    """The plugin to draft for: the folder's, or the one a marketplace names."""
    if name is not None:
        if not is_marketplace(folder):
            raise UserError(
                f"{shown} is not a marketplace: no {MARKETPLACE}",
                field="--plugin",
                hint="pass the marketplace's folder, or leave --plugin out for a plugin's",
            )
        return plugin_in_marketplace(folder, name)
    if is_marketplace(folder) and not (folder / MANIFEST).is_file():
        entries = read_marketplace(folder).entries
        # One per line: wshobson/agents lists 92, which no one reads on one line.
        for entry in entries:
            where = entry.source if isinstance(entry.source, str) else "a remote source"
            print(f"  {entry.name}  ({where})")
        raise UserError(
            f"{shown} is a marketplace of {len(entries)} plugins (listed above)",
            hint=f"choose one: ci-evals init {shlex.quote(shown)} --plugin NAME",
        )
    return plugin_at(folder)


def _plugin_files(plugin_dir: Path, here: Path) -> list[str]:
    """The plugin's files as `git add -A` would stage them, less ci-evals' own: what
    init writes, and every suite's folder inside the plugin (this one's included)."""
    listed = git.files_to_commit(plugin_dir)
    folders = {
        "/".join(parts[:i])
        for parts in (p.split("/") for p in listed)
        for i in range(1, len(parts))
    }
    suites = [f + "/" for f in sorted(folders) if not_the_plugins(os.path.join(plugin_dir, f))]
    if here != plugin_dir and here.is_relative_to(plugin_dir):
        suites.append(here.relative_to(plugin_dir).as_posix() + "/")
    return [
        path
        for path in listed
        if not path.startswith(tuple(suites)) and not _ours(plugin_dir / path, here, OURS)
    ]


def _ours(path: Path, here: Path, ours: tuple[str, ...]) -> bool:
    """A file init writes (when the plugin folder holds the suite's folder)."""
    try:
        rel = path.relative_to(here).as_posix()
    except ValueError:
        return False
    return any(rel == item or (item.endswith("/") and rel.startswith(item)) for item in ours)
