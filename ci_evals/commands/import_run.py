"""`ci-evals import plugin-eval FILE`: a `claude plugin eval` run as a ci-evals run folder.

    claude plugin eval my-plugin --trust-plugin --json out.json
    ci-evals import plugin-eval out.json --out .ci-evals/runs/plugin-eval
    ci-evals report .ci-evals/runs/plugin-eval --baseline .ci-evals/baseline --comment

Reads the CLI's aggregate-result.json (`--json PATH`, or the one in its results
folder) as hostile input (`interop.plugin_eval_doc`: capped, every field checked,
a document that disagrees with itself refused with one line naming its JSON path)
and writes the run folder `report`, the sticky comment and `report --baseline`
read: `results.json` (`interop.plugin_eval_import`: each case a case unit, failing
closed where the CLI does not) and the document itself, as `aggregate-result.json`.
A folder that is not empty is never written into, and the folder is written whole or
not at all (a temporary folder beside it, renamed; removed on any failure or Ctrl-C).

Exit 0 when the imported run passes under ci-evals' rule (every case's verdict
passed, in a finished document), 1 when it does not, 2 when the document cannot
be imported (docs/plugin-evals.md, *Results both ways*).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import EXIT_OK, UserError
from ci_evals.text import inert

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult

DOCUMENT = "aggregate-result.json"  # the imported document, as read, beside results.json
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    plugin_eval = kinds.add_parser(
        "plugin-eval",
        help="a `claude plugin eval` aggregate-result.json (its --json output) as a run folder",
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    plugin_eval.add_argument(
        "file", type=Path, metavar="FILE", help="the CLI's aggregate-result.json (schemaVersion 1)"
    )
    plugin_eval.add_argument(
        "--out",
        type=Path,
        metavar="RUN_DIR",
        help="the run folder to write, new or empty (default: .ci-evals/runs/<run-id>)",
    )
    plugin_eval.add_argument(
        "--commit",
        metavar="SHA",
        help="the commit the CLI evaluated (full hex), recorded so `report --baseline` can "
        "tell a stale baseline (default: not recorded)",
    )


def run(args: argparse.Namespace) -> int:
    from ci_evals.fs.atomic import write_atomic  # noqa: PLC0415
    from ci_evals.interop.plugin_eval_doc import read_document  # noqa: PLC0415
    from ci_evals.interop.plugin_eval_import import imported_run  # noqa: PLC0415
    from ci_evals.results.model import write_results  # noqa: PLC0415
    from ci_evals.results.summary import exit_code  # noqa: PLC0415

    if args.commit is not None and not _COMMIT.fullmatch(args.commit):
        raise UserError(
            f"{args.commit[:80]!r} is not a full commit id",
            field="--commit",
            hint="git rev-parse HEAD",
        )
    document, data = read_document(args.file)
    result = imported_run(document, commit=args.commit)
    out = args.out if args.out is not None else Path(".ci-evals") / "runs" / result.run_id
    _check_empty(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        # Written whole or not at all, even on Ctrl-C: a temporary folder beside it,
        # renamed over the new (or empty) one.
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            write_atomic(staging / DOCUMENT, data, mode=0o644)
            write_results(staging, result)
            staging.chmod(0o755)
            os.replace(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", file=out, field="--out") from None
    code = exit_code(result)
    verdict = (
        "passed"
        if code == EXIT_OK
        else ("not finished" if result.status != "completed" else "not passed")
    )
    print(
        f"imported {len(document.cases)} case(s) of claude plugin eval "
        f"{inert(document.claude_version)} into {out}: {verdict}"
    )
    for line in _fail_closed(result):
        print(f"  {inert(line)}")  # the document's text: never a workflow command
    print(f"report it: ci-evals report {out}")
    return code


def _check_empty(out: Path) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UserError("not a folder", file=out, field="--out", hint="name a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        raise UserError(
            "the folder is not empty: an import never writes over a run",
            file=out,
            field="--out",
            hint="name a new or empty folder",
        )


def _fail_closed(result: RunResult) -> list[str]:
    """Where the import reads the document more strictly than the CLI did, one line each."""
    lines = []
    errored = [
        f"{result.label_of(scenario)}: {stage.error}"
        for scenario in result.scenarios
        for stage in scenario.stages
        if stage.status in ("error", "skipped") and stage.error
    ]
    if errored:
        lines.append(f"{len(errored)} run(s) are errors here, never a pass (the CLI graded some):")
        lines += [f"  {line}" for line in errored[:10]]
    imported = result.imported_from
    refusal = imported.baseline_refusal if imported else None
    if refusal:
        lines.append(f"not usable as a baseline: {refusal}")
    return lines
