"""Selecting the cases a change reaches, on a real history of a plugin with ten cases.

The plugin (`tests.case_units_repo`) gets its suite, stub, stage map and hook
from `ci-evals init`, as drafted, unedited; then each commit changes one
thing and `compute-stage BASE --json` must select exactly the cases that
thing reaches — or every case, with the reason, where it cannot be sure.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.run.run_command import from_stage_of, scenarios_for
from ci_evals.suite.load import load_suite
from tests.case_units_repo import CASES, PLUGIN, SKILL_CASES, commit, plugin_repo, write
from tests.conftest import git
from tests.selection.test_compute_stage import parse_outputs


@pytest.fixture
def drafted(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Path:
    """The plugin and what `ci-evals init` drafted for it, committed (branch main)."""
    plugin_repo(repo)
    monkeypatch.chdir(repo)
    assert main(["init", PLUGIN]) == 0
    capsys.readouterr()
    commit(repo, "ci-evals init")
    git(repo, "checkout", "-q", "-b", "change")
    return repo


def _select(base: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["compute-stage", base, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _units(base: str, capsys: pytest.CaptureFixture[str]) -> tuple[object, object]:
    """(the selected case ids, or "all"; the units' reason)."""
    units = _select(base, capsys)["units"]
    assert isinstance(units, dict)
    return ("all" if units["all"] else units["ids"]), units["reason"]


def _change(repo: Path, path: str, text: str = "changed\n", message: str = "change") -> str:
    write(repo, {path: text})
    return commit(repo, message)


def test_init_drafts_each_component_to_the_cases_that_name_it(drafted: Path) -> None:
    text = (drafted / "stage_map.yaml").read_text(encoding="utf-8")
    assert f'evals: "{PLUGIN}/evals"' in text
    for glob, cases in SKILL_CASES.items():
        listed = ", ".join(f'"{c}"' for c in cases)
        shown = glob if glob.endswith("/**") else "/" + glob
        assert f'{{ glob: "{shown}", cases: [{listed}] }}' in text, glob
    assert '{ glob: "/README.md", stage: none }' in text
    assert '{ glob: "/.claude-plugin/plugin.json", cases: ["*"] }' in text
    hook = (drafted / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    assert "entry: ci-evals check-coverage" in hook
    assert main(["check-coverage"]) == 0


def test_a_multi_commit_history_selects_only_the_cases_each_change_reaches(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = drafted
    steps = [
        (f"{PLUGIN}/skills/greet/SKILL.md", ["greet-basic", "greet-formal"]),
        (f"{PLUGIN}/skills/refund/policy.md", ["refund-large", "refund-small"]),
        (f"{PLUGIN}/commands/triage.md", ["triage-queue"]),
        (f"{PLUGIN}/agents/auditor.md", ["audit-ticket"]),
        (f"{PLUGIN}/evals/smalltalk/prompt.md", ["smalltalk"]),
        (f"{PLUGIN}/evals/refund-small/graders/said.md", ["refund-small"]),
        (f"{PLUGIN}/README.md", []),
    ]
    for path, expected in steps:
        _change(repo, path, f"changed for {expected}\n")
        assert _units("HEAD~1", capsys) == (expected, "selected"), path
    # The whole branch: the union, in one answer.
    found = _select("main", capsys)
    assert found["from_stage"] == 1
    assert found["units"] == {
        "kind": "cases",
        "all": False,
        "ids": sorted(
            {"greet-basic", "greet-formal", "refund-large", "refund-small", "triage-queue"}
            | {"audit-ticket", "smalltalk"}
        ),
        "reason": "selected",
        "detail": "7 cases selected",
    }
    # A README alone runs nothing: `none`, and no case.
    assert _select("HEAD~1", capsys)["from_stage"] is None


def test_a_change_to_a_case_only_says_case_changed(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(drafted, f"{PLUGIN}/evals/smalltalk/prompt.md")
    assert main(["compute-stage", "HEAD~1"]) == 0
    out, err = capsys.readouterr()
    assert out == "1\n"
    assert "(case-changed)" in err
    assert "cases: 1 case selected: smalltalk" in err
    assert main(["compute-stage", "HEAD~1", "--explain"]) == 0
    text = capsys.readouterr().out
    assert "units:    cases: 1 case selected: smalltalk" in text
    assert "smalltalk  helpdesk/evals/smalltalk/prompt.md: the case's own folder" in text
    assert (
        " * stage 1  helpdesk/evals/smalltalk/prompt.md  [case-changed] in the eval folder: "
        "see units" in text
    )


def test_actions_outputs_name_the_cases(
    drafted: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _change(drafted, f"{PLUGIN}/skills/greet/SKILL.md")
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    assert main(["compute-stage", "HEAD~1"]) == 0
    capsys.readouterr()
    values = parse_outputs(output.read_text(encoding="utf-8"))
    assert values["from_stage"] == "1"
    assert values["units"] == "greet-basic greet-formal"
    assert json.loads(values["units_json"]) == ["greet-basic", "greet-formal"]
    assert values["units_all"] == "false"
    _change(drafted, "ci-evals.yaml", "version: 1\nplugin: helpdesk\nplugin_evals: {}\n")
    output.write_text("")
    assert main(["compute-stage", "HEAD~1"]) == 0
    values = parse_outputs(output.read_text(encoding="utf-8"))
    assert (values["units"], values["units_json"], values["units_all"]) == ("all", "null", "true")


# -- every fallback: all cases, with the reason -------------------------------------------


def test_a_global_selects_every_case(drafted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _change(drafted, f"stub/{PLUGIN}.yaml", "rules: []\n")
    assert _units("HEAD~1", capsys) == ("all", "global-file")


def test_a_renamed_case_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(drafted, "mv", f"{PLUGIN}/evals/smalltalk", f"{PLUGIN}/evals/chitchat")
    commit(drafted, "rename a case")
    assert _units("HEAD~1", capsys) == ("all", "unknown-case")


def test_a_deleted_case_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(drafted, "rm", "-rq", f"{PLUGIN}/evals/smalltalk")
    commit(drafted, "delete a case")
    assert _units("HEAD~1", capsys) == ("all", "unknown-case")


def test_an_unreadable_case_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(drafted, f"{PLUGIN}/evals/smalltalk/case.yaml", "name: [unclosed\n")
    assert _units("HEAD~1", capsys) == ("all", "unreadable-case")


def test_an_uncovered_plugin_file_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(drafted, f"{PLUGIN}/scripts/setup.sh", "echo hi\n")
    assert _units("HEAD~1", capsys) == ("all", "unmatched-file")


def test_a_file_of_the_eval_folder_in_no_case_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _change(drafted, f"{PLUGIN}/evals/README.md", "notes\n")
    assert _units("HEAD~1", capsys) == ("all", "eval-folder-changed")


def test_an_entry_naming_a_case_that_is_gone_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (drafted / "stage_map.yaml").read_text(encoding="utf-8")
    text = text.replace('"escalate-angry"', '"escalate-*", "escalate-calm"')
    _change(drafted, "stage_map.yaml", text, "a case named that does not exist")
    _change(drafted, f"{PLUGIN}/skills/escalate/SKILL.md")
    assert _units("HEAD~1", capsys) == ("all", "unknown-case")
    # check-coverage says so at commit time: the entry's files would reach no case.
    assert main(["check-coverage"]) == 1
    out = capsys.readouterr().out
    assert "'escalate-calm' is no case's name in helpdesk/evals/" in out


def test_a_tag_no_case_carries_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (drafted / "stage_map.yaml").read_text(encoding="utf-8")
    text = text.replace('cases: ["summarize-thread"]', "tags: [summaries]")
    _change(drafted, "stage_map.yaml", text)
    _change(drafted, f"{PLUGIN}/skills/summarize/SKILL.md")
    assert _units("HEAD~1", capsys) == ("all", "unknown-case")
    # Once a case carries the tag, the entry selects it.
    _change(
        drafted, f"{PLUGIN}/evals/summarize-thread/prompt.md", "---\ntags: [summaries]\n---\nGo.\n"
    )
    _change(drafted, f"{PLUGIN}/skills/summarize/SKILL.md", "again\n")
    assert _units("HEAD~1", capsys) == (["summarize-thread"], "selected")


def test_a_missing_base_selects_every_case(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _units("no-such-branch", capsys) == ("all", "base-missing")


def test_a_mock_selects_the_cases_below_its_folder(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A case's own mocks: that case only.
    _change(drafted, f"{PLUGIN}/evals/refund-small/mocks/tickets/lookup.md", "ticket 7\n")
    assert _units("HEAD~1", capsys) == (["refund-small"], "selected")
    # The eval folder's mocks: every case may call the server (the CLI grants mocked tools).
    _change(drafted, f"{PLUGIN}/evals/mocks/tickets/lookup.md", "ticket 7\n")
    assert _units("HEAD~1", capsys) == ("all", "mock-changed")
    # Agent-mock replays count as the server's.
    _change(drafted, f"{PLUGIN}/evals/mocks/.replay/tickets/lookup-00.json", "{}\n")
    assert _units("HEAD~1", capsys) == ("all", "mock-changed")


def test_a_case_group_folder_selects_its_cases(
    drafted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("one", "two"):
        _change(drafted, f"{PLUGIN}/evals/group/{name}/prompt.md", f"Say {name}.\n")
    _change(drafted, f"{PLUGIN}/evals/group/mocks/tickets/lookup.md", "t\n")
    assert _units("HEAD~1", capsys) == (["one", "two"], "selected")
    assert len(CASES) == 10


# -- run --base: only the selected cases run ----------------------------------------------


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", "run", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=repo,
    )


@pytest.mark.slow
def test_run_base_runs_only_the_cases_a_skill_change_reaches(drafted: Path) -> None:
    """The real SDK in its sandbox against the stub model, as `init` drafted the stub."""
    _change(drafted, f"{PLUGIN}/skills/greet/SKILL.md", "---\nname: greet\n---\nGreet warmly.\n")
    stub = f"stub:stub/{PLUGIN}.yaml"
    done = _run(drafted, "--base", "main", "--model", stub, "--repeat", "1", "--out", "run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cases: greet-basic greet-formal (selected: 2 cases selected)" in done.stdout
    document = json.loads((drafted / "run" / "results.json").read_text(encoding="utf-8"))
    ran = {scenario["id"]: scenario["stages"][0]["status"] for scenario in document["scenarios"]}
    assert ran == {"greet-basic": "passed", "greet-formal": "passed"}
    # A change no case reads runs nothing at all, and says so.
    _change(drafted, f"{PLUGIN}/README.md")
    done = _run(drafted, "--base", "HEAD~1", "--model", stub, "--out", "none")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("nothing to run: no-relevant-change")
    assert not (drafted / "none").exists()


def test_units_from_compute_stage_keep_only_those_the_suite_runs(drafted: Path) -> None:
    """`run --units` (how the composite action hands compute-stage's answer on): a unit
    the suite does not run is skipped; none left is nothing to run."""
    suite = load_suite(drafted / "ci-evals.yaml")

    def chosen(units: str) -> list[str]:
        args = argparse.Namespace(scenario=[], units=units, base=None, from_stage=None)
        return [s.id for s in scenarios_for(suite, args, from_stage_of(suite, args))]

    assert chosen("smalltalk not-in-this-suite") == ["smalltalk"]
    assert chosen("all") == list(CASES)
    assert chosen("gone") == []
    # `--from-stage 1` (as the composite action passes it) is every case's one stage.
    first = argparse.Namespace(scenario=[], units=None, base=None, from_stage="1")
    assert from_stage_of(suite, first).stage is not None
    with pytest.raises(UserError, match=r"--from-stage 2: a suite of cases \(plugin_evals:\)"):
        from_stage_of(suite, argparse.Namespace(scenario=[], base=None, from_stage="2"))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'evals: "helpdesk/evals"',
            'evals: "helpdesk/skills"',
            "has evals helpdesk/skills, but the suite's eval folder is helpdesk/evals",
        ),
        (
            'evals: "helpdesk/evals"',
            "stages: [one]",
            "has stages, but this suite runs cases",
        ),
        ('global: ["ci-evals.yaml", "/stub/"]', 'global: ["/stub/"]', "the suite ci-evals.yaml is"),
    ],
)
def test_a_suite_of_cases_refuses_a_map_that_would_select_other_cases(
    drafted: Path, old: str, new: str, expected: str
) -> None:
    path = drafted / "stage_map.yaml"
    text = path.read_text(encoding="utf-8")
    if new.startswith("stages"):  # a map of stages, covering the plugin
        text = 'version: 1\nroot: helpdesk\nevals: "helpdesk/evals"\nentries:\n'
        text += '  - { glob: "**", stage: 1 }\nglobal: ["ci-evals.yaml"]\n'
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(expected)):
        load_suite(drafted / "ci-evals.yaml")
