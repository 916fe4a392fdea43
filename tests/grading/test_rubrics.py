from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ci_evals.grading.reviewer import rubrics


def test_kind_comes_from_the_folder(rubric_set: rubrics.RubricSet) -> None:
    assert {key: r.kind for key, r in rubric_set.items()} == {
        "has-goals": "checklist",
        "has-outline": "checklist",
        "coherence": "analytic",
        "pacing": "analytic",
    }
    # The hash is the file's content hash, so a rubric change shows in the results.
    goals = rubric_set["has-goals"]
    assert goals.sha256 == hashlib.sha256(goals.path.read_bytes()).hexdigest()


def test_ids_match_normalised(rubric_set: rubrics.RubricSet) -> None:
    assert rubric_set["Has_Goals"].id == "has-goals"
    assert rubric_set["checklist/plan-lab/has-goals.md"].id == "has-goals"
    assert "has goals" in rubric_set
    assert "missing" not in rubric_set


def test_frontmatter_type_wins_over_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "checklist"
    folder.mkdir()
    (folder / "depth.md").write_text("---\ntype: analytic\n---\n# Depth\n")
    found = rubrics.discover(tmp_path, ["checklist"])
    assert found["depth"].kind == "analytic"


def test_frontmatter_criteria_list(tmp_path: Path) -> None:
    folder = tmp_path / "analytic"
    folder.mkdir()
    (folder / "quality.md").write_text(
        "---\ncriteria:\n  - clarity\n  - {id: has-summary, type: checklist}\n---\n"
    )
    found = rubrics.discover(tmp_path, ["analytic/*.md"])
    assert sorted(found) == ["clarity", "has-summary"]
    assert found["clarity"].kind == "analytic"
    assert found["has-summary"].kind == "checklist"
    assert "quality" not in found  # the listed criteria replace the stem
    assert len(found.files()) == 1


def test_no_kind_folder_means_unknown_kind(tmp_path: Path) -> None:
    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "tone.md").write_text("# Tone\n")
    # A `checklist` folder above the plugin root does not count.
    assert rubrics.discover(tmp_path, ["rubrics"])["tone"].kind is None


def test_kind_folder_above_the_root_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "checklist" / "plugin"
    (root / "rubrics").mkdir(parents=True)
    (root / "rubrics" / "tone.md").write_text("# Tone\n")
    assert rubrics.discover(root, ["rubrics"])["tone"].kind is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("---\ntype: likert\n---\n", "type must be 'checklist' or 'analytic'"),
        ("---\ncriteria: []\n---\n", "non-empty list"),
        ("---\ncriteria: [{name: x}]\n---\n", "is not an id"),
        ("---\n: [\n---\n", r"bad\.md:2: front matter is not valid YAML"),
        ("---\n- a\n---\n", r"bad\.md:2: front matter is a list, not a mapping"),
    ],
)
def test_malformed_rubric_is_an_error(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "checklist").mkdir()
    (tmp_path / "checklist" / "bad.md").write_text(content)
    with pytest.raises(rubrics.RubricError, match=message) as info:
        rubrics.discover(tmp_path, ["checklist"])
    assert info.value.file is not None and info.value.file.endswith("bad.md")


def test_duplicate_ids_across_folders_are_an_error(tmp_path: Path) -> None:
    for kind in ("checklist", "analytic"):
        (tmp_path / kind).mkdir()
        (tmp_path / kind / "structure.md").write_text("x")
    with pytest.raises(rubrics.RubricError, match="defined twice"):
        rubrics.discover(tmp_path, ["checklist", "analytic"])


def test_pattern_matching_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(rubrics.RubricError, match="matches no markdown file"):
        rubrics.discover(tmp_path, ["references/evaluation/**/*.md"])


def test_pattern_escaping_the_root_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(rubrics.RubricError, match="must be relative"):
        rubrics.discover(tmp_path / "plugin", ["../elsewhere"])
