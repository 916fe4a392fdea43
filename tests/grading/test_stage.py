"""A stage graded end to end on the example plugin's curated stage-3 output."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.config import yaml_source
from ci_evals.errors import UserError
from ci_evals.grade_state.files import grade_files
from ci_evals.grading.config import (
    StageGrading,
    load_stage_grading,
    load_suite_grading,
)
from ci_evals.grading.reviewer.scorecard import grade_scorecard
from ci_evals.results.verdict import ScoringPolicy
from tests.conftest import EXAMPLE

PLUGIN = EXAMPLE.plugin

GOOD = [
    {"criterion": "chapter-count-consistent", "score": 1, "rationale": "3 == 3"},
    {"criterion": "grounded-in-research", "score": 1},
    {"criterion": "outcomes-measurable", "score": 1},
    {"criterion": "prerequisites-stated", "score": 1},
    {"criterion": "audience-fit", "score": 4},
    {"criterion": "progression", "score": 3},
]

STAGE = """
reviewer:
  agent: agents/review-lab-plan.md
  rubrics: [references/evaluation/checklist/plan-lab, references/evaluation/analytic/plan-lab]
  prompt: "Read {plugin}/agents/review-lab-plan.md. Output format: json"
  require_all: true
checks:
  - { files: lab/lab.md, count: 1 }
  - { json_schema: lab/plan.json, schema: "plugin:templates/plan.schema.json" }
  - { equals_length: lab/plan.json, field: chapter_count, array: chapters }
graders:
  - { id: plan-parses, command: [python3, -c, "import json; json.load(open('lab/plan.json'))"] }
