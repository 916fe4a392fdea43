"""Module docstrings say why a module exists and link the docs page for the rest.

A docstring over 20 lines had become a second copy of docs/*.md, which drifts
from the page (issue 37 found 76). The test counts the lines of each module
docstring under `ci_evals/`. Fast: files only.
"""

from __future__ import annotations

import ast

from tests.paths import REPO

PACKAGE = REPO / "ci_evals"
MAX_LINES = 20


def docstring_lines() -> dict[str, int]:
    """Lines of each module docstring under ci_evals/, by path relative to it."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if doc is not None:
            found[path.relative_to(PACKAGE).as_posix()] = len(doc.splitlines())
    return found


def test_no_module_docstring_is_over_20_lines() -> None:
    lines = docstring_lines()
    over = {name: n for name, n in lines.items() if n > MAX_LINES}
    assert over == {}, "trim to the why and link the docs page"
    assert set(lines) >= {"selection/units.py", "sandbox/bwrap.py"}  # sanity: the walk found them
