"""JSON that came from elsewhere (an artifact, a run folder), parsed so no input crashes.

`json.loads` has failure modes besides `JSONDecodeError`, each a traceback
for whoever reads a file someone else wrote: an integer of more than 4,300
digits is a `ValueError` (CPython's int-to-string limit), nesting deeper than
the interpreter's recursion limit a `RecursionError`, and `NaN`, `Infinity`
and `1e999` are accepted as floats that then poison every sum. `parse` turns
each into one `UserError` naming the file (and, for a syntax error, the line
and column), and refuses values no ci-evals file holds:

- numbers: integers of magnitude 2**63 or more, floats that are not finite
  or of magnitude 1e15 or more (costs, seconds, scores and token counts are
  all far below), and the non-JSON constants `NaN`/`Infinity`;
- nesting deeper than `MAX_DEPTH` arrays and objects (a results file is
  about 8 deep).
"""

from __future__ import annotations

import json
import math
import os

from ci_evals.errors import UserError

MAX_DEPTH = 64
MAX_INT = 2**63
MAX_FLOAT = 1e15
_SHOWN = 40  # characters of an offending number shown in the message


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


def parse(text: str, *, file: str | os.PathLike[str]) -> object:
    """The JSON value of `text`, or a one-line `UserError` about `file`."""
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"not valid JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno
        ) from None
    except _Refused as exc:
        raise UserError(f"not valid JSON: {exc}", file=file) from None
    except RecursionError:
        raise UserError(f"nested deeper than {MAX_DEPTH} levels", file=file) from None
    except ValueError as exc:  # anything else the decoder refuses
        raise UserError(f"not valid JSON: {exc}", file=file) from None
    if _depth(value) > MAX_DEPTH:
        raise UserError(f"nested deeper than {MAX_DEPTH} levels", file=file)
    return value


def _depth(value: object) -> int:
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
        if depth > MAX_DEPTH:
            return depth
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest
