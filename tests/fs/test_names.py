"""`fs.names`: the one rule for an id that becomes a path component."""

from __future__ import annotations

import pytest

from ci_evals.fs.names import MAX_NAME, name_problem


@pytest.mark.parametrize("name", ["acme", "Acme.Corp_2", "4-s4", "r12", "x" * MAX_NAME])
def test_a_name_is_one_safe_component(name: str) -> None:
    assert name_problem(name) is None


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../escape", "/abs", "a/b", "a\\b", "a\x00b", ".hidden", "-opt", "a b",
     "x" * (MAX_NAME + 1), "é"],
)  # fmt: skip
def test_anything_else_is_refused_saying_why_in_one_line(name: str) -> None:
    problem = name_problem(name)
    assert problem is not None and "\n" not in problem and len(problem) < 200


def test_what_is_not_a_string_is_no_name() -> None:
    assert name_problem(None) == "None is not a string"
