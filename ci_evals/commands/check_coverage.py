"""`ci-evals check-coverage [--map PATH]...`: the pre-commit hook.

Exit 0 with one OK line when every staged file under the plugin root is
covered by a stage-map entry and every entry matches a staged file; exit 1
listing each uncovered file and each dead entry otherwise; exit 2 (one line)
when the map itself is wrong. `--map` may be given once per suite (a marketplace of
several plugins, each with its own `evals/<plugin>/stage_map.yaml`): each map is
checked in turn, and the worst exit code is the hook's. In GitHub Actions the problems also become
`::error` annotations (at most 10; the full list goes to the step summary).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals import git
from ci_evals.commands import output
from ci_evals.errors import EXIT_FAIL, EXIT_OK, UserError, print_user_error
from ci_evals.selection.coverage import CoverageReport, check_coverage, leaving_link
from ci_evals.selection.stage_map import default_map_path, load_stage_map

if TYPE_CHECKING:
    from ci_evals.github.actions import ActionsEnv
    from ci_evals.selection.stage_map import StageMap


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--map",
        type=Path,
        action="append",
        default=None,
        metavar="PATH",
        help="the stage map; once per map to check several (default: the nearest "
        "stage_map.yaml from the current folder up to the top of the repository)",
    )
    output.add_json(
        parser, "check-coverage", "per map, every problem with its file, line, column and field"
    )


def run(args: argparse.Namespace) -> int:
    actions = _actions_env()
    emit: output.Emit | None = args.emit
    # One document per map, for --json (None: not asked for).
    maps: list[dict[str, object]] | None = None if emit is None else []
    # (`ci_evals.main.entry` runs this command with the cyclic collector off.)
    codes = [_check_one(path, actions, maps) for path in dict.fromkeys(args.map or [None])]
    if emit is not None and maps is not None:
        emit(max(codes), {"ok": max(codes) == EXIT_OK, "maps": maps})
    return max(codes)


def _check_one(
    path: Path | None, actions: ActionsEnv | None, maps: list[dict[str, object]] | None
) -> int:
    """Check one stage map (None: the nearest); its exit code. `maps`: --json's list,
    where its document goes (then a map that cannot be read is its problem, and the
    other maps are still checked)."""
    try:
        map_path = path if path is not None else default_map_path(Path.cwd())
        stage_map = load_stage_map(map_path)
        _refuse_leaving_link(stage_map)
        report = check_coverage(stage_map)
    except UserError as exc:
        if actions is not None:
            _report_map_error(actions, exc)
        if maps is None:
            raise
        print_user_error(exc)
        shown = exc.file if exc.file is not None else (None if path is None else str(path))
        problem = {"kind": "invalid-map", **output.problem(exc)}
        maps.append(
            {"map": shown, "ok": False, "checked": None, "entries": None, "problems": [problem]}
        )
        return exc.exit_code
    if maps is not None:
        maps.append(
            {
                "map": report.stage_map.display,
                "ok": report.ok,
                "checked": report.checked,
                "entries": len(stage_map.entries),
                "problems": _problems(report),
            }
        )
    if report.ok:
        root = f"{stage_map.root}/" if stage_map.root else "the repository"
        print(
            f"ci-evals: stage map OK: {report.checked} staged files under {root}, "
            f"{len(stage_map.entries)} entries: every file covered, every entry used"
        )
        return EXIT_OK
    for line in _problem_lines(report):
        print(line)
    print(_summary_line(report))
    if actions is not None:
        _report_to_actions(actions, report)
    return EXIT_FAIL


def _refuse_leaving_link(stage_map: StageMap) -> None:
    """A staged link the run would follow out of the repository (or into .git) stops
    the commit here, as `run` and `check` would stop the pull request."""
    found = leaving_link(stage_map)
    if found is not None:
        path, problem = found
        raise UserError(f"{_shown(path)} {problem}")


def _actions_env() -> ActionsEnv | None:
    """The Actions settings, importing that module only in Actions (the hook runs per commit)."""
    if "GITHUB_ACTIONS" not in os.environ and "GITHUB_OUTPUT" not in os.environ:
        return None
    from ci_evals.github.actions import ActionsEnv  # noqa: PLC0415

    return ActionsEnv.from_environ()


def _shown(path: str) -> str:
    """A path as one printable line: JSON-quoted when it holds control characters."""
    if not any(ord(c) < 32 for c in path):
        return path
    import json  # noqa: PLC0415 - rare; the hook does not pay for it

    return json.dumps(path, ensure_ascii=False)


def _problem_lines(report: CoverageReport) -> list[str]:
    display = report.stage_map.display
    lines = [f"{_shown(path)}: not covered by any entry in {display}" for path in report.uncovered]
    lines += [
        f"{display}:{line}:{column}: {where}: {glob!r} matches no staged file"
        for where, line, column, glob in _dead(report)
    ]
    lines += [f"{display}:{line}:{column}: {text}" for line, column, text in _no_case(report)]
    if report.unreadable_case is not None:
        lines.append(
            f"{_shown(report.unreadable_case)}: cannot be read, so a change selects every case"
        )
    return lines


def _problems(report: CoverageReport) -> list[dict[str, object]]:
    """`--json`: every problem the lines say, each with its kind and place."""
    display = report.stage_map.display
    found = [
        ("uncovered", UserError(f"not covered by any entry in {display}", file=path))
        for path in report.uncovered
    ]
    kinds = {"entries": "dead-entry", "global": "dead-global"}
    found += [
        (
            "dead-except" if ".except[" in where else kinds[where.split("[")[0]],
            UserError(
                f"{glob!r} matches no staged file",
                file=display,
                line=line,
                column=column,
                field=where,
            ),
        )
        for where, line, column, glob in _dead(report)
    ]
    found += [
        ("no-case", UserError(text, file=display, line=line, column=column))
        for line, column, text in _no_case(report)
    ]
    if report.unreadable_case is not None:
        found.append(
            (
                "unreadable-case",
                UserError(
                    "cannot be read, so a change selects every case", file=report.unreadable_case
                ),
            )
        )
    return [{"kind": kind, **output.problem(error)} for kind, error in found]


def _no_case(report: CoverageReport) -> list[tuple[int, int, str]]:
    """(line, column, problem) of each `cases:` glob or tag of a case map that no case has."""
    evals = report.stage_map.evals
    return [
        (
            entry.line,
            entry.column,
            f"entries[{entry.index}].{where}: {name!r} is no case's "
            f"{'name' if where.startswith('cases') else 'tag'} in {evals}/: "
            f"{entry.glob!r} reaches no case",
        )
        for entry, where, name in report.no_case
    ]


def _dead(report: CoverageReport) -> list[tuple[str, int, int, str]]:
    """(field, line, column, glob) of each dead entry, then of each dead `global` glob."""
    dead = [(f"entries[{e.index}].glob", e.line, e.column, e.glob) for e in report.dead]
    dead += [(f"global[{g.index}]", g.line, g.column, g.glob) for g in report.dead_globals]
    dead += [
        (f"entries[{e.index}].except[{n}] (of its entry's files)", e.line, e.column, e.excepts[n])
        for e, n in report.dead_excepts
    ]
    return dead


def _summary_line(report: CoverageReport) -> str:
    parts = []
    if report.uncovered:
        n = len(report.uncovered)
        parts.append(f"{n} uncovered file{'s' if n != 1 else ''}")
    if report.dead:
        n = len(report.dead)
        parts.append(f"{n} dead entr{'ies' if n != 1 else 'y'}")
    if report.dead_globals:
        n = len(report.dead_globals)
        parts.append(f"{n} dead global glob{'s' if n != 1 else ''}")
    if report.dead_excepts:
        n = len(report.dead_excepts)
        parts.append(f"{n} dead except glob{'s' if n != 1 else ''}")
    if report.no_case:
        n = len(report.no_case)
        parts.append(f"{n} entr{'ies' if n != 1 else 'y'} reaching no case")
    if report.unreadable_case:
        parts.append("an unreadable case")
    return (
        f"ci-evals: stage map check failed: {', '.join(parts)} "
        f"(add an entry for each uncovered file, remove or fix each dead entry "
        f"in {report.stage_map.display})"
    )


def _report_to_actions(actions: ActionsEnv, report: CoverageReport) -> None:
    from ci_evals.github.actions import annotation, append_summary, capped  # noqa: PLC0415

    # GitHub reads annotation and summary paths from the repository's top, whatever our cwd.
    display = report.stage_map.path
    lines = [
        annotation(
            "error",
            f"{path} is covered by no entry in {display}; add one so changes to it select a stage",
            file=path,
            title="File not in the stage map",
        )
        for path in report.uncovered
    ]
    lines += [
        annotation(
            "error",
            f"{where.removesuffix('.glob')} {glob!r} matches no staged file; remove or fix it",
            file=display,
            line=line,
            column=column,
            title="Dead stage-map entry" if where.startswith("entries") else "Dead global glob",
        )
        for where, line, column, glob in _dead(report)
    ]
    lines += [
        annotation("error", text, file=display, line=line, column=column, title="No case")
        for line, column, text in _no_case(report)
    ]
    for line in capped(lines):
        print(line)
    rows = [f"- `{_md(path)}`: not covered by any entry" for path in report.uncovered]
    rows += [
        f"- `{_md(display)}` line {line}: `{_md(glob)}` matches no staged file"
        for _, line, _, glob in _dead(report)
    ]
    rows += [f"- `{_md(display)}` line {line}: {_md(text)}" for line, _, text in _no_case(report)]
    append_summary(actions, "### Stage map coverage\n\n" + "\n".join(rows) + "\n")


def _report_map_error(actions: ActionsEnv, exc: UserError) -> None:
    from ci_evals.github.actions import annotation, append_summary  # noqa: PLC0415

    print(
        annotation(
            "error",
            str(exc),
            file=_repo_relative(exc.file),
            line=exc.line,
            column=exc.column,
            title="Stage map",
        )
    )
    append_summary(
        actions, f"### Stage map coverage\n\nThe stage map is invalid: `{_md(str(exc))}`\n"
    )


def _repo_relative(file: str | None) -> str | None:
    """An error's file (named from the current folder) as GitHub names it: from the
    top of the repository. None when it is not inside it (then no file is marked)."""
    if file is None:
        return None
    try:
        top = git.toplevel(Path.cwd())
    except UserError:
        return None
    relative = os.path.relpath(os.path.abspath(file), top)
    outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
    return None if outside else Path(relative).as_posix()


def _md(text: str) -> str:
    """Text safe inside a Markdown code span on one line."""
    return _shown(text).replace("`", "'")
