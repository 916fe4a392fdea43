"""A criterion's `source`: the built-in graders' names or a grader kind's own.

A results file keeps any name (it is reported where the package that wrote
it may not be installed); grading refuses a source that is neither built in
nor a registered grader kind. A package's kind naming itself through `run`
and `report` is tests/test_third_party_backend.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pydantic
import pytest

from ci_evals.grade_state.files import grade_files
from ci_evals.grading.config import StageGrading
from ci_evals.grading.kinds.base import GradeContext, Grader
from ci_evals.results.criteria import BUILTIN_SOURCES, Criterion, GraderResult
from ci_evals.results.verdict import ScoringPolicy


def criterion(source: str) -> Criterion:
    return Criterion(id="c", kind="checklist", score=1.0, passed=True, source=source)


@pytest.mark.parametrize("source", [*BUILTIN_SOURCES, "words", "acme.lint_2", "a" * 64])
def test_a_source_is_any_grader_name(source: str) -> None:
    assert criterion(source).source == source


@pytest.mark.parametrize("source", ["", "a" * 65, "two words", "<b>", "-x", "x\n", "#1"])
def test_a_source_that_is_no_name_is_refused(source: str) -> None:
    with pytest.raises(pydantic.ValidationError, match="source"):
        criterion(source)


@dataclass(frozen=True)
class Fixed:
    """A grader giving one passing criterion from `source`."""

    source: str
    name: str = "fixed"
    writes: bool = False
    sandboxed: bool = False
    scoring: None = None

    def files_only(self) -> Grader:
        return self

    def grade(self, ctx: GradeContext) -> GraderResult:
        return GraderResult(grader=self.name, criteria=(criterion(self.source),))


def verdict(source: str, folder: Path) -> tuple[str, str | None]:
    grading = StageGrading(graders=(Fixed(source),))
    graded = grade_files(grading, folder, ScoringPolicy(), trajectory=None)
    [result] = graded.graders
    return graded.verdict, result.error


@pytest.mark.parametrize("source", BUILTIN_SOURCES)
def test_a_built_in_source_grades(source: str, tmp_path: Path) -> None:
    assert verdict(source, tmp_path) == ("passed", None)


@pytest.mark.parametrize("source", ["words", "checks", "graders"])
def test_a_source_no_grader_kind_registers_is_the_graders_error(
    source: str, tmp_path: Path
) -> None:
    # `checks` and `graders` are built-in kinds' stage keys, not their criteria's sources.
    status, error = verdict(source, tmp_path)
    assert status == "error"
    assert error is not None
    assert error.startswith(f"criteria name the source '{source}': neither a built-in one")
    assert "known: reviewer, check, command, mcp" in error
