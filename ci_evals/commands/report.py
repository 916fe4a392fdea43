"""`ci-evals report RUN_DIR`: JUnit XML and a Markdown summary of a saved run.

Reads only `RUN_DIR/results.json` — no suite, no agent, no model — so a
trusted CI job can report on a run made elsewhere (docs/report.md). Prints the
Markdown summary unless `--markdown FILE` takes it; `--junit FILE` writes the
JUnit XML for CI test reporters. Files are written whole or not at all (a temp
file in the same folder, then renamed over the target). In GitHub Actions the
summary is also appended to the step summary.

Exit 0 when every stage passed or completed in a finished run, 1 otherwise
(a failed, errored, limited or unfinished stage; an interrupted run), 2 when
the run folder or its results file is missing or unreadable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path

from ci_evals.errors import EXIT_FAIL, EXIT_OK, UserError


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


def run(args: argparse.Namespace) -> int:
    from ci_evals.github_actions import ActionsEnv, append_summary  # noqa: PLC0415
    from ci_evals.report import run_passed  # noqa: PLC0415 - pydantic, the runner
    from ci_evals.report.junit import junit_xml  # noqa: PLC0415
    from ci_evals.report.markdown import markdown_summary  # noqa: PLC0415
    from ci_evals.results import read_results  # noqa: PLC0415

    result = read_results(args.run_dir)
    markdown = markdown_summary(result)
    if args.junit is not None:
        write_atomic(args.junit, junit_xml(result), option="--junit")
    if args.markdown is not None:
        write_atomic(args.markdown, markdown, option="--markdown")
    else:
        print(markdown, end="")
    env = ActionsEnv.from_environ()
    if env is not None:
        append_summary(env, markdown)
    return EXIT_OK if run_passed(result) else EXIT_FAIL


def write_atomic(path: Path, text: str, *, option: str) -> None:
    """Write `text` to `path` (parents created): readers see the old file or the new one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror or exc}", file=path, field=option) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(temp, 0o644)  # mkstemp makes it 0600; the file is a CI artifact
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise UserError(f"cannot write: {exc.strerror or exc}", file=path, field=option) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
