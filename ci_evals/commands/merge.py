"""`ci-evals merge RESULTS... [--out DIR]`: a run's shards into one run folder
(docs/scale-out.md); `report` and `comment` then read it as one run.

Each shard is cross-checked as `report` checks a file (`report.verify`) and
against the graders' files in its folder (`report.evidence`); the merge itself
is `ci_evals.run.merge`. Exit 0 when merged, 2 on a refusal
(different runs, a missing or duplicated shard, an inconsistent file).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.commands import output
from ci_evals.errors import EXIT_OK

if TYPE_CHECKING:
    from ci_evals.run.merge import Merged


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        nargs="+",
        type=Path,
        metavar="RESULTS",
        help="each shard's results file or run folder (with --tasks: its benchmark folder)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(".ci-evals") / "merged",
        metavar="DIR",
        help="the merged run folder (default: .ci-evals/merged)",
    )
    output.add_json(parser, "merge", "the shards and units merged, the merged run's verdict")


def run(args: argparse.Namespace) -> int:
    from ci_evals.report import evidence, verify  # noqa: PLC0415
    from ci_evals.run import merge, shard_mac  # noqa: PLC0415

    key = shard_mac.take_key(os.environ)
    from ci_evals.fs import upload  # noqa: PLC0415

    merged = merge.merge(args.results, args.out.resolve(), verify.problems, evidence.problems, key)
    upload.seal(merged.out, "the merged run folder")  # CI uploads it
    what = "task run(s)' units" if merged.tasks else "unit(s)"
    print(f"merged {merged.shards} shard(s), {merged.units} {what}: {merged.out}")
    if args.emit is not None:
        args.emit(EXIT_OK, _document(merged, signed=key is not None))
    if key is None:  # after the merge: a refusal stays one line
        print(
            f"ci-evals merge: the shards are unsigned (no {shard_mac.KEY_ENV}): each was held "
            "to the evidence in its folder, not to who wrote it; checks, trajectory checks, "
            "contracts and plugin_eval graders were not run again, so their verdicts are as "
            "the shards' results.json say (docs/scale-out.md)",
            file=sys.stderr,
        )
    return EXIT_OK


def _document(merged: Merged, *, signed: bool) -> dict[str, object]:
    """`--json`: what was merged, and the merged run as `run --json` says it (None for
    a `--tasks` benchmark, whose verdicts are its benchmark.json's)."""
    from ci_evals.results.model import read_results  # noqa: PLC0415
    from ci_evals.results.outcome import run_document  # noqa: PLC0415

    run = None if merged.tasks else run_document(read_results(merged.out), merged.out)
    return {
        "out": str(merged.out),
        "shards": merged.shards,
        "units": merged.units,
        "tasks": merged.tasks,
        "signed": signed,
        "verdict": None if run is None else run["verdict"],
        "run": run,
    }
