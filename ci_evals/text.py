"""Text for one-line messages: the bottom layer, importable from every other.

`one_line` folds every run of whitespace (newlines, tabs) into one space, so
an exception's text, a reviewer's complaint or GitHub's message fits the one
line an error, a criterion or a results field gives it; with `limit`, a longer
line is cut and ends with `ellipsis` (the result then has exactly `limit`
characters).
"""

from __future__ import annotations


def one_line(text: str, limit: int | None = None, *, ellipsis: str = "...") -> str:
    """`text` on one line, whitespace runs folded to a space; at most `limit` characters."""
    line = " ".join(text.split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - len(ellipsis)] + ellipsis
