"""`ci-evals gc`: remove what a crashed ci-evals left: its temp folders, its containers.

First the temp folders (`$TMPDIR/ci-evals-<run-id>-*`: workspaces and the
agent's HOME) whose owning process is gone (`fs.abandoned`); the next run
removes those too. Then, in the Docker engine, only containers labelled
`ci-evals=1` are considered, and of those only the ones whose owning process
is gone (on this host), or with `--older-than` those older than that many
minutes (whatever their owner; the only test for another host's). `--dry-run`
lists them. Exit 0 when nothing is left, 1 when some could not be removed, 2
when the engine cannot be reached.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ci_evals.errors import EXIT_FAIL, EXIT_OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than",
        type=float,
        metavar="MINUTES",
        help="also remove ci-evals containers older than this, even with a live owner",
    )
    parser.add_argument("--dry-run", action="store_true", help="list them, remove nothing")


def run(args: argparse.Namespace) -> int:
    from ci_evals.errors import UserError  # noqa: PLC0415
    from ci_evals.fs import abandoned  # noqa: PLC0415
    from ci_evals.sandbox.docker import engine, leftovers  # noqa: PLC0415

    folders = abandoned.find(Path(tempfile.gettempdir()))
    for folder in folders:
        verb = "would remove" if args.dry_run else "removing"
        print(f"{verb} {folder}: its run's process is gone", flush=True)
    folder_problems = [] if args.dry_run else abandoned.remove(folders)
    for problem in folder_problems:
        print(f"ci-evals gc: could not remove {problem}", flush=True)
    why = engine.available()
    if why is not None:
        raise UserError(why)
    if args.older_than is not None and not args.older_than >= 0:
        raise UserError("--older-than must be a number of minutes, 0 or more")
    found = leftovers.find(None if args.older_than is None else args.older_than * 60)
    for item in found:
        run_id = f" (run {item.run_id})" if item.run_id else ""
        verb = "would remove" if args.dry_run else "removing"
        print(f"{verb} {item.name} {item.id[:12]}{run_id}: {item.why}", flush=True)
    if args.dry_run:
        return EXIT_OK
    problems = leftovers.remove(found)
    for problem in problems:
        print(f"ci-evals gc: could not remove {problem}", flush=True)
    print(
        f"removed {len(folders) - len(folder_problems)} temp folder(s), "
        f"{len(found) - len(problems)} container(s)",
        flush=True,
    )
    return EXIT_FAIL if problems or folder_problems else EXIT_OK
