"""Which changes touch only graders, on a copy of the example's layout in a real repo.

The example's reviewer `review-lab-plan` is named by `commands/plan-lab.md`
and its rubrics' folders (`references/evaluation/*/plan-lab/`) by the same
command (the agent under test reads it): a change to either runs the agent; a
change to a rubric, or to a reviewer, nothing names re-grades.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ci_evals.selection import diff as diff_range
from ci_evals.selection.grader_change import decide
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git
from tests.paths import REPO

PLUGIN = "examples/labsmith/plugin"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("ci-evals.yaml", "stage_map.yaml"):
        shutil.copy2(REPO / name, repo / name)
    shutil.copytree(REPO / PLUGIN, repo / PLUGIN)
    shutil.copytree(REPO / "fixtures", repo / "fixtures")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "example")
    git(repo, "checkout", "-q", "-b", "pr")
    return repo


def _decide(repo: Path, *edits: tuple[str, str, str]) -> tuple[bool, str]:
    for path, old, new in edits:
        target = repo / path
        text = target.read_text()
        assert old in text, (path, old)
        target.write_text(text.replace(old, new, 1))
    git(repo, "commit", "-q", "-am", "change")
    stage_map = load_stage_map(repo / "stage_map.yaml", cache=False)
    verdict = decide(repo, diff_range.compute(repo, stage_map, "main"), stage_map)
    return verdict.regrade, verdict.reason


def _first_rubric(repo: Path, stage: str) -> str:
    folder = repo / PLUGIN / "references/evaluation/checklist" / stage
    return str(sorted(p for p in folder.rglob("*.md"))[0].relative_to(repo))


def _unnamed_rubrics(repo: Path) -> None:
    """On main: the commands stop telling the agent where the rubrics are."""
    git(repo, "checkout", "-q", "main")
    for stage in ("plan-lab", "generate-chapter"):
        command = repo / PLUGIN / "commands" / f"{stage}.md"
        text = command.read_text()
        named = f" against\nthe rubrics in `references/evaluation/*/{stage}/`."
        assert named in text
        command.write_text(text.replace(named, "."))
    git(repo, "commit", "-q", "-am", "the commands name no rubric")
    git(repo, "checkout", "-q", "-B", "pr")


def test_a_rubric_change_regrades(repo: Path) -> None:
    _unnamed_rubrics(repo)
    rubric = _first_rubric(repo, "generate-chapter")
    regrade, reason = _decide(repo, (rubric, "\n", "\nStricter now.\n"))
    assert regrade, reason
    assert reason.startswith("only graders changed: ")


def test_a_rubric_the_agent_is_pointed_to_runs(repo: Path) -> None:
    """The example's command tells the agent the rubrics are in
    `references/evaluation/*/generate-chapter/`: a glob names the folder too."""
    rubric = _first_rubric(repo, "generate-chapter")
    regrade, reason = _decide(repo, (rubric, "\n", "\nStricter now.\n"))
    assert not regrade
    assert "commands/generate-chapter.md" in reason and "names 'references/evaluation'" in reason


def test_a_rubric_under_a_folder_the_agent_is_pointed_to_runs(repo: Path) -> None:
    _unnamed_rubrics(repo)
    skill = f"{PLUGIN}/skills/write-chapter/SKILL.md"
    git(repo, "checkout", "-q", "main")
    with (repo / skill).open("a") as out:
        out.write("\nBefore you finish, self-check against everything in references/evaluation/.\n")
    git(repo, "commit", "-q", "-am", "the skill points at the rubrics' parent folder")
    git(repo, "checkout", "-q", "-B", "pr")
    rubric = _first_rubric(repo, "plan-lab")
    regrade, reason = _decide(repo, (rubric, "\n", "\nStricter now.\n"))
    assert not regrade
    assert "SKILL.md" in reason and "names 'references/evaluation'" in reason


def test_a_threshold_change_regrades_and_a_limit_change_runs(repo: Path) -> None:
    ci = "ci-evals.yaml"
    assert _decide(repo, (ci, "analytic_mean_at_least: 3.0", "analytic_mean_at_least: 3.5"))[0]
    regrade, reason = _decide(repo, (ci, "max_turns: 40", "max_turns: 41"))
    assert not regrade and "changed more than its grading keys" in reason


def test_a_reviewer_the_agent_is_told_about_runs(repo: Path) -> None:
    body = f"{PLUGIN}/agents/review-lab-plan.md"
    regrade, reason = _decide(repo, (body, "\n---\n", "\n---\nBe stricter.\n"))
    assert not regrade
    assert "names 'review-lab-plan'" in reason and "the agent under test may read" in reason


def test_a_reviewer_whose_front_matter_changed_runs(repo: Path) -> None:
    body = f"{PLUGIN}/agents/review-generated.md"
    regrade, reason = _decide(repo, (body, "description: ", "description: Strict. "))
    assert not regrade and "front matter" in reason


def test_a_change_to_what_the_agent_reads_runs(repo: Path) -> None:
    rubric = _first_rubric(repo, "plan-lab")
    command = f"{PLUGIN}/commands/plan-chapter.md"
    regrade, reason = _decide(repo, (rubric, "\n", "\nx\n"), (command, "\n", "\ny\n"))
    assert not regrade and "is read by the agent" in reason


def test_a_reviewer_named_by_its_front_matter_name_runs(repo: Path) -> None:
    """Claude Code calls an agent by its front matter's `name:`, not its file's:
    a command that delegates to `plan-critic` uses `agents/review-generated.md`
    when that file says `name: plan-critic`."""
    body = f"{PLUGIN}/agents/review-generated.md"
    git(repo, "checkout", "-q", "main")
    text = (repo / body).read_text()
    assert "name: review-generated\n" in text
    (repo / body).write_text(text.replace("name: review-generated\n", "name: plan-critic\n"))
    for other in ("agents/rubric-scorer.md", "commands/generate-chapter.md",
                  "references/evaluation/README.md"):  # fmt: skip
        path = repo / PLUGIN / other
        path.write_text(path.read_text().replace("review-generated", "chapter reviewer"))
    command = repo / PLUGIN / "commands" / "plan-chapter.md"
    command.write_text(command.read_text() + "\nFinally, ask the plan-critic agent to check it.\n")
    git(repo, "commit", "-q", "-am", "a reviewer the command delegates to by its name")
    git(repo, "checkout", "-q", "-B", "pr")
    regrade, reason = _decide(repo, (body, "\n---\n", "\n---\nBe stricter.\n"))
    assert not regrade
    assert "plan-chapter.md" in reason and "names 'plan-critic'" in reason


@pytest.mark.parametrize("folder", ["commands", "skills/lab-design"])
def test_a_folder_made_a_rubric_in_the_same_change_is_still_the_agents(
    repo: Path, folder: str
) -> None:
    """The change lists the agent's own files as rubrics, and edits them: at the base
    they were no grader's, and a command or skill the plugin loads is the agent's."""
    ci = "ci-evals.yaml"
    rubrics = "      rubrics:\n        - references/evaluation/checklist/plan-lab\n"
    edited = {"commands": "commands/plan-lab.md", "skills/lab-design": "skills/lab-design/SKILL.md"}
    regrade, reason = _decide(
        repo,
        (ci, rubrics, f"{rubrics}        - {folder}\n"),
        (f"{PLUGIN}/{edited[folder]}", "\n", "\nDo it differently now.\n"),
    )
    assert not regrade, reason
    assert "is read by the agent" in reason


def test_a_rubric_the_agent_reads_through_a_link_runs(repo: Path) -> None:
    """A skill's checklist is a link to a rubric file: the agent reads the rubric (the
    change's diff follows the link: the link's path is changed too)."""
    _unnamed_rubrics(repo)
    rubric = _first_rubric(repo, "plan-lab")
    git(repo, "checkout", "-q", "main")
    link = repo / PLUGIN / "skills" / "lab-design" / "checklist.md"
    link.symlink_to(os.path.relpath(repo / rubric, link.parent))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the skill's checklist is the rubric")
    git(repo, "checkout", "-q", "-B", "pr")
    regrade, reason = _decide(repo, (rubric, "\n", "\nStricter now.\n"))
    assert not regrade
    assert "skills/lab-design/checklist.md is read by the agent" in reason
