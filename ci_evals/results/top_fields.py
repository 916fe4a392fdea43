"""The top-level fields of a results file, read (and written) without the model.

`model.read_results` reads a whole run and validates it. Replay needs three
fields of the `results.json` beside a recording (the model asked for, the
endpoint, the start), and a promoted recording (`record promote`) keeps only
those three (written here): no whole run. It is read here as hostile as every
results file (a regular file, not through a link, capped, its JSON parsed by
`fs.json_input`), and the caller checks each field it takes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.atomic import write_atomic

# A results file read for its top-level fields holds no trajectory: far below
# what `model.MAX_RESULTS_BYTES` allows a whole run.
MAX_FIELDS_BYTES = 16 * 1024 * 1024


def read_top_fields(path: Path, *, what: str) -> dict[str, object] | None:
    """The top-level object of the results file `path` (`{}` when it holds another
    JSON value), or None when there is no file. `what` names it in a `UserError`
    (`cannot read the {what}: ...`, `the {what} are not UTF-8 text`)."""
    if not os.path.lexists(path):
        return None
    data = json_input.read_file(path, MAX_FIELDS_BYTES, what=what)
    try:
        value = json_input.parse(data.decode("utf-8"), file=path, text_only=True)
    except UnicodeDecodeError:
        raise UserError(f"the {what} are not UTF-8 text", file=path) from None
    return value if isinstance(value, dict) else {}


def write_top_fields(path: Path, fields: Mapping[str, object]) -> None:
    """A results file holding only `fields` (what `record promote` keeps of a run)."""
    write_atomic(path, (json.dumps(fields, indent=2) + "\n").encode())
