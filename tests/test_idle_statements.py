"""No statement that is only a literal, besides a docstring.

A string on a line of its own is a statement that does nothing: the half of a
message whose `(` closed a line early (`github/artifacts.py` once showed users
"... (push, schedule or " and nothing more). ruff's B018 does not report string
literals (they may be docstrings) and vulture only code after a `return`; this
reports any literal statement that is not the first of a module, class or
function, wherever it stands."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.paths import DATA, REPO

# Our Python: the package, its tests, benchmarks and CI scripts (tests/data holds
# plugins and fixtures, other people's code as users write it).
CHECKED = ("ci_evals", "tests", "benchmarks", ".ci")
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def idle_statements(tree: ast.AST) -> Iterator[ast.Expr]:
    """The statements of `tree` that are a literal (`...` and docstrings aside)."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for index, statement in enumerate(block):
                if not isinstance(statement, ast.Expr):
                    continue
                value = statement.value
                docstring = index == 0 and name == "body" and isinstance(node, _DOCUMENTED)
                literal = isinstance(value, ast.JoinedStr) or (
                    isinstance(value, ast.Constant) and value.value is not Ellipsis
                )
                if literal and not docstring:
                    yield statement


def test_the_check_finds_the_half_of_a_message_left_on_its_own_line() -> None:
    source = (
        '"""Doc."""\n'
        "def why(branch):\n"
        '    """Doc."""\n'
        '    message = f"no run on {branch} (push, schedule or "\n'
        '    "workflow_dispatch)"\n'
        "    return message\n"
        "class C:\n"
        '    """Doc."""\n'
        "    x = 1\n"
        '    "an attribute docstring is a literal statement too"\n'
        "    def f(self):\n"
        "        ...\n"
    )
    found = [(s.lineno, ast.unparse(s)) for s in idle_statements(ast.parse(source))]
    assert found == [
        (5, "'workflow_dispatch)'"),
        (10, "'an attribute docstring is a literal statement too'"),
    ]


def test_no_statement_of_ours_is_only_a_literal() -> None:
    found = []
    for top in CHECKED:
        for path in sorted((REPO / top).rglob("*.py")):
            if path.is_relative_to(DATA) or ".venv" in path.parts:
                continue
            tree = ast.parse(path.read_bytes(), str(path))
            found += [
                f"{path.relative_to(REPO)}:{s.lineno}: {ast.unparse(s)[:60]}"
                for s in idle_statements(tree)
            ]
    assert not found, "statements that do nothing (join the string to the one above?):\n" + (
        "\n".join(found)
    )
