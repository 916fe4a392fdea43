"""What `ci-evals init` chooses for a plugin of several commands (suite.draft_order):
the dev-kit test plugin (tests/data/onboarding/dev-kit: three unrelated commands)
becomes one stage with a scenario per command and runs on the stub; labsmith
(examples/labsmith: five commands, each reading what the one before wrote) becomes
phases, writer first. Each choice is printed with its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ci_evals.suite.draft_inputs import example_value
from tests.conftest import git
from tests.onboarding_helpers import cli
from tests.paths import DATA, REPO

DATA = DATA / "onboarding"
LABSMITH = REPO / "examples" / "labsmith" / "plugin"


def repo_with(tmp_path: Path, plugin: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shutil.copytree(plugin, repo / "plugin")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the plugin")
    return repo


@pytest.mark.slow
def test_independent_commands_are_scenarios_of_one_stage(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, DATA / "dev-kit")
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == [
        "drafted independent commands (new-app, summarize, todo-scan): none reads another's "
        "output, so one stage runs each as its own scenario (phases instead: --stages A,B,...)",
        # No phases: Claude Code's own case format would serve as well (issue 33).
        "note: no phases: `ci-evals init --format cases` drafts claude plugin eval cases "
        "instead, which `claude plugin eval` runs too (docs/onboarding.md)",
        "wrote stage_map.yaml",
    ]
    suite = (repo / "ci-evals.yaml").read_text()
    assert '    prompt: "/dev-kit:{command} {arguments}"\n' in suite
    assert (
        "  - id: new-app\n"
        "    # commands/new-app.md:11 (also line 15) stops for a person:\n"
        '    #   "Ask the user which language to use if the project name does not say"\n'
        "    # A stage runs unattended: answer in the prompt (docs/onboarding.md).\n"
        '    # new-app\'s argument-hint is "[project-name]": a made-up value\n'
        '    inputs: { command: "new-app", arguments: "acme-app (then write the result to '
        'outputs/command.md)" }\n'
        "  - id: summarize\n"
        '    # summarize\'s argument-hint is "[file-path]": a made-up value\n'
        '    inputs: { command: "summarize", arguments: "README.md (then write the result to '
        'outputs/command.md)" }\n'
        "  - id: todo-scan\n"
        '    inputs: { command: "todo-scan", arguments: "(then write the result to '
        'outputs/command.md)" }\n'
    ) in suite
    assert "stages: [command]" in (repo / "stage_map.yaml").read_text()

    git(repo, "add", "-A")
    assert cli(repo, "check-coverage").returncode == 0
    out = tmp_path / "run"
    ran = cli(repo, "run", "--model", "stub:stub/dev-kit.yaml", "--out", str(out))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = json.loads((out / "results.json").read_text())
    runs = {s["id"]: [(t["name"], t["status"]) for t in s["stages"]] for s in results["scenarios"]}
    assert runs == {
        "new-app": [("command", "passed")],
        "summarize": [("command", "passed")],
        "todo-scan": [("command", "passed")],
    }
    new_app = (out / "new-app" / "1-command" / "trajectory.jsonl").read_text()
    # new-app's rule answered, given the scenario's arguments
    assert "placeholder output of stage new-app (stub) for: acme-app (then write" in new_app
    assert "Placeholder findings of app-verifier (stub)." in new_app  # its agent ran
    summarize = (out / "summarize" / "1-command" / "trajectory.jsonl").read_text()
    assert "Placeholder findings of app-verifier" not in summarize  # not its agent


def test_commands_that_chain_are_phases_writer_first(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, LABSMITH)
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "drafted phases, in turn: research-company, research-product, plan-lab, plan-chapter, "
        "generate-chapter (research-product reads research/company.md, from research-company; "
        "11 more such readings)"
    )
    stage_map = (repo / "stage_map.yaml").read_text()
    assert (
        "stages: [research-company, research-product, plan-lab, plan-chapter, generate-chapter]"
        in stage_map
    )
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        '    inputs: { "research-company": "Acme Robotics", "research-product": "Acme Arm", '
        '"plan-lab": "new developers", "plan-chapter": "all", "generate-chapter": "all" }\n'
    ) in suite
    git(repo, "add", "-A")
    checked = cli(repo, "check", "--model", "stub:stub/labsmith.yaml")
    assert checked.returncode == 0, checked.stderr


def test_stages_named_by_the_user_are_phases_whatever_the_commands_read(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, DATA / "dev-kit")
    proc = cli(repo, "init", "plugin", "--stages", "todo-scan,summarize")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "drafted phases, as --stages names them: todo-scan, summarize"
    )


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        ("[project-name]", "acme-app"),
        ("[company-name]", "Acme Robotics"),
        ("[chapter-slug|all]", "all"),  # a choice the hint offers, as it stands
        ("<pr-number> [--fast]", "1"),  # flags left out
        ("The feature to build (optional)", "add a --verbose flag that prints each step"),
        ("[widget]", "example-widget"),  # nothing known: marked as an example
        # No hint: a task, never the command's own name.
        (None, "a small example task on the files in this workspace"),
        ("[--resume]", ""),  # optional flags only: run bare, not "example-" or the name
        ("[--archive | --restore | --list]", ""),
        ("[goal, e.g. 'tune an 8B model to write replies']", "tune an 8B model to write replies"),
        ("[run directory, e.g. runs/2026-07-13-bot]", "runs/2026-07-13-bot"),
        ("<target path or description> [--strict]", "README.md"),  # the whole placeholder
        ("stories/filename.md | status | resume", "status"),  # a value it accepts
    ],
)
def test_an_example_input_is_a_value_of_the_kind_the_hint_names(
    hint: str | None, value: str
) -> None:
    assert example_value(hint, "scan") == value
