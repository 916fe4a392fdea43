"""`ci-evals report RUN_DIR`: JUnit XML and a Markdown summary of a saved run.

Reads only `RUN_DIR/results.json` — no suite, no agent, no model — so a
trusted CI job can report on a run made elsewhere. Files are written whole or
not at all (a temp file in the same folder, then renamed over the target).

Exit 0 when every stage passed or completed in a finished run, 1 otherwise, 2
when the results file is missing, unreadable or inconsistent
(`ci_evals.report.verify`: the reports are still written, headed `error`).
Text from the results file is never a workflow command: the printed summary
sits inside `::stop-commands::` (`github.actions.commands_stopped`), every
other line that quotes the file goes through `text.inert`. A PR comment that
could not be posted (`--comment`) is a warning, never the exit code.

Every option (`--baseline`, `--plugin-eval-json`, `--comment`, the Actions
outputs and annotations): docs/report.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.commands import output
from ci_evals.errors import EXIT_FAIL, EXIT_OK, EXIT_USAGE, UserError
from ci_evals.fs.atomic import write_atomic
from ci_evals.text import inert

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ci_evals.github.actions import ActionsEnv
    from ci_evals.report.baseline import Comparison, NoBaseline
    from ci_evals.results.model import RunResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a run folder (or its results.json)"
    )
    parser.add_argument(
        "--junit", type=Path, metavar="FILE", help="write JUnit XML for CI test reporters"
    )
    parser.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="write the Markdown summary here instead of printing it",
    )
    parser.add_argument(
        "--html",
        type=Path,
        metavar="DIR",
        help="write a static site of the run here: every stage's criteria, files and "
        "trajectory (self-contained: open DIR/index.html, or upload DIR as an artifact)",
    )
    parser.add_argument(
        "--html-url",
        metavar="URL",
        help="where the --html site will be served (an https:// artifact or Pages URL): the "
        "summary and the PR comment link to it",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="RUN",
        help="compare with this run (a run folder, a results file, or a folder written by "
        "`ci-evals baseline fetch`): regressions and improvements per stage and criterion",
    )
    parser.add_argument(
        "--base",
        metavar="REV",
        help="with --baseline: the base the change is compared with, to tell a stale baseline "
        "(default: the merge base the run recorded with `run --base`)",
    )
    parser.add_argument(
        "--fixtures",
        type=Path,
        metavar="FILE",
        help="the check-fixtures.json of the fixtures the change touched (compute-stage's "
        "`fixture_stages`): shown as *Changed fixtures*; one that did not pass, or a missing "
        "file, fails the report",
    )
    parser.add_argument(
        "--comment",
        action="store_true",
        help="in GitHub Actions on a pull request: post the summary as a sticky PR comment "
        "(needs GITHUB_TOKEN and `pull-requests: write`)",
    )
    parser.add_argument(
        "--plugin-eval-json",
        type=Path,
        metavar="PATH",
        help="also write the run as a `claude plugin eval` aggregate-result.json "
        "(schemaVersion 1), for tooling that reads the CLI's --json",
    )
    add_comment_key(parser)
    _add_flakes(parser)
    output.add_json(parser, "report", "the run's verdict, counts and cost, and the summary")


def _add_flakes(parser: argparse.ArgumentParser) -> None:
    """`--history`, `--flaky-bounds`, `--gate`: the flake ledger (report's own: not
    `comment`'s nor `forecast`'s, whose `--history` prices the run)."""
    parser.add_argument(
        "--history",
        type=Path,
        action="append",
        metavar="RUN",
        help="a recent run of the base branch (repeatable: run folders, results files, "
        "`baseline fetch` folders): each criterion's pass rate on main, shown beside its "
        "delta ('fails 2 of 10 on main (flaky)')",
    )
    parser.add_argument(
        "--flaky-bounds",
        type=_bounds,
        metavar="LOW,HIGH",
        help="a criterion whose pass rate on main lies strictly between these is flaky "
        "(default: 0,1: it both passed and failed)",
    )
    parser.add_argument(
        "--gate",
        choices=("all", "stable"),
        help="stable (needs --history): a stage failing only on criteria flaky on main "
        "does not fail the report; they are listed as not gated (default: the suite's "
        "`gate:` as the run recorded it, else all)",
    )


def add_comment_key(parser: argparse.ArgumentParser) -> None:
    """`--comment-key`, shared with `ci-evals comment` and `ci-evals forecast`."""
    parser.add_argument(
        "--comment-key",
        default="ci-evals",
        metavar="KEY",
        help="the sticky comment to keep up to date: one per key (default: ci-evals)",
    )


def _bounds(text: str) -> tuple[float, float]:
    from ci_evals.report.flakes import parse_bounds  # noqa: PLC0415

    try:
        return parse_bounds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:  # noqa: PLR0912, PLR0915 - one step per option
    from ci_evals.commands.baseline_report import (  # noqa: PLC0415
        against_baseline,
        baseline_comparison,
        history_ledger,
    )
    from ci_evals.github.actions import ActionsEnv, commands_stopped  # noqa: PLC0415
    from ci_evals.report import flakes, run_passed  # noqa: PLC0415 - pydantic, the runner
    from ci_evals.report.imported_markdown import imported_section  # noqa: PLC0415
    from ci_evals.report.junit import junit_xml  # noqa: PLC0415
    from ci_evals.report.markdown import markdown_summary  # noqa: PLC0415
    from ci_evals.report.verify import problems  # noqa: PLC0415
    from ci_evals.results.model import read_results  # noqa: PLC0415

    if args.base is not None and args.baseline is None:
        raise UserError("--base compares with a baseline: give --baseline RUN too", field="--base")
    if args.gate == "stable" and not args.history:
        raise UserError(
            "--gate stable needs main's recent runs", field="--gate", hint="add --history RUN"
        )
    if args.comment:
        check_comment_key(args.comment_key)  # before any file is written
    link = _html_link(args.html_url)
    result = read_results(args.run_dir)
    found = problems(result)
    gate, gate_note = flakes.gate_of(result, args.gate, args.history)
    if args.flaky_bounds is None:  # the suite's, as the run recorded them
        args.flaky_bounds = result.flaky_bounds
    compared = None if found else baseline_comparison(result, args)
    baseline = against_baseline(result, args, found, compared=compared)
    imported = imported_section(result)  # "" unless imported from claude plugin eval
    markdown = markdown_summary(result, found) + "\n" + (imported and imported + "\n")
    markdown += link + baseline
    only_flaky = False
    markdown += gate_note and "\n" + gate_note + "\n"
    if gate == "stable" and not found:
        ledger = history_ledger(args)
        assert ledger is not None
        lines, only_flaky = flakes.ungated(result, ledger)
        markdown += "\n" + flakes.annotate(lines) if lines else ""
        only_flaky = only_flaky and bool(lines) and result.status == "completed"
    if args.html is not None:
        _write_html(result, args, found, None if compared is None else compared[0])
    fixtures_passed = True
    if args.fixtures is not None:
        section, fixtures_passed = _fixtures(args.fixtures)
        markdown += "\n" + section
    if args.junit is not None:
        write_output(args.junit, junit_xml(result, found), option="--junit")
    if args.plugin_eval_json is not None:
        _plugin_eval_json(result, found, args.plugin_eval_json)
    env = ActionsEnv.from_environ()
    if args.markdown is not None:
        write_output(args.markdown, markdown, option="--markdown")
    else:
        with commands_stopped(env):  # the summary quotes the results file
            print(markdown, end="")
    if env is not None:
        _to_actions(env, result, found, markdown)
    if args.comment:
        post_comment(env, markdown, key=args.comment_key)
    passed = run_passed(result, found) or only_flaky  # --gate stable: flaky failures only
    code = EXIT_OK if passed and fixtures_passed else EXIT_FAIL
    if found:
        print(
            f"ci-evals report: {args.run_dir}: the results file is inconsistent "
            f"({len(found)} problem(s), listed in the report): {inert(found[0])}",
            file=sys.stderr,
        )
        code = EXIT_USAGE
    if args.emit is not None:
        args.emit(code, _document(result, args, found, fixtures_passed, markdown))
    return code


def _to_actions(env: ActionsEnv, result: RunResult, found: Sequence[str], markdown: str) -> None:
    """In Actions: the job summary, the annotations, and the run's cost and tokens as
    step outputs (not an inconsistent file's numbers: they are not the run's)."""
    from ci_evals.github.actions import append_summary, write_outputs  # noqa: PLC0415
    from ci_evals.report.costs import usage_outputs  # noqa: PLC0415

    append_summary(env, markdown)
    _annotate(result, found)
    if not found:
        write_outputs(env, usage_outputs(result))


def _document(
    result: RunResult,
    args: argparse.Namespace,
    found: Sequence[str],
    fixtures_passed: bool,
    markdown: str,
) -> dict[str, object]:
    """`--json`: the run as `run --json` says it, what the report found and wrote."""
    from ci_evals.results.outcome import run_document  # noqa: PLC0415

    run_dir = args.run_dir if args.run_dir.is_dir() else args.run_dir.parent
    written = {
        "junit": args.junit,
        "markdown": args.markdown,
        "html": args.html,
        "plugin_eval_json": None if found else args.plugin_eval_json,
    }
    run = run_document(result, run_dir)
    return {
        # An inconsistent file has no verdict a reader may believe.
        "verdict": "error" if found else run["verdict"],
        "inconsistencies": list(found),
        "fixtures_passed": None if args.fixtures is None else fixtures_passed,
        "written": {key: None if path is None else str(path) for key, path in written.items()},
        "markdown": markdown,
        "run": run,
    }


def _plugin_eval_json(result: RunResult, found: Sequence[str], path: Path) -> None:
    """`--plugin-eval-json`: the run in the CLI's schema; never from a file whose numbers
    disagree (the report says why, and exits 2)."""
    from ci_evals.interop.plugin_eval_export import dump_document  # noqa: PLC0415

    if found:
        print(
            "ci-evals report: --plugin-eval-json: not written: the results file is inconsistent",
            file=sys.stderr,
        )
        return
    write_output(path, dump_document(result).decode("utf-8"), option="--plugin-eval-json")


def _fixtures(path: Path) -> tuple[str, bool]:
    """`--fixtures`: the section, and whether the fixtures passed (a missing file: no)."""
    from ci_evals.report.fixtures import fixtures_section  # noqa: PLC0415

    return fixtures_section(read_fixtures_report(path), str(path))


def read_fixtures_report(path: Path) -> list[dict[str, object]] | None:
    """check-fixtures' report as the rows `report.fixtures` shows (None: missing,
    unreadable or not such a report)."""
    from ci_evals.fs import json_input  # noqa: PLC0415
    from ci_evals.report.fixtures import fixture_rows  # noqa: PLC0415
    from ci_evals.results.model import MAX_RESULTS_BYTES  # noqa: PLC0415

    try:  # an artifact: a FIFO or a link to /dev/zero must not stall the report
        report = json_input.load_file(path, MAX_RESULTS_BYTES, what="fixtures report")
    except UserError:
        return None
    rows = fixture_rows(report)
    if rows is None:
        return None
    return [{"stage": k, "fixture": n, "verdict": v, "reason": r} for k, n, v, r in rows]


def _html_link(url: str | None) -> str:
    """The summary's line linking the `--html` site (only an https URL: no other scheme)."""
    if url is None:
        return ""
    from urllib.parse import urlsplit  # noqa: PLC0415

    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc or any(c in url for c in " <>()[]\n\"'`"):
        raise UserError(
            f"not an https URL: {url!r}",
            field="--html-url",
            hint="the artifact's or the Pages site's https:// address",
        )
    return f"**[The run, stage by stage]({url})**: criteria, files and trajectories (`--html`).\n\n"


