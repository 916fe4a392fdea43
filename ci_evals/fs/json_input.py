"""JSON that came from elsewhere (an artifact, a run folder), parsed so no input crashes.

`json.loads` has failure modes besides `JSONDecodeError`, each a traceback for
whoever reads a file someone else wrote: an integer of more than 4,300 digits is
a `ValueError`, nesting deeper than the recursion limit a `RecursionError`, and
`NaN`, `Infinity` and `1e999` are accepted as floats that then poison every sum.
`parse` turns each into one `UserError` naming the file (and, for a syntax
error, the line and column), and refuses values no ci-evals file holds:
integers of magnitude 2**63 or more; floats not finite or of magnitude 1e15 or
more; `NaN`/`Infinity`; nesting deeper than `MAX_DEPTH` (a results file is about
8 deep; a caller that reads deeper files says so); and, with `text=True`, a lone
surrogate (`"\\ud800"`: valid JSON, but no UTF-8 can encode it).

`read_file` reads such a file first: a regular file only, never through a link
(`O_NOFOLLOW`, then `fstat`: a FIFO, a device or a folder is refused) and at most
`limit` bytes, so a file committed by a PR cannot make the reader wait, or read
until it runs out of memory. `load_file` does both, for every reader of a run
folder's JSON (a results file, a record of links, a shard's MAC).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from pathlib import Path

from ci_evals.errors import UserError

MAX_DEPTH = 64
MAX_INT = 2**63
MAX_FLOAT = 1e15
_SHOWN = 40  # characters of an offending number shown in the message
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """Raised from inside the decoder's hooks; becomes a `UserError`."""


def _int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > 19 or int(digits) >= MAX_INT:  # before int() of 5,000 digits
        raise _Refused(f"the integer {_cut(text)} is out of range (at most 2**63)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or abs(value) >= MAX_FLOAT:
        raise _Refused(f"the number {_cut(text)} is out of range")
    return value


def _constant(name: str) -> object:
    raise _Refused(f"{name} is not a JSON number")


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def parse(
    text: str, *, file: str | os.PathLike[str], max_depth: int = MAX_DEPTH, text_only: bool = False
) -> object:
    """The JSON value of `text`, or a one-line `UserError` about `file`; with
    `text_only`, no string may hold a lone surrogate."""
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"not valid JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno
        ) from None
    except _Refused as exc:
        raise UserError(f"not valid JSON: {exc}", file=file) from None
    except RecursionError:
        raise UserError(f"nested deeper than {max_depth} levels", file=file) from None
    except ValueError as exc:  # anything else the decoder refuses
        raise UserError(f"not valid JSON: {exc}", file=file) from None
    if _depth(value, max_depth) > max_depth:
        raise UserError(f"nested deeper than {max_depth} levels", file=file)
    if text_only and "\\u" in text:  # only an escape can spell a lone surrogate
        _check_text(value, file)
    return value


def _check_text(value: object, file: str | os.PathLike[str]) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise UserError("a string holds a lone surrogate (not Unicode text)", file=file)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def read_file(path: Path, limit: int, *, what: str = "file") -> bytes:
    """The bytes of the regular file `path`, not through a link, at most `limit`."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # ELOOP: the name is a link
        reason = "a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise UserError(f"cannot read the {what}: {reason}", file=path) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which refuses a folder with a traceback
        os.close(fd)
        raise UserError(f"cannot read the {what}: not a regular file", file=path)
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise UserError(
                f"the {what} is {info.st_size} bytes, over the limit of {limit}", file=path
            )
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew while read
        raise UserError(f"the {what} is over the limit of {limit} bytes", file=path)
    return data


def load_file(path: Path, limit: int, *, what: str = "file", max_depth: int = MAX_DEPTH) -> object:
    """`read_file`, then `parse` with `text_only`: the JSON of a file someone else
    wrote (a run folder, an artifact), or a one-line `UserError` naming it."""
    data = read_file(path, limit, what=what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"cannot read the {what}: not UTF-8 text (byte {exc.start})", file=path
        ) from None
    return parse(text, file=path, max_depth=max_depth, text_only=True)


def _depth(value: object, max_depth: int = MAX_DEPTH) -> int:
    """How deep arrays and objects nest in `value`, counted without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if depth > max_depth:
            return depth
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest
