"""`ci-evals init --format cases` (suite.draft_case_files): a plugin without phases
drafted as `claude plugin eval` cases, one per part, each with a grader showing the
part fired. Each plugin is written here in one shape people ship (skills only,
agents only, hooks only); each draft goes init -> check -> stub run green by the
printed lines alone, and the bundled `claude plugin eval` runs the very same cases
green against the same stub script, with and without the plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ci_evals.endpoints.stub_model import StubServer, load_script
from tests.commands.test_init_shapes import AGENT, SKILL, plugin_repo
from tests.onboarding_helpers import cli, follow_printed_lines, write
from tests.run_helpers import plugin_eval

SESSION_START = {"hooks": [{"type": "command", "command": "echo started"}]}


def hooks_json(**events: list[dict[str, Any]]) -> str:
    return json.dumps({"hooks": events})


def onboard(repo: Path) -> str:
    """init --format cases, then exactly the printed lines (check-coverage, check, run)."""
    proc = cli(repo, "init", "plugin", "--format", "cases")
    assert proc.returncode == 0, proc.stderr
    follow_printed_lines(repo, proc.stdout)
    return proc.stdout


def ci_evals_results(repo: Path) -> dict[str, list[tuple[str, bool]]]:
    """Per case, its graders' criteria and whether each passed, from results.json."""
    (results,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    found = {}
    for scenario in json.loads(results.read_text())["scenarios"]:
        (stage,) = scenario["stages"]
        assert stage["status"] == "passed", stage
        found[scenario["id"]] = [
            (c["id"], c["passed"]) for g in stage["grading"]["graders"] for c in g["criteria"]
        ]
    return found


def claude_plugin_eval(repo: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    """The bundled CLI's own runner on the drafted cases, against the drafted stub
    script, as its users run it (both arms: the CLI's default ablation)."""
    scratch = repo.parent / "cli"
    out = scratch / "out.json"
    with StubServer(load_script(repo / "stub" / "shapes.yaml")) as server:
        done = plugin_eval(
            repo / "plugin",
            scratch / "home",
            server.url,
            "--ablation",
            "with-without",
            "--json",
            str(out),
            "--output-dir",
            str(scratch / "results"),
            *flags,
        )
    assert out.is_file(), done.stdout + done.stderr
    document: dict[str, Any] = json.loads(out.read_text())
    return done.returncode, document


def cli_graders(document: dict[str, Any]) -> dict[str, list[tuple[str, bool]]]:
    """Per case, its with-arm run's graders and whether each passed."""
    found = {}
    for case in document["cases"]:
        (run,) = case["arms"]["with"]
        assert run["error"] is None, run
        found[case["name"]] = [(g["name"], g["passed"]) for g in run["graders"]]
    return found


@pytest.mark.slow
def test_skills_only_a_case_per_skill_that_both_tools_run_green(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "skills/outline/SKILL.md": SKILL.format(name="outline"),
            "skills/outline-long/SKILL.md": SKILL.format(name="outline-long"),
        },
    )
    printed = onboard(repo)
    assert printed.splitlines()[0] == (
        "drafted 2 claude plugin eval case(s) in plugin/evals/, one per part (skill outline, "
        "skill outline-long), and a suite running them (plugin_evals:) on the stub"
    )
    assert "claude plugin eval plugin --trust-plugin" in printed.splitlines()[-2]
    case = (repo / "plugin" / "evals" / "skill-outline" / "case.yaml").read_text()
    assert "Use the Skill tool to run the skill `shapes:outline`" in case
    # Its name, not a longer one's: `shapes:outline` must not count `shapes:outline-long`.
    assert "input_match: shapes:outline(?![\\w:-])" in case
    assert "plugin_evals:" in (repo / "ci-evals.yaml").read_text()
    assert '"skills/outline/**"' in (repo / "stage_map.yaml").read_text()
    both = [("skill-used", True), ("skill-loaded", True)]
    assert ci_evals_results(repo) == {"skill-outline": both, "skill-outline-long": both}
    code, document = claude_plugin_eval(repo)
    assert code == 0
    assert cli_graders(document) == {"skill-outline": both, "skill-outline-long": both}
    # Without the plugin the Skill call is still made (and counted), but nothing
    # loads: the trace grader fails, so the case measures the plugin (Δ 1).
    assert {c["name"]: c["aggregates"]["delta"] for c in document["cases"]} == {
        "skill-outline": 1,
        "skill-outline-long": 1,
    }


@pytest.mark.slow
def test_agents_only_a_case_per_agent_whose_subagent_really_runs(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"agents/critic.md": AGENT.format(name="critic")})
    printed = onboard(repo)
    assert "one per part (agent critic)" in printed.splitlines()[0]
    both = [("agent-used", True), ("agent-ran", True)]
    assert ci_evals_results(repo) == {"agent-critic": both}
    # The subagent ran and answered (the stub's rule for it), not a refused call.
    (stream,) = (repo / ".ci-evals" / "runs").glob("*/agent-critic/1-agent-critic/stream.jsonl")
    assert '"status":"completed"' in stream.read_text()
    assert "Findings of shapes:critic (stub)." in stream.read_text()
    code, document = claude_plugin_eval(repo)
    assert code == 0
    assert cli_graders(document) == {"agent-critic": both}


@pytest.mark.slow
def test_hooks_only_one_case_whose_trace_shows_the_session_start_hook(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "hooks/hooks.json": hooks_json(
                SessionStart=[SESSION_START],
                UserPromptSubmit=[{"hooks": [{"type": "command", "command": "echo seen"}]}],
            )
        },
    )
    printed = onboard(repo).splitlines()
    assert printed[:2] == [
        "drafted 1 claude plugin eval case(s) in plugin/evals/, one per part (hooks), and a "
        "suite running them (plugin_evals:) on the stub",
        "note: no case checks the UserPromptSubmit hook (echo seen): claude plugin eval's "
        "trace shows the runs of SessionStart hooks only (a stage draft checks it: its "
        "trajectory has every hook)",
    ]
    # The stub says nothing the hook check reads: the hook's own trace line passes it.
    assert "hook_response" not in (repo / "stub" / "shapes.yaml").read_text()
    both = [("session-start-ran", True), ("session-start-never-failed", True)]
    assert ci_evals_results(repo) == {"hooks": both}
    code, document = claude_plugin_eval(repo)
    assert code == 0
    assert cli_graders(document) == {"hooks": both}
    # A SessionStart hook that fails fails the case in the CLI (ci-evals alike: the
    # parity of the trace target, tests/suite/test_plugin_evals_parity.py).
    failing = {"hooks": [{"type": "command", "command": "echo broken >&2; exit 1"}]}
    write(
        repo / "plugin" / "hooks" / "hooks.json",
        hooks_json(SessionStart=[SESSION_START, failing]),
    )
    code, document = claude_plugin_eval(repo)
    assert code == 1
    assert cli_graders(document) == {
        "hooks": [("session-start-ran", True), ("session-start-never-failed", False)]
    }


def test_a_plugin_whose_parts_no_case_can_show_is_refused_naming_why(tmp_path: Path) -> None:
    stop = [{"hooks": [{"type": "command", "command": "true"}]}]
    repo = plugin_repo(tmp_path, {"hooks/hooks.json": hooks_json(Stop=stop)})
    proc = cli(repo, "init", "plugin", "--format", "cases")
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        "ci-evals: error: no claude plugin eval case can show a part of shapes fired: the "
        "Stop hook (true): claude plugin eval's trace shows the runs of SessionStart hooks "
        "only (a stage draft checks it: its trajectory has every hook) (draft stages "
        "instead (init without --format cases): a stage's trajectory shows every hook)"
    ]
    assert sorted(p.name for p in repo.iterdir()) == [".git", "plugin"]  # nothing written
    assert not (repo / "plugin" / "evals").exists()


def test_stage_options_with_cases_are_refused(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"skills/outline/SKILL.md": SKILL.format(name="outline")})
    proc = cli(repo, "init", "plugin", "--format", "cases", "--independent")
    assert proc.returncode != 0
    assert "--stages and --independent draft stages, not cases" in proc.stderr


def test_a_stage_draft_without_phases_says_cases_are_there(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"agents/critic.md": AGENT.format(name="critic")})
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: no phases: `ci-evals init --format cases` drafts claude plugin eval cases "
        "instead, which `claude plugin eval` runs too (docs/onboarding.md)"
    ) in proc.stdout.splitlines()


def test_an_eval_folder_git_ignores_is_said(tmp_path: Path) -> None:
    # As obra/superpowers ships it: its .gitignore holds `evals/`.
    repo = plugin_repo(
        tmp_path,
        {"skills/outline/SKILL.md": SKILL.format(name="outline"), ".gitignore": "evals/\n"},
    )
    proc = cli(repo, "init", "plugin", "--format", "cases")
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: plugin/evals/skill-outline/case.yaml is ignored by git (plugin/.gitignore:1: "
        "evals/): the cases would not be committed, nor run on a pull request; drop the "
        'rule, or name another eval folder in the plugin\'s manifest ("experimental": '
        '{"evals": "DIR"}) and draft again'
    ) in proc.stdout.splitlines()


def test_a_plugin_without_a_manifest_is_refused_as_the_cli_finds_no_plugin(
    tmp_path: Path,
) -> None:
    # As anthropics/claude-code's plugin-dev ships it: its marketplace entry alone
    # names it, and the CLI refused every drafted case ("no plugin resolved").
    repo = plugin_repo(tmp_path, {"skills/outline/SKILL.md": SKILL.format(name="outline")})
    (repo / "plugin" / ".claude-plugin" / "plugin.json").unlink()
    proc = cli(repo, "init", "plugin", "--format", "cases")
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        "ci-evals: error: claude plugin eval finds no plugin in plugin: it has no "
        ".claude-plugin/plugin.json of its own (its name comes from its folder name) (add "
        'one ({"name": "plugin"}), or draft stages (init without --format cases))'
    ]
    assert not (repo / "plugin" / "evals").exists()


def test_a_shell_command_without_a_bash_rule_gets_no_case_and_a_note(tmp_path: Path) -> None:
    # `!`git status`` runs as the command expands, under the run's grant; its
    # allowed-tools names no Bash rule to grant (with one: test_plugin_evals_shell.py).
    repo = plugin_repo(
        tmp_path,
        {
            "commands/commit.md": "---\ndescription: Commit\n---\n- Status: !`git status`\n",
            "skills/outline/SKILL.md": SKILL.format(name="outline"),
        },
    )
    proc = cli(repo, "init", "plugin", "--format", "cases")
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: no case checks the command commit: it runs `!`git status`` before the model "
        "sees it, which both claude plugin eval and ci-evals refuse without a Bash grant "
        "('Shell command permission check failed'), and its allowed-tools names no Bash "
        "rule to grant: add one (Bash(git status:*)), or a stage draft runs it"
    ) in proc.stdout.splitlines()
    assert sorted(p.name for p in (repo / "plugin" / "evals").iterdir()) == ["skill-outline"]
