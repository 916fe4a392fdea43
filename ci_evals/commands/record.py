"""`ci-evals record promote RUN_DIR NAME`: a run's recording, made fit to commit.

    ci-evals record promote .ci-evals/runs/<run-id> labsmith-full
    ci-evals run --model replay:recordings/labsmith-full

Copies the model exchanges a run recorded (`run --record`) into
`recordings/NAME/` (`--into` for another folder), keeping only what replay
reads (no headers but the response's content type, no `metadata.user_id`:
nothing that identifies the machine, the account or the session), and of the
run's `results.json` only the model it asked for and the kind of endpoint
that answered. The recording is checked as replay reads it, the copy must
replay the same exchanges, and an existing recording is never overwritten
(docs/replay.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ci_evals.errors import EXIT_OK, UserError

DEFAULT_INTO = Path("recordings")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    promote = actions.add_parser(
        "promote",
        help="copy a run's recording into recordings/NAME/, fit to commit",
        description=__doc__.split("\n\n", 1)[0] if __doc__ else None,
    )
    promote.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a run made with --record (or its .jsonl)"
    )
    promote.add_argument("name", metavar="NAME", help="the recording's folder name")
    promote.add_argument(
        "--into",
        type=Path,
        default=DEFAULT_INTO,
        metavar="DIR",
        help=f"where recordings live (default: {DEFAULT_INTO}/)",
    )


def run(args: argparse.Namespace) -> int:
    from ci_evals.endpoints.replay.promote import promote  # noqa: PLC0415 - only when asked

    name = args.name
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise UserError(f"{name!r} is not a folder name", field="NAME", hint="e.g. labsmith-full")
    done = promote(args.run_dir, args.into / name)
    results = ", results.json (the model and the endpoint's kind)" if done.with_results else ""
    print(
        f"promoted {done.exchanges} exchange(s) to {done.folder}/"
        f" (only what replay reads kept{results})"
    )
    print(f"replay it: ci-evals run --model replay:{done.folder}")
    return EXIT_OK
