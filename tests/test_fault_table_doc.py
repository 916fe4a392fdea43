"""docs/run.md's table of faults names tests that exist.

Each row of *Faults, and what each ends as* says which test shows it
(`path.py::test_name`, or `::test_name` for another test of the file named
before it in the cell). A renamed or removed test would leave a row that no
test shows: every name must be a test function of its file, and every row must
name one. Fast: files only.
"""

from __future__ import annotations

import ast
import re

from tests.paths import REPO

DOC = REPO / "docs" / "run.md"
TESTS = REPO / "tests"
# `run/test_x.py::test_y`, `run/test_x.py` (slow) `::test_y`, or `::test_y` alone.
REFERENCE = re.compile(r"`(?P<file>[\w/]+\.py)?(?:::(?P<test>\w+))?`")


def section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Faults, and what each ends as")
    return text[start : text.index("\n## ", start + 1)]


def rows() -> list[str]:
    """The last cell of every table row that is not a header or a rule."""
    found = []
    for line in section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[-1] in ("shown by", "---"):
            continue
        found.append(cells[-1])
    return found


def functions_in(file: str) -> set[str]:
    tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_every_row_names_tests_that_exist() -> None:
    cells = rows()
    assert len(cells) >= 20, cells  # the model API, the disk, GitHub, shards
    missing = []
    for cell in cells:
        file = None
        named = 0
        for match in REFERENCE.finditer(cell):
            if match["file"] is not None:
                file = match["file"]
                assert (TESTS / file).is_file(), f"{file} (in {cell!r}) does not exist"
            if match["test"] is not None:
                assert file is not None, f"{match[0]} names no file before it: {cell!r}"
                named += 1
                if match["test"] not in functions_in(file):
                    missing.append(f"{file}::{match['test']}")
        assert named or file is not None, f"a row names no test: {cell!r}"
    assert missing == []


def test_the_docker_rows_have_their_heading() -> None:
    assert "\n### Docker\n" in section()
