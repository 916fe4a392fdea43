"""Text for one-line messages: the bottom layer, importable from every other.

`one_line` folds every run of whitespace (newlines, tabs) into one space, so
an exception's text, a reviewer's complaint or GitHub's message fits the one
line an error, a criterion or a results field gives it; with `limit`, a longer
line is cut and ends with `ellipsis` (the result then has exactly `limit`
characters).

`display_path` is how a message names a file or folder: relative to the
current folder, as git names paths, whatever form the path was given in.
"""

from __future__ import annotations

import functools
import os
import re


def one_line(text: str, limit: int | None = None, *, ellipsis: str = "...") -> str:
    """`text` on one line, whitespace runs folded to a space; at most `limit` characters."""
    line = " ".join(text.split())
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - len(ellipsis)] + ellipsis


def display_path(path: str | os.PathLike[str], cwd: str | None = None) -> str:
    """`path` as a message shows it: relative to `cwd` (default: the current folder).

    As git does: a path below `cwd` is relative; one elsewhere in the same
    repository work tree (the nearest folder above `cwd` holding `.git`)
    climbs with `..` (`../shared/rubric.md`); anything else — a temp folder
    seen from a repository, a file in another checkout — stays absolute, which
    says more than a row of `../` and reads the same wherever the repository
    was cloned. A path is normalised, never resolved: links are not followed.
    """
    absolute = os.path.abspath(path)
    try:
        here = os.path.abspath(cwd) if cwd is not None else os.getcwd()
    except OSError:  # the current folder was removed
        return absolute
    top = _work_tree_top(here)
    if _is_within(absolute, here) or (top is not None and _is_within(absolute, top)):
        return os.path.relpath(absolute, here)
    return absolute


def _is_within(path: str, folder: str) -> bool:
    return folder in (os.sep, path) or path.startswith(folder + os.sep)


@functools.lru_cache(maxsize=16)
def _work_tree_top(folder: str) -> str | None:
    """The nearest folder from `folder` up that holds `.git` (a folder or a file), or None."""
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


# Characters a log line must not carry raw: C0/C1 controls (a newline starts a
# new line the runner reads as a command; ESC drives the terminal), the Unicode
# line and paragraph separators, and the invisible format characters (bidi
# overrides such as U+202E, zero-width spaces and joiners) that make a name
# read as something else.
_INVISIBLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
    "\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(match.group())
    if named is not None:
        return named
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """Untrusted `text` (a name from a results file, an agent's reason) as an inert part
    of one log line: never a GitHub Actions workflow command, never two lines.

    Controls, line separators and invisible format characters become visible
    escapes (`\\n`, `\\x1b`, `\\u202e`); `::` (what starts a command, and
    separates its parts) becomes `:\\x3a`, and the `#` of `##[` (the runner's
    older syntax, a command anywhere in a line) `\\x23`. What is left reads
    as the text said, with every trick shown.
    """
    escaped = _INVISIBLE.sub(_escape, text)
    # .NET compares culture-sensitively, skipping characters it deems ignorable
    # (variation selectors, combining joiners): so `:` and `#` are escaped when
    # only such characters (never a letter, digit or space) stand between them.
    escaped = _COLONS.sub(lambda m: m.group(1) + "\\x3a", escaped)
    return _HASHES.sub("\\\\x23", escaped)


_COLONS = re.compile(r"(:[^\w\s:]*):")
_HASHES = re.compile(r"#(?=[^\w\s\[]*\[)")
