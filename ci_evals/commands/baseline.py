"""`ci-evals baseline fetch`: the baseline run for `report --baseline`, from GitHub Actions.

    ci-evals baseline fetch --workflow evals.yml --branch main --out .ci-evals/baseline

Downloads the results artifact of the workflow's last successful run on the
branch (`ci_evals.github.artifacts`) into `--out`: `results.json` there, the
whole artifact under `artifact/`, and `baseline-source.json` saying which run
it came from. Reads GITHUB_TOKEN (`actions: read`), GITHUB_REPOSITORY and
GITHUB_API_URL; in Actions it sets the step outputs `found` (true/false) and
`results` (the results file, or empty). No such run or no artifact left: a note, exit 0, and the
report says *No baseline*. A refused artifact (too large, unsafe entries) or
a GitHub error: one line, exit 2 (the report still says why).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ci_evals.errors import EXIT_OK
from ci_evals.github.actions import ActionsEnv, write_outputs
from ci_evals.github.artifacts import (
    DEFAULT_ARTIFACT,
    MAX_ZIP_BYTES,
    FetchRequest,
    fetch_baseline,
)
from ci_evals.github.comment import CommentSettings
from ci_evals.results import RESULTS_FILE


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    fetch = actions.add_parser(
        "fetch",
        help="download the results artifact of the last successful run of a workflow on a branch",
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    fetch.add_argument("--workflow", required=True, help="the workflow file name (evals.yml) or id")
    fetch.add_argument("--branch", required=True, help="the base branch (e.g. main)")
    fetch.add_argument("--out", required=True, type=Path, metavar="DIR", help="an empty folder")
    fetch.add_argument(
        "--artifact",
        default=DEFAULT_ARTIFACT,
        metavar="NAME",
        help=f"the artifact holding the run folder (default: {DEFAULT_ARTIFACT})",
    )
    fetch.add_argument(
        "--max-bytes",
        type=_positive_int,
        default=MAX_ZIP_BYTES,
        metavar="N",
        help=f"refuse a larger artifact zip (default: {MAX_ZIP_BYTES})",
    )


def run(args: argparse.Namespace) -> int:
    request = FetchRequest(
        workflow=args.workflow,
        branch=args.branch,
        out=args.out,
        artifact=args.artifact,
        max_bytes=args.max_bytes,
    )
    source = fetch_baseline(CommentSettings.from_environ(), request)
    env = ActionsEnv.from_environ()
    if env is not None:  # for a later step: `if: steps.baseline.outputs.found == 'true'`
        results = str(args.out / RESULTS_FILE) if source.found else ""
        write_outputs(env, {"found": str(source.found).lower(), "results": results})
    if source.found:
        print(f"{source.line()}: {args.out / RESULTS_FILE}")
    else:
        print(f"ci-evals baseline fetch: {source.line()} (the report will say so)")
    return EXIT_OK
