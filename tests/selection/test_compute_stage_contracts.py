"""compute-stage on a change to the suite: contracts alone run less than everything.

The labsmith example in a real repository; each test commits a change to
`ci-evals.yaml` on a branch and asks `ci-evals compute-stage main`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.main import main
from tests.conftest import copy_example, git
from tests.stage_repo import commit


@pytest.fixture
def example_repo(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy_example(repo)  # at the top, as in this repository: no --map needed
    commit(repo, "the example")
    git(repo, "checkout", "-q", "-b", "change")
    monkeypatch.chdir(repo)
    return repo


def _edit(repo: Path, old: str, new: str) -> None:
    suite = repo / "ci-evals.yaml"
    text = suite.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    suite.write_text(text.replace(old, new), encoding="utf-8")
    commit(repo)


def _compute(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["compute-stage", "main", *args]) == 0
    return capsys.readouterr().out


def test_a_contract_change_on_stage_4_alone_runs_from_stage_4(
    example_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(example_repo, '"## Prerequisites", "## Environment"] }', '"## Environment"] }')

    assert _compute(capsys) == "4\n"
    answer = json.loads(_compute(capsys, "--json"))
    assert (answer["from_stage"], answer["reason"]) == (4, "contract-changed")
    assert answer["matches"] == [{"path": "ci-evals.yaml", "stage": 4, "entry": None}]
    explained = _compute(capsys, "--explain")
    assert "answer:   run from stage 4 (plan-chapter)" in explained
    assert (
        "reason:   contract-changed — ci-evals.yaml: only contracts changed: "
        "stage 4 (plan-chapter) consumes\n"
    ) in explained
    assert "compared at the merge base and at HEAD" in explained


def test_what_stage_3_produces_affects_stage_3_and_names_its_consumers(
    example_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(example_repo, '["## Outcomes", "## Prerequisites"', '["## Prerequisites"')

    explained = _compute(capsys, "--explain")
    assert "answer:   run from stage 3 (plan-lab)" in explained
    # lab/lab.md is read by stage 4: it is affected too (and runs, after 3).
    assert "stage 3 (plan-lab) produces; stage(s) 4 consume what changed" in explained


def test_layout_and_comments_change_nothing(
    example_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(example_repo, "budget_usd: 5.0 ", "budget_usd: 5.0    # per run\n# more words\n")

    assert _compute(capsys) == "none\n"


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("max_turns: 20", "max_turns: 21", "changed more than contracts (stages[0].limits)"),
        ("plan-chapter all", "plan-chapter 1", "changed more than contracts (stages[3].prompt)"),
        ("stages:\n", "stages: [\n", "cannot compare (invalid YAML at line"),
    ],
)
def test_anything_but_a_contract_runs_everything(
    example_repo: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, why: str
) -> None:
    _edit(example_repo, old, new)

    explained = _compute(capsys, "--explain")
    assert "answer:   run from stage 1 (research-company)" in explained
    assert f"reason:   global-file — ci-evals.yaml: the suite {why}" in explained


def test_a_removed_suite_runs_everything(
    example_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (example_repo / "ci-evals.yaml").unlink()
    commit(example_repo)

    assert "the suite removed" in _compute(capsys, "--explain")


def test_compute_stage_compares_contracts_without_the_heavy_modules(example_repo: Path) -> None:
    _edit(example_repo, '"## Prerequisites", "## Environment"] }', '"## Environment"] }')
    code = (
        "import sys; from ci_evals.main import main;"
        "code = main(['compute-stage', 'main']);"
        "heavy = [m for m in ('pydantic', 'jsonschema', 'claude_agent_sdk') if m in sys.modules];"
        "print(code, heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines()[-1] == "0 []"
    assert done.stdout.splitlines()[0] == "4"