"""


class _AnyKey:
    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def stage_grading(text: str = STAGE) -> StageGrading:
    extra = yaml_source.loads(text, "ci-evals.yaml").mapping(_AnyKey())
    return load_stage_grading(extra, suite_dir=EXAMPLE.root, plugin_dir=PLUGIN, within=EXAMPLE.root)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    shutil.copytree(EXAMPLE.fixtures / "3-plan-lab-output", folder)
    return folder


def grade(workspace: Path, scorecard: str, policy: ScoringPolicy | None = None, **kw: object):  # type: ignore[no-untyped-def]
    grading = stage_grading()
    assert grading.reviewer is not None
    reviewer = grade_scorecard(
        scorecard,
        grading.reviewer.rubric_set(PLUGIN),
        raw_path=workspace.parent / "run" / "scorecard.raw.txt",
        require_all=grading.reviewer.require_all,
    )
    env = {"PATH": os.environ["PATH"]}
    return grade_files(
        grading,
        workspace,
        policy or ScoringPolicy(),
        trajectory=None,
        reviewer=reviewer,
        env=env,
        out_dir=workspace.parent / "run",
        **kw,  # type: ignore[arg-type]
    )


def test_good_output_passes_with_checks_commands_and_reviewer(workspace: Path) -> None:
    verdict = grade(workspace, "Scorecard:\n```json\n" + json.dumps(GOOD) + "\n```")
    assert verdict.verdict == "passed", verdict.reason
    assert [g.grader for g in verdict.graders] == [
        "checks", "command:plan-parses", "reviewer", "addressed-to-graders"
    ]  # fmt: skip
    # The advisory flag: nothing in a good output addresses the reviewer.
    assert [(c.passed, c.advisory) for c in verdict.graders[-1].criteria] == [(True, True)]
    assert len(verdict.criteria) == 3 + 1 + 6 + 1
    assert verdict.analytic_mean == 3.5
    assert (workspace.parent / "run" / "command-plan-parses.log").exists()
    rubric_hashes = {r.id: r.sha256 for r in verdict.graders[2].rubrics}
    assert set(rubric_hashes) == {item["criterion"] for item in GOOD}


def test_an_analytic_one_fails_the_stage(workspace: Path) -> None:
    low = [
        *GOOD[:4],
        {"criterion": "audience-fit", "score": 1},
        {"criterion": "progression", "score": 1},
    ]
    verdict = grade(workspace, json.dumps(low))
    assert verdict.verdict == "failed"
    assert verdict.reason == "analytic mean 1.00 < 3 (low: audience-fit, progression)"


def test_a_threshold_change_changes_the_verdict_without_rerunning(workspace: Path) -> None:
    text = json.dumps(GOOD)
    assert grade(workspace, text).verdict == "passed"
    strict = ScoringPolicy(analytic_threshold=4.0)
    verdict = grade(workspace, text, strict)
    assert verdict.verdict == "failed"
    assert verdict.analytic_threshold == 4.0


def test_a_broken_plan_fails_the_checks(workspace: Path) -> None:
    plan = json.loads((workspace / "lab" / "plan.json").read_text())
    plan["chapter_count"] = 4
    (workspace / "lab" / "plan.json").write_text(json.dumps(plan))
    verdict = grade(workspace, json.dumps(GOOD))
    assert verdict.verdict == "failed"
    assert "equals_length:lab/plan.json:chapter_count" in verdict.reason


@pytest.mark.parametrize(
    ("scorecard", "reason"),
    [
        ("[]", "reviewer: unusable scorecard: the scorecard is an empty JSON array"),
        (
            json.dumps(GOOD[:5]),
            "reviewer: unusable scorecard: the scorecard does not score: progression",
        ),
        ('[{"criterion": "tone", "score": 5}]', "no rubric defines this criterion"),
    ],
)
def test_unusable_scorecard_makes_the_stage_error(
    workspace: Path, scorecard: str, reason: str
) -> None:
    verdict = grade(workspace, scorecard)
    assert verdict.verdict == "error"
    assert reason in verdict.reason
    assert (workspace.parent / "run" / "scorecard.raw.txt").read_text() == scorecard


def test_a_configured_reviewer_that_did_not_run_is_an_error(workspace: Path) -> None:
    verdict = grade_files(stage_grading(), workspace, ScoringPolicy(), trajectory=None)
    assert verdict.verdict == "error"
    assert verdict.reason == "reviewer: the reviewer was configured but not run"


def test_stage_scoring_overrides_the_suite(workspace: Path) -> None:
    grading = stage_grading(
        "checks: [{ files: lab/lab.md }, { files: lab/missing.md, id: optional-notes }]\n"
        "scoring: { advisory: [optional-notes] }\n"
    )
    verdict = grade_files(grading, workspace, ScoringPolicy(), trajectory=None)
    assert verdict.verdict == "passed"
    assert [c.advisory for c in verdict.criteria] == [False, True]


def test_every_example_stage_loads() -> None:
    root = yaml_source.load(EXAMPLE.suite).mapping(_AnyKey())
    names = []
    for stage in root["stages"].sequence():
        keys = stage.mapping(_AnyKey())
        extra = {k: v for k, v in keys.items() if k in ("reviewer", "checks", "graders", "scoring")}
        grading = load_stage_grading(
            extra, suite_dir=EXAMPLE.root, plugin_dir=PLUGIN, within=EXAMPLE.root
        )
        # A stage without grading keys is graded by its contract (`produces`).
        assert not grading.empty or "produces" in keys
        names.append(keys["name"].as_str())
    assert "generate-chapter" in names
    suite = load_suite_grading(
        {k: v for k, v in root.items() if k in ("scoring", "repeat", "pass_at_least")}
    )
    assert (suite.repeat, suite.pass_at_least, suite.scoring.analytic_threshold) == (1, None, 3.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "reviewer: { agent: agents/review-lab-plan.md, rubrics: [references/nope],"
            " prompt: p }\n",
            "reviewer.rubrics: rubric pattern 'references/nope' matches no markdown file",
        ),
        (
            "reviewer: { agent: agents/review-lab-plan.md, rubrics: [x] }\n",
            "missing required key 'prompt'",
        ),
    ],
)
def test_stage_load_errors(text: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        stage_grading(text)
    assert message in str(info.value)


def test_suite_load() -> None:
    extra = yaml_source.loads(
        "repeat: 3\npass_at_least: 2\nscoring: {analytic_mean_at_least: 3.5}\n", "s.yaml"
    )
    suite = load_suite_grading(extra.mapping(_AnyKey()))
    assert (suite.repeat, suite.pass_at_least, suite.scoring.analytic_threshold) == (3, 2, 3.5)
    with pytest.raises(UserError, match=r"s\.yaml:2:16: pass_at_least: is 4 but repeat is 3"):
        load_suite_grading(
            yaml_source.loads("repeat: 3\npass_at_least: 4\n", "s.yaml").mapping(_AnyKey())
        )
