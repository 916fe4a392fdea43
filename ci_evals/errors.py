"""The one user-facing error type, and the top-level handler that prints it.

A `UserError` is a mistake the user can fix (bad config, unknown stage, missing
key). It prints as one line, `FILE:LINE:COL: FIELD: message`, with no traceback.
Anything else is a bug in ci-evals: the handler writes the traceback to a log
file and says where it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ci_evals.text import display_path, inert

EXIT_OK = 0
EXIT_FAIL = 1  # the check ran and found problems (uncovered files, failed stages)
EXIT_USAGE = 2  # the input is wrong: config error, unknown option, unknown stage
EXIT_BUG = 3  # an unexpected error inside ci-evals
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the user's input, reported as one line.

    `file`, `line` (1-based), `column` (1-based) and `field` locate it (an
    absolute `file` is shown relative to the current folder); `hint` says what
    to do about it.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | os.PathLike[str] | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        hint: str | None = None,
        exit_code: int = EXIT_USAGE,
    ) -> None:
        super().__init__(message)
        self.message = message
        # An absolute path is shown from the current folder, as every message shows
        # paths (`text.display_path`); a name given relative is the caller's choice.
        self.file = None if file is None else os.fspath(file)
        if self.file is not None and os.path.isabs(self.file):
            self.file = display_path(self.file)
        self.line = line
        self.column = column
        self.field = field
        self.hint = hint
        self.exit_code = exit_code

    @property
    def location(self) -> str:
        """`FILE:LINE:COL`, as much of it as is known ('' when nothing is)."""
        if self.file is None:
            return ""
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        text = self.message
        if self.field:
            text = f"{self.field}: {text}"
        if self.location:
            text = f"{self.location}: {text}"
        if self.hint:
            text = f"{text} ({self.hint})"
        # One line, always, and never a workflow command: a value may come from a
        # results file or a fork's artifact (`text.inert`).
        return inert(text)


class Problems:
    """Where a loader puts the mistakes it can go on past.

    By default `report` raises at once (what `run` wants: one line, nothing
    started); `Problems(collect=True)` keeps them instead, so `ci-evals check`
    can list every problem from the very same checks.
    """

    def __init__(self, *, collect: bool = False) -> None:
        self.collect = collect
        self.found: list[UserError] = []

    def report(self, error: UserError) -> None:
        if not self.collect:
            raise error
        self.found.append(error)


def print_user_error(exc: UserError, prog: str = "ci-evals") -> None:
    """`PROG: error: ...` on stderr: how every user error is shown (a command that
    goes on past one, as `check-coverage` past one map, shows it so too)."""
    print(f"{prog}: error: {exc}", file=sys.stderr)


@contextlib.contextmanager
def error_handler(prog: str = "ci-evals") -> Iterator[list[int]]:
    """Turn exceptions into an exit code stored in the yielded one-item list.

    Used by `main()`: a `UserError` prints one line, Ctrl-C exits 130, anything
    else is logged with its traceback to a file whose path is printed.
    """
    code = [EXIT_OK]
    try:
        yield code
    except UserError as exc:
        print_user_error(exc, prog)
        code[0] = exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        code[0] = EXIT_INTERRUPTED
    except BrokenPipeError:
        # `ci-evals ... | head`: the reader went away; nothing left to say.
        with contextlib.suppress(OSError):
            sys.stderr.close()
        code[0] = EXIT_FAIL
    except Exception as exc:  # the last line of defence: a bug, not user input
        if _interrupted(exc):  # Ctrl-C/SIGTERM inside an import, wrapped by Python
            print(f"{prog}: interrupted", file=sys.stderr)
            code[0] = EXIT_INTERRUPTED
            return
        log = write_traceback(exc)
        print(
            f"{prog}: unexpected error: {type(exc).__name__}: {inert(str(exc))} "
            f"(this is a bug in ci-evals; traceback in {log})",
            file=sys.stderr,
        )
        code[0] = EXIT_BUG


# Signals the entry point turned into a KeyboardInterrupt (`note_interrupt`).
_RAISED: list[int] = []


def note_interrupt(signum: int) -> None:
    """Remember that a signal was raised as a KeyboardInterrupt: where library code
    swallows it into an exception of its own, the handler still knows."""
    _RAISED.append(signum)


def _interrupted(exc: BaseException) -> bool:
    """Whether a `KeyboardInterrupt` caused `exc`. Python 3.11 wraps one raised in
    a class's `__set_name__` (a signal while pydantic builds its models, say) in
    `RuntimeError("Error calling __set_name__ ...")`, the interrupt its cause;
    pydantic-core keeps only its text (`SchemaError: ... KeyboardInterrupt:`),
    so an interrupt the entry point raised (`note_interrupt`) counts too."""
    if _RAISED:
        return True
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def write_traceback(exc: BaseException) -> Path:
    """`exc`'s traceback in a new temporary file, for a one-line message to point at."""
    # Imported here: every command imports this module, only a crash needs these.
    import tempfile  # noqa: PLC0415
    import traceback  # noqa: PLC0415

    fd, name = tempfile.mkstemp(prefix="ci-evals-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return Path(name)
