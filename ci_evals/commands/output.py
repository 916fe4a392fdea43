"""What the commands share about their output: `--json`, and `-q`/`-v`.

`--json` (docs/json.md): stdout is exactly one JSON object, whatever happens —
the command's document, or, when it stops on an error, the error document —
and everything written for a person goes to stderr. `main` runs such a
command inside `json_output`, which moves stdout aside and hands the command
an `Emit` on `args.emit`. Each document names its schema
(`"schema": "ci-evals/<command>/<n>"`), shipped in `ci_evals/schemas/cli/`.

`-q`/`-v` set `args.verbosity` (-1, 0, 1): quiet says only the verdict and
errors, verbose adds per-stage detail.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, TextIO

from ci_evals.errors import EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, UserError

QUIET, NORMAL, VERBOSE = -1, 0, 1

# The version of each command's document; a change a reader would notice is a new one.
SCHEMAS = {
    "run": "ci-evals/run/1",
    "merge": "ci-evals/merge/1",
    "grade": "ci-evals/grade/1",
    "check": "ci-evals/check/1",
    "check-coverage": "ci-evals/check-coverage/1",
    "plan": "ci-evals/plan/1",
    "report": "ci-evals/report/1",
    "error": "ci-evals/error/1",
}


def add_json(parser: argparse.ArgumentParser, command: str, what: str) -> None:
    """`--json` for `command`, whose document says `what`."""
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print one JSON object on stdout ({what}; schema {SCHEMAS[command]}, "
        "docs/json.md); what a person reads goes to stderr",
    )
    parser.set_defaults(json_command=command, emit=None)


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    """`-q/--quiet` and `-v/--verbose`, into `args.verbosity`."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=QUIET,
        help="say only the verdict and errors (no progress, no tables)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=VERBOSE,
        help="say more: every stage's criteria, and the tools it calls as it runs",
    )
    parser.set_defaults(verbosity=NORMAL)


def problem(error: UserError) -> dict[str, Any]:
    """A `UserError` as JSON: where (file, line, column, field), what, what to do."""
    return {
        "file": error.file,
        "line": error.line,
        "column": error.column,
        "field": error.field,
        "message": error.message,
        "hint": error.hint,
        "text": str(error),
    }


class Emit:
    """Writes the one JSON document of a `--json` command (at most one)."""

    def __init__(self, command: str, stream: TextIO) -> None:
        self.command = command
        self.stream = stream
        self.done = False

    def __call__(self, exit_code: int, document: dict[str, Any]) -> None:
        self._write({"schema": SCHEMAS[self.command], "exit_code": exit_code, **document})

    def error(self, exit_code: int, problems: list[dict[str, Any]]) -> None:
        self._write(
            {
                "schema": SCHEMAS["error"],
                "exit_code": exit_code,
                "command": self.command,
                "problems": problems,
            }
        )

    def _write(self, document: dict[str, Any]) -> None:
        if self.done:  # a second document would make stdout unreadable
            raise AssertionError("a --json command emitted twice")
        self.done = True
        import json  # noqa: PLC0415 - the hook's commands import this module; only --json pays

        self.stream.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
        self.stream.flush()


@contextlib.contextmanager
def json_output(args: argparse.Namespace) -> Iterator[None]:
    """Run a command with `--json`: stdout to stderr meanwhile, `args.emit` set, and
    the error document when it stops without one (a command that returns without
    one is a bug: exit 3, never an empty stdout a reader could take for success)."""
    emit = Emit(args.json_command, sys.stdout)
    args.emit = emit
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
        if not emit.done:  # fail closed: never an empty stdout a reader takes for success
            raise AssertionError(f"`{args.json_command} --json` wrote no document")
    except UserError as exc:
        if not emit.done:
            emit.error(exc.exit_code, [problem(exc)])
        raise
    except KeyboardInterrupt:
        if not emit.done:
            emit.error(EXIT_INTERRUPTED, [])
        raise
    except BaseException as exc:
        if not emit.done and not isinstance(exc, SystemExit):
            emit.error(EXIT_BUG, [_bug(exc)])
        raise


def json_usage_errors(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """With `--json` in `argv` for a command that takes it, argparse's own refusals
    (an unknown option, a missing argument) are the error document too: argparse
    would exit 2 with an empty stdout, which a reader cannot parse."""
    command = parser.get_default("json_command")
    if command is None or "--json" not in argv:
        return

    def error(message: str) -> NoReturn:
        hint = f"see `{parser.prog} --help`"
        Emit(command, sys.stdout).error(EXIT_USAGE, [problem(UserError(message, hint=hint))])
        parser.print_usage(sys.stderr)
        parser.exit(EXIT_USAGE, f"{parser.prog}: error: {message}\n")

    parser.error = error  # type: ignore[method-assign]


def _bug(exc: BaseException) -> dict[str, Any]:
    return problem(UserError(f"unexpected error: {type(exc).__name__}: {exc}"))
