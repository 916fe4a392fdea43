"""The graded folder as checks see it: the files a glob matches inside it, each
read without following a link out of it, and the messages every check words
alike."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ci_evals.fs.links import Unreadable, read_inside
from ci_evals.grading.kinds.checks.base import CheckOutcome

# Cap what a check reads: a 2 GB "JSON" file written by a runaway agent must
# not take the grader down with it.
MAX_READ_BYTES = 16 * 1024 * 1024


def matches(folder: Path, globs: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Files matching any glob (sorted, deduplicated), and the ones refused as outside.

    `folder` is resolved. A match is inside unless a link on its way leads out;
    links are looked for per folder (cached) and per file, which is ~4x
    cheaper than resolving every path on a 10,000-file workspace.
    """
    prefix = str(folder) + os.sep
    folder_ok: dict[str, bool] = {}

    def inside(path: str) -> bool:
        parent = os.path.dirname(path)
        ok = folder_ok.get(parent)
        if ok is None:
            real = os.path.realpath(parent)
            ok = folder_ok[parent] = real == str(folder) or real.startswith(prefix)
        if ok and os.path.islink(path):
            ok = os.path.realpath(path).startswith(prefix)
        return ok

    found: dict[Path, None] = {}
    outside: set[str] = set()
    for given in globs:
        # Before Python 3.13 a trailing `**` matches folders only.
        pattern = given + "/*" if given == "**" or given.endswith("/**") else given
        for path in folder.glob(pattern):
            text = str(path)
            if not os.path.isfile(text):
                continue
            if inside(text):
                found[path] = None
            else:
                outside.add(text.removeprefix(prefix))
    return sorted(found), sorted(outside)


def outside_note(outside: Sequence[str]) -> str:
    """Files skipped as links out of the folder (e.g. the plugin folders linked into
    the workspace): named, capped, never read."""
    if not outside:
        return ""
    shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
    return f" (skipped, outside the folder: {shown})"


def name_in(folder: Path, path: Path) -> str:
    """`path` as messages name it: relative to the graded folder."""
    return str(path).removeprefix(str(folder) + os.sep)


def parse_json(text: str) -> Any:
    """`json.loads`, with absurd nesting (which the agent controls) as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_text(path: Path) -> str:
    """A matched file's text: `matches` kept it only when its real path lies inside
    the folder, and that real path (no link in it) is what is opened, by descriptor
    from `/`, no link followed (`fs.links.read_inside`): nothing the agent linked is
    read on the host, nor a FIFO, a device or more than `MAX_READ_BYTES`."""
    real = os.path.realpath(path)
    try:
        data = read_inside(Path("/"), real.removeprefix("/"), MAX_READ_BYTES)
    except Unreadable as exc:
        raise ValueError(str(exc)) from None
    return data.decode("utf-8")


def each_file(
    check_id: str,
    globs: Sequence[str],
    folder: Path,
    problem: Callable[[Path, str], str | None],
    passed: str,
) -> CheckOutcome:
    """A check of every file matching `globs` (at least one): `problem(path, name)`
    says what is wrong with one (None: nothing); `passed` is the detail when all pass."""
    files, outside = matches(folder, globs)
    if not files:
        note = outside_note(outside)
        return CheckOutcome(check_id, False, f"no file matches {', '.join(globs)}{note}")
    problems = [p for p in (problem(path, name_in(folder, path)) for path in files) if p]
    if problems:
        return CheckOutcome(check_id, False, "; ".join(problems) + outside_note(outside))
    return CheckOutcome(check_id, True, f"{len(files)} file(s) {passed}" + outside_note(outside))
