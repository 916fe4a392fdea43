"""Stage maps that select units: a map of stages whose entries name scenarios, and
the mistakes a map of cases (`evals:`) is refused for, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.suite.load import load_suite
from tests.case_units_repo import commit, write
from tests.conftest import git

SCENARIO_MAP = """\
version: 1
root: plugin
stages: [draft, review]
entries:
  - { glob: "commands/draft.md", stage: draft }
  - { glob: "skills/alpha/**", stage: draft, scenarios: [alpha] }
  - { glob: "skills/beta/**", stage: review, scenarios: [beta] }
  - { glob: "skills/shared/**", stage: review, scenarios: [alpha, beta] }
  - { glob: "commands/review.md", stage: review }
  - { glob: "README.md", stage: none }
global: [/ci-evals.yaml]
fixtures: fixtures
"""
SUITE = """\
version: 1
plugin: plugin
stages:
  - { name: draft, prompt: "/p:draft {topic}" }
  - { name: review, prompt: "/p:review" }
scenarios:
  - { id: alpha, inputs: { topic: a } }
  - { id: beta, inputs: { topic: b } }
"""


@pytest.fixture
def phased(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(
        repo,
        {
            "stage_map.yaml": SCENARIO_MAP,
            "ci-evals.yaml": SUITE,
            "plugin/.claude-plugin/plugin.json": '{"name": "p"}\n',
            "plugin/commands/draft.md": "Draft $ARGUMENTS.\n",
            "plugin/commands/review.md": "Review.\n",
            "plugin/skills/alpha/SKILL.md": "alpha\n",
            "plugin/skills/beta/SKILL.md": "beta\n",
            "plugin/skills/shared/SKILL.md": "shared\n",
            "plugin/README.md": "readme\n",
            "fixtures/1-draft-output/out.md": "suite's\n",
            "fixtures/alpha/1-draft-output/out.md": "alpha's\n",
        },
    )
    commit(repo, "phased plugin")
    monkeypatch.chdir(repo)
    return repo


def _units(capsys: pytest.CaptureFixture[str]) -> tuple[object, object, object]:
    assert main(["compute-stage", "HEAD~1", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    units = found["units"]
    return found["from_stage"], ("all" if units["all"] else units["ids"]), units["reason"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("plugin/skills/alpha/SKILL.md", (1, ["alpha"], "selected")),
        ("plugin/skills/beta/SKILL.md", (2, ["beta"], "selected")),
        ("plugin/skills/shared/SKILL.md", (2, ["alpha", "beta"], "selected")),
        ("fixtures/alpha/1-draft-output/out.md", (2, ["alpha"], "selected")),
        ("fixtures/1-draft-output/out.md", (2, "all", "fixture-changed")),
        ("plugin/commands/review.md", (2, "all", "matched")),
        ("plugin/agents/new.md", (1, "all", "unmatched-file")),
        ("plugin/README.md", (None, [], "selected")),
    ],
)
def test_entries_naming_scenarios_select_them(
    phased: Path, capsys: pytest.CaptureFixture[str], path: str, expected: tuple[object, ...]
) -> None:
    write(phased, {path: "changed\n"})
    commit(phased, "change")
    assert _units(capsys) == expected


def test_a_suite_refuses_a_scenario_its_map_names_but_it_lacks(phased: Path) -> None:
    text = SCENARIO_MAP.replace("scenarios: [beta]", "scenarios: [gamma]")
    (phased / "stage_map.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(
        UserError, match=r"stage_map.yaml:7: entries\[2\].scenarios: 'gamma' is no "
    ):
        load_suite(phased / "ci-evals.yaml")


def test_run_base_keeps_the_selected_scenarios(
    phased: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ci-evals plan --shards` splits what `run --base` runs: the selected scenarios only."""
    write(phased, {"plugin/skills/beta/SKILL.md": "changed\n"})
    commit(phased, "change")
    assert main(["plan", "--base", "HEAD~1", "--shards", "2"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"include": [{"shard": "1/1", "from_stage": "2"}]}
    assert "scenarios: beta" in out.err


# -- a map of cases: its mistakes --------------------------------------------------------

CASE_HEAD = "version: 1\nroot: plugin\nevals: plugin/evals\nentries:\n"

CASE_MAP_ERRORS = {
    "stages beside evals": (
        "version: 1\nroot: plugin\nevals: plugin/evals\nstages: [a]\nentries: []\n",
        "stage_map.yaml:4:9: stages: a map with evals: (a suite of cases) has no stages "
        "(every case runs its own one stage: send files to cases with cases: or tags:)",
    ),
    "neither stages nor evals": (
        "version: 1\nroot: plugin\nentries: []\n",
        "stage_map.yaml:1:1: missing required key 'stages' (or evals: for a suite of cases)",
    ),
    "evals outside root": (
        "version: 1\nroot: plugin\nevals: cases\nentries: []\n",
        "stage_map.yaml:3:8: evals: the eval folder 'cases' is not inside root 'plugin' "
        "(keep the cases in the plugin's folder (its evals/, as claude plugin eval does))",
    ),
    "an entry reaching no case": (
        CASE_HEAD + '  - { glob: "skills/**" }\n',
        "stage_map.yaml:5:5: entries[0]: the entry reaches no case "
        '(add cases: [NAME-GLOB, ...] ("*": every case) or tags: [TAG, ...], or stage: none)',
    ),
    "a stage in a case map": (
        CASE_HEAD + '  - { glob: "skills/**", stage: 1, cases: [a] }\n',
        "stage_map.yaml:5:33: entries[0].stage: a case map's entries name cases, not stages "
        "(write cases: [NAME-GLOB, ...] or tags: [TAG, ...], or stage: none)",
    ),
    "scenarios in a case map": (
        CASE_HEAD + '  - { glob: "skills/**", scenarios: [a] }\n',
        "stage_map.yaml:5:37: entries[0].scenarios: scenarios: in a map of cases (a map with "
        "evals: names cases: or tags:; a map of stages names scenarios:)",
    ),
    "cases in a map of stages": (
        "version: 1\nroot: plugin\nstages: [a]\nentries:\n"
        '  - { glob: "skills/**", stage: 1, cases: [x] }\n',
        "stage_map.yaml:5:43: entries[0].cases: cases: in a map of stages (a map with evals: "
        "names cases: or tags:; a map of stages names scenarios:)",
    ),
    "a scenario id with a space": (
        "version: 1\nroot: plugin\nstages: [a]\nentries:\n"
        '  - { glob: "skills/**", stage: 1, scenarios: ["a b"] }\n',
        "stage_map.yaml:5:48: entries[0].scenarios[0]: scenarios: 'a b' is no scenario id: "
        "it holds a space",
    ),
    "units beside stage none": (
        CASE_HEAD + '  - { glob: "README.md", stage: none, tags: [x] }\n',
        "stage_map.yaml:5:45: entries[0].tags: tags: beside stage: none "
        "(no stage reads the files: no unit either)",
    ),
    "an empty cases list": (
        CASE_HEAD + '  - { glob: "skills/**", cases: [] }\n',
        "stage_map.yaml:5:33: entries[0].cases: must not be empty",
    ),
}


@pytest.mark.parametrize(
    ("text", "expected"), list(CASE_MAP_ERRORS.values()), ids=list(CASE_MAP_ERRORS)
)
def test_case_map_mistakes_are_one_line(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    expected: str,
) -> None:
    write(repo, {"plugin/evals/a/prompt.md": "Go.\n", "cases/x/prompt.md": "Go.\n"})
    (repo / "stage_map.yaml").write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    monkeypatch.chdir(repo)
    assert main(["check-coverage"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"ci-evals: error: {expected}"]
