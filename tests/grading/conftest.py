"""Rubric folders laid out the way a phased plugin keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.grading.reviewer import rubrics


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """A plugin folder with checklist and analytic rubrics for stage `plan-lab`."""
    root = tmp_path / "plugin"
    checklist = root / "references/evaluation/checklist/plan-lab"
    analytic = root / "references/evaluation/analytic/plan-lab"
    checklist.mkdir(parents=True)
    analytic.mkdir(parents=True)
    (checklist / "has-goals.md").write_text("# Has goals\n\n1: the lab states its goals.\n")
    (checklist / "has-outline.md").write_text("# Has outline\n")
    (analytic / "coherence.md").write_text("# Coherence\n\n1 = incoherent ... 5 = tight\n")
    (analytic / "pacing.md").write_text("# Pacing\n")
    return root


@pytest.fixture
def rubric_set(plugin: Path) -> rubrics.RubricSet:
    return rubrics.discover(plugin, ["references/evaluation/*/plan-lab"])
