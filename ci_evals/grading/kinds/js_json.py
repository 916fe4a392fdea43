"""JSON text as JavaScript's `JSON.stringify` writes it (no spaces).

`claude plugin eval` matches `input_match` against a tool call's input, and
shows its judges the trace and the baseline, as `JSON.stringify` writes them.
Python's `json.dumps` differs on numbers (`1.0` for JavaScript's `1`, `1e-07`
for `1e-7`, `1.5e-05` for `0.000015`, integers past 2**53 kept exact) and on
lone surrogates (written raw, which no UTF-8 text can hold); a pattern over
that text, or a judge's prompt, would then differ. Key order is kept, as both
keep insertion order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal

_SAFE_INT = 2**53  # past it a JavaScript number is a float, rounded


def stringify(value: object) -> str:
    """`value` (what `json.loads` returns) as `JSON.stringify(value)` writes it."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        out.append(str(value) if -_SAFE_INT <= value <= _SAFE_INT else number(float(value)))
    elif isinstance(value, float):
        out.append(number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append(("," if i else "") + _string(str(key)) + ":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, Sequence):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"not a JSON value: {type(value).__name__}")


def _string(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    if any("\ud800" <= c <= "\udfff" for c in text):
        # JSON.stringify escapes a lone surrogate (`\ud83d`); a Python str from
        # json.loads holds only lone ones (a pair decodes to one character).
        quoted = "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in quoted)
    return quoted


def number(value: float) -> str:
    """ECMAScript's Number::toString: the shortest digits that read back, in fixed
    notation from 1e-6 up to 1e21 and in exponent notation (`1e-7`, `1e+21`) outside."""
    if math.isnan(value) or math.isinf(value):
        return "null"  # what JSON.stringify writes for them
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = digits_tuple.exponent
    assert isinstance(exponent, int)
    k = len(digits)
    n = exponent + k  # the decimal point sits after n digits
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