def _write_html(
    result: RunResult,
    args: argparse.Namespace,
    found: Sequence[str],
    comparison: Comparison | NoBaseline | None,
) -> None:
    from ci_evals.report.html import Site, write_site  # noqa: PLC0415
    from ci_evals.results.model import RESULTS_FILE, require_path_names  # noqa: PLC0415

    run_dir = args.run_dir if args.run_dir.is_dir() else args.run_dir.parent
    require_path_names(result, run_dir / RESULTS_FILE)  # the site reads the run folder
    baseline_dir = None
    if args.baseline is not None and (args.baseline / "results.json").is_file():
        baseline_dir = args.baseline
    site = Site(result, run_dir, found, comparison=comparison, baseline_dir=baseline_dir)
    index = write_site(site, args.html)
    print(f"ci-evals report: --html: wrote {index}", file=sys.stderr)


def _annotate(result: RunResult, found: Sequence[str]) -> None:
    """`::error`/`::warning` for each stage that did not pass, at most 10 per level.

    On stderr, because stdout may be the Markdown summary; the runner reads
    workflow commands from both. Every stage is also in the summary's *Not passed*.
    """
    from ci_evals.github.actions import annotation, capped  # noqa: PLC0415
    from ci_evals.report.annotations import run_notes  # noqa: PLC0415

    notes = run_notes(result, found)
    for level in ("error", "warning"):
        lines = [annotation(level, n.message, title=n.title) for n in notes if n.level == level]
        for line in capped(lines):
            print(line, file=sys.stderr)


def check_comment_key(key: str) -> None:
    from ci_evals.github.comment import sticky_marker  # noqa: PLC0415 - urllib

    sticky_marker(key)  # a UserError names the rule


def post_comment(env: ActionsEnv | None, markdown: str, *, key: str) -> None:
    """Post or update the sticky PR comment; one line on stderr says what happened.

    stderr, because stdout may be the Markdown summary itself.
    """
    from ci_evals.github.actions import (  # noqa: PLC0415
        annotation,
        append_summary,
        commands_stopped,
    )
    from ci_evals.github.comment import (  # noqa: PLC0415 - urllib
        CommentSettings,
        comment_on_pull_request,
    )

    if env is None:
        note = "no PR comment: not running in GitHub Actions"
    else:
        try:
            note = comment_on_pull_request(
                markdown,
                event_name=env.event_name,
                event_path=env.event_path,
                settings=CommentSettings.from_environ(),
                marker_key=key,
            )
        except UserError as exc:
            # The verdict is the run's: a comment GitHub would not take now turns
            # no passing job red. Said where the reader looks; the summary has it all.
            said = inert(exc.message)
            print(f"ci-evals report: --comment: warning: not posted: {said}", file=sys.stderr)
            with commands_stopped(env):
                print(annotation("warning", f"the PR comment was not posted: {said}"))
            append_summary(env, f"\n> ci-evals: the PR comment was not posted: {said}\n")
            return
    print(f"ci-evals report: --comment: {inert(note)}", file=sys.stderr)


def write_output(path: Path, text: str, *, option: str) -> None:
    """Write `text` to `path` (parents created): readers see the old file or the new one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode("utf-8"), mode=0o644)
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", file=path, field=option) from None
