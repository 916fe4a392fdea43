"""`ci-evals init [PLUGIN_DIR] [--plugin NAME]`: draft a suite for a plugin, never
overwriting a file. PLUGIN_DIR is the plugin's folder (with or without a manifest,
as Claude Code loads it), or with `--plugin` a marketplace's folder.

Writes, in the current folder: `stage_map.yaml` (every plugin file given the
stage it can affect, `suite.draft`), `ci-evals.yaml` (the stages `--stages`
names; else commands that read each other's output as phases, writer first, and
independent commands as one stage with a scenario each; the first line printed
says which and why), a
`fixtures/<k>-<stage>-output/` folder per stage with a placeholder, a stub
script whose rules match the stages' commands and the plugin's agents and
write the placeholders the drafted checks look for, and a
`.pre-commit-config.yaml` (at the repository's top) running `check-coverage`.
A file that exists is kept and said so. What it writes passes `check-coverage`
and `ci-evals check` as it is, and runs end to end on the stub model.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from ci_evals import git
from ci_evals.errors import EXIT_OK, UserError
from ci_evals.fs.copyable import COPY_HINT, confinement, copy_problem
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
        "--stages",
        metavar="A,B=CMD,...",
        help="the stages, in order, each running the command of its name, the plugin's "
        "only command, or CMD (default: phases when the commands read each other's "
        "output, else one stage with a scenario per command)",
    )


def run(args: argparse.Namespace) -> int:
    here = Path.cwd()
    given = Path(os.path.abspath(args.plugin))
    if not given.is_dir():
        raise UserError(f"no such folder: {args.plugin}", hint="pass the plugin's folder")
    source, marketplace = _plugin_source(given, args.plugin, args.plugin_name, here)
    plugin_dir = source.path
    top = git.toplevel(here)  # the stage map lives in a repository
    plugin_rel = Path(os.path.relpath(plugin_dir, here)).as_posix()
    if plugin_rel.startswith("../") and not plugin_dir.is_relative_to(top):
        raise UserError(
            f"{args.plugin} is outside the repository {top}",
            hint="copy or vendor the plugin into the repository first",
        )
    _refuse_uncopyable(plugin_dir, top)
    ours = [SUITE, STAGE_MAP, "stub/", "fixtures/", PRECOMMIT]
    files = [
        path for path in git.files_to_commit(plugin_dir) if not _ours(plugin_dir / path, here, ours)
    ]
    # What init writes inside the plugin folder itself (PLUGIN_DIR = .) must not
    # read as plugin files: the stub script is global (a change re-runs all).
    inside = plugin_dir == here or here.is_relative_to(plugin_dir)
    # The stub script answers every stage of a stub run: a change to it runs all.
    global_paths = [SUITE, "stub"] if inside else [SUITE, "/stub/"]
    if inside and here == top:
        global_paths.append(PRECOMMIT)
    if inside:  # the .gitignore init writes (or extends) for the run folders
        global_paths.append("/.gitignore")
    # A marketplace's plugin: the map compares its entry (`marketplace:`), so the
    # file is no global (public marketplaces edit it in most commits).
    plan = drafting.plan(
        source, plugin_rel, files, args.stages, global_paths, marketplace=marketplace
    )
    plan = replace(plan, unread=unread_files(plugin_dir, files))

    written: list[str] = []
    kept: list[str] = []

    def put(path: Path, text: str) -> None:
        shown = os.path.relpath(path, here)
        if os.path.lexists(path):
            kept.append(shown)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as handle:  # never over a file made meanwhile
            handle.write(text)
        written.append(shown)

    put(here / STAGE_MAP, drafting.render_stage_map(plan))
    put(here / SUITE, drafting.render_suite(plan))
    put(here / plan.stub_file, drafting.render_stub(plan))
    for stage in plan.stages:
        folder = here / plan.fixture_dir(stage)
        if folder.exists():
            kept.append(os.path.relpath(folder, here) + "/")
        else:
            put(folder / plan.output_file(stage), drafting.render_fixture(stage))
    map_path = Path(os.path.relpath(here / STAGE_MAP, top)).as_posix()
    put(top / PRECOMMIT, drafting.render_precommit(None if map_path == STAGE_MAP else map_path))
    ignored = _ignore_run_folders(here)

    print(f"drafted {plan.why}")
    _say(written, kept, ignored, top / PRECOMMIT, here, map_path)
    stub = f"stub:{plan.stub_file}"
    print(
        "next: git add -A && ci-evals check-coverage && "
        f"ci-evals check --model {stub} && ci-evals run --model {stub}"
    )
    return EXIT_OK


def _refuse_uncopyable(plugin_dir: Path, top: Path) -> None:
    """What the draft reads of the plugin (its commands' text) ends up in files it
    writes, to be committed: a link out of the repository is refused first, as
    everything `run` would refuse to copy."""
    found = copy_problem(plugin_dir, confinement(top))
    if found is not None:
        where, problem = found
        raise UserError(f"{display_path(where)} {problem}", hint=COPY_HINT)


def _say(  # noqa: PLR0917 - what init did, in the order it did it
    written: list[str], kept: list[str], ignored: str, precommit: Path, here: Path, map_path: str
) -> None:
    for shown in written:
        print(f"wrote {shown}")
    if ignored:
        print(ignored)
    for shown in kept:
        print(f"kept {shown} (exists; not overwritten)")
    if os.path.relpath(precommit, here) in kept and not _has_our_hook(precommit):
        hook = drafting.render_precommit(None if map_path == STAGE_MAP else map_path)
        print(f"add to {PRECOMMIT}'s repos:")
        print(hook[hook.index("  - repo: local") :], end="")


def _ignore_run_folders(here: Path) -> str:
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
    shown = os.path.relpath(path, here)
    if before:
        return f"added /{RUNS}/ to {shown} (run folders, never committed)"
    return f"wrote {shown}: /{RUNS}/ (run folders, never committed)"


def _has_our_hook(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "id: ci-evals-coverage" in text


def _plugin_source(
    folder: Path, shown: str, name: str | None, here: Path
) -> tuple[PluginSource, tuple[str, str] | None]:
    """The plugin to draft for, and (marketplace folder from `here`, name) when a
    marketplace names it."""
    if name is not None:
        if not is_marketplace(folder):
            raise UserError(
                f"{shown} is not a marketplace: no {MARKETPLACE}",
                field="--plugin",
                hint="pass the marketplace's folder, or leave --plugin out for a plugin's",
            )
        rel = Path(os.path.relpath(folder, here)).as_posix()
        return plugin_in_marketplace(folder, name), (rel, name)
    if is_marketplace(folder) and not (folder / MANIFEST).is_file():
        names = ", ".join(entry.name for entry in read_marketplace(folder).entries) or "none"
        raise UserError(
            f"{shown} is a marketplace of plugins: {names}",
            hint=f"choose one: ci-evals init {shown} --plugin NAME",
        )
    return plugin_at(folder), None


def _ours(path: Path, here: Path, ours: list[str]) -> bool:
    """A file init writes (when the plugin folder holds the suite's folder)."""
    try:
        rel = path.relative_to(here).as_posix()
    except ValueError:
        return False
    return any(rel == item or (item.endswith("/") and rel.startswith(item)) for item in ours)
