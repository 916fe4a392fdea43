"""`ci-evals init` on every shape of plugin people ship (suite.draft_shapes):
skills only, agents only, a SessionStart hook alone, an output style, a Stop
hook that feeds the prompt back, commands with skills and agents. Each plugin
is written here in that shape; each goes init -> check -> stub run green by the
printed lines alone, and its checks show the part fired in the trajectory."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from tests.onboarding_helpers import cli, follow_printed_lines, write


def plugin_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo / "plugin" / ".claude-plugin" / "plugin.json", '{"name": "shapes"}\n')
    for path, text in files.items():
        target = write(repo / "plugin" / path, text)
        if path.endswith(".sh"):
            target.chmod(0o755)
    return repo


SKILL = """\
    ---
    name: {name}
    description: Writes a {name} note. Use when asked for one.
    ---
    Write a {name} note for the task.
    """
AGENT = """\
    ---
    name: {name}
    description: Reviews things
    ---
    You are the {name}.
    """
ANSWER = json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart"}})
SESSION_START = json.dumps(
    {
        "hooks": {
            "SessionStart": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": f"echo '{ANSWER}'",
                        }
                    ]
                }
            ]
        }
    }
)
# Feeds the prompt back, as ralph-wiggum's does, until its state file is gone.
STOP_LOOP = """\
    #!/bin/sh
    cat > /dev/null
    [ -f .loop-state ] || exit 0
    echo '{"decision": "block", "reason": "keep going"}'
    """
LOOP_COMMAND = """\
    ---
    description: Start the loop
    argument-hint: TASK
    ---
    Run `touch .loop-state` first, then work on: $ARGUMENTS
    """


def onboard(repo: Path) -> str:
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    follow_printed_lines(repo, proc.stdout)
    return proc.stdout


def criteria(repo: Path) -> dict[str, list[tuple[str, bool]]]:
    """Per stage, every criterion's id and whether it passed, from results.json."""
    (results,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    data = json.loads(results.read_text())
    found = {}
    for scenario in data["scenarios"]:
        for stage in scenario["stages"]:
            found[stage["name"]] = [
                (c["id"], c["passed"])
                for grader in stage["grading"]["graders"]
                for c in grader["criteria"]
            ]
    return found


@pytest.mark.slow
def test_skills_only_a_stage_per_skill_that_shows_the_skill_fired(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "skills/outline/SKILL.md": SKILL.format(name="outline"),
            "skills/recap/SKILL.md": SKILL.format(name="recap"),
        },
    )
    printed = onboard(repo)
    assert printed.splitlines()[0] == (
        "drafted a stage per skill and agent (skill outline, skill recap): the plugin has "
        "no commands"
    )
    suite = (repo / "ci-evals.yaml").read_text()
    assert "Use the Skill tool to run the skill `shapes:outline`" in suite
    got = criteria(repo)
    assert got["outline"] == [
        ("outline-output-written", True),
        ("trajectory:skill-used:shapes:outline", True),
    ]
    assert got["recap"][1] == ("trajectory:skill-used:shapes:recap", True)
    stage_map = (repo / "stage_map.yaml").read_text()
    assert '{ glob: "skills/recap/**", stage: recap }' in stage_map


@pytest.mark.slow
def test_agents_only_a_stage_per_agent_that_shows_the_subagent_ran(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"agents/critic.md": AGENT.format(name="critic")})
    printed = onboard(repo)
    assert "(agent critic)" in printed.splitlines()[0]
    assert criteria(repo)["critic"] == [
        ("critic-output-written", True),
        ("trajectory:subagent-used:shapes:critic", True),
    ]


@pytest.mark.slow
def test_a_session_start_hook_alone_a_plain_stage_that_shows_it_ran(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"hooks/hooks.json": SESSION_START})
    printed = onboard(repo)
    assert printed.splitlines()[0] == (
        "drafted one plain-prompt stage, session: the plugin has no commands, skills or "
        "agents (hooks on SessionStart)"
    )
    assert criteria(repo)["session"] == [
        ("session-output-written", True),
        ("trajectory:hook-used:SessionStart", True),
    ]


@pytest.mark.slow
def test_an_output_style_a_plain_stage_and_no_vacuous_check(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {"output-styles/terse.md": "---\nname: terse\ndescription: Short\n---\nBe terse.\n"},
    )
    onboard(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert "leaves nothing in the trajectory to check" in suite
    assert criteria(repo)["session"] == [("session-output-written", True)]


@pytest.mark.slow
def test_a_stop_hook_that_feeds_the_prompt_back_is_bounded(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "commands/loop.md": LOOP_COMMAND,
            "hooks/hooks.json": '{"hooks": {"Stop": [{"hooks": [{"type": "command", '
            '"command": "${CLAUDE_PLUGIN_ROOT}/hooks/stop.sh"}]}]}}\n',
            "hooks/stop.sh": STOP_LOOP,
        },
    )
    # The stub's stage touches the state file, as the command says.
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    stub = repo / "stub" / "shapes.yaml"
    text = stub.read_text()
    assert "repeat_last: true" in text
    stub.write_text(
        text.replace("      - tools:\n", "      - tools:\n          - bash: touch .loop-state\n", 1)
    )
    follow_printed_lines(repo, proc.stdout)
    assert ("trajectory:hook-used:Stop", True) in criteria(repo)["loop"]
    # Without repeat_last, the stub says why the CLI asked for more than it scripts.
    stub.write_text(stub.read_text().replace("    repeat_last: true\n", ""))
    done = cli(repo, "run", "--model", "stub:stub/shapes.yaml")
    assert done.returncode != 0
    assert (
        "the CLI went on past the script's last turn because the plugin's Stop hook refused "
        "to let the turn end and fed back 'keep going'"
    ) in done.stdout


@pytest.mark.slow
def test_commands_with_skills_and_agents_keep_the_command_stages(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "commands/draft.md": "---\ndescription: Draft\n---\nUse the outline skill.\n",
            "skills/outline/SKILL.md": SKILL.format(name="outline"),
            "skills/recap/SKILL.md": SKILL.format(name="recap"),
            "agents/critic.md": AGENT.format(name="critic"),
            "hooks/hooks.json": SESSION_START,
        },
    )
    printed = onboard(repo)
    assert printed.splitlines()[0] == (
        "drafted one stage, draft: the plugin's only command; then skill recap, agent "
        "critic, which no command names"
    )
    got = criteria(repo)
    assert list(got) == ["draft", "recap", "critic"]
    assert ("trajectory:hook-used:SessionStart", True) in got["draft"]
    assert all(passed for stage in got.values() for _, passed in stage)


def test_check_fails_a_stub_script_without_a_rule_for_a_stage_command(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "commands/draft.md": "---\ndescription: Draft\n---\nWrite it.\n",
            "agents/critic.md": AGENT.format(name="critic"),
        },
    )
    assert cli(repo, "init", "plugin").returncode == 0
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    stub = repo / "stub" / "shapes.yaml"
    stub.write_text(
        stub.read_text()
        .replace('command: "shapes:draft"', 'command: "shapes:drafts"')
        .replace('match: {agent: "shapes:critic"}', 'match: {agent: "shapes:critics"}')
        .replace('name: "shapes:critic"', 'name: "shapes:critics"')
    )
    proc = cli(repo, "check", "--model", "stub:stub/shapes.yaml")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "ci-evals check: stage draft runs /shapes:draft, but stub/shapes.yaml has no rule for "
        "it (match: {command: shapes:draft})",
        "ci-evals check: stage critic checks that the subagent shapes:critic ran, but "
        "stub/shapes.yaml has no rule for it (match: {agent: shapes:critic}, launched by an "
        "agent: call)",
        "ci-evals check: 2 problems; nothing was started",
    ]


def _hook_plugin(tmp_path: Path, script: str) -> Path:
    """A plugin whose SessionStart hook runs `hooks/x.sh`, drafted and staged."""
    repo = plugin_repo(
        tmp_path,
        {
            "hooks/hooks.json": '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", '
            '"command": "${CLAUDE_PLUGIN_ROOT}/hooks/x.sh"}]}]}}\n',
            "hooks/x.sh": script,
        },
    )
    assert cli(repo, "init", "plugin").returncode == 0
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    return repo


@pytest.mark.slow
def test_a_hook_that_needs_the_network_fails_within_seconds_naming_itself(
    tmp_path: Path,
) -> None:
    # In the sandbox (bwrap, no network) npm would retry the lookup for 71 s, past
    # the SDK's 60 s initialize: the stage was an error saying nothing of the hook.
    # The agent's environment tells npm to work offline: it fails at once.
    if shutil.which("npx") is None:
        pytest.fail("this test needs npx on PATH (apt-get install npm)")
    # The name built at run time: the draft cannot see the fetch, and checks the hook.
    repo = _hook_plugin(tmp_path, "#!/bin/sh\nrun=np; ${run}x -y ci-evals-no-such-package-x1 hi\n")
    done = cli(repo, "run", "--model", "stub:stub/shapes.yaml")
    assert "Control request timeout" not in done.stdout + done.stderr
    (results,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    (stage,) = json.loads(results.read_text())["scenarios"][0]["stages"]
    assert stage["duration_s"] < 30, stage
    (hook,) = [c for g in stage["grading"]["graders"] for c in g["criteria"] if "hook" in c["id"]]
    assert not hook["passed"]
    assert hook["detail"].startswith(
        "hook 'SessionStart' (SessionStart:startup) ran 1 time(s), never succeeded "
        "(error, exit 1): npm error code ENOTCACHED"
    ), hook["detail"]


@pytest.mark.slow
def test_a_hook_still_running_after_ten_seconds_is_said_while_the_stage_waits(
    tmp_path: Path,
) -> None:
    repo = _hook_plugin(tmp_path, "#!/bin/sh\nsleep 12\n")
    done = cli(repo, "run", "--model", "stub:stub/shapes.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    # The run's progress (plain lines off a terminal) names the hook and its command.
    assert (
        "example stage 1 session: hook SessionStart:startup (plugin hooks/x.sh) still "
        "running after 10 s"
    ) in done.stderr


def _agent_plugin(tmp_path: Path, manifest: str) -> Path:
    """A plugin of one agent, `critic`, whose manifest is `manifest`."""
    repo = plugin_repo(tmp_path, {"agents/critic.md": AGENT.format(name="critic")})
    write(repo / "plugin" / ".claude-plugin" / "plugin.json", manifest + "\n")
    return repo


def test_init_refuses_a_plugin_claude_code_does_not_load_quoting_its_reason(
    tmp_path: Path,
) -> None:
    # As wshobson/agents' pptx-deck-creation ships it: `agents` names a folder, which
    # the bundled CLI's loader refuses; its draft could only fail every stage.
    repo = _agent_plugin(tmp_path, '{"name": "shapes", "agents": ["./agents"]}')
    proc = cli(repo, "init", "plugin")
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert proc.stderr == (
        "ci-evals: error: plugin/.claude-plugin/plugin.json: Claude Code does not load this "
        'plugin: agents.0: Invalid string: must end with ".md" (fix it as the reason says '
        "(claude plugin validate PLUGIN_DIR lists every problem); as it is, every stage "
        "would fail with that reason)\n"
    )
    assert sorted(p.name for p in repo.iterdir()) == [".git", "plugin"]  # nothing written


def test_init_says_what_claude_code_loads_the_plugin_without(tmp_path: Path) -> None:
    repo = _agent_plugin(
        tmp_path, '{"name": "shapes", "agents": ["./agents/critic.md", "./agents/gone.md"]}'
    )
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1] == (
        "note: Claude Code loads the plugin less a part: Path not found: agents/gone.md (agents)"
    )


@pytest.mark.slow
def test_a_manifest_claude_code_loads_but_validate_calls_wrong_is_onboarded(
    tmp_path: Path,
) -> None:
    # `claude plugin validate` says "author: expected object"; the loader ignores it.
    repo = _agent_plugin(
        tmp_path, '{"name": "shapes", "author": "someone", "agents": ["./agents/critic.md"]}'
    )
    onboard(repo)
    assert criteria(repo)["critic"][1] == ("trajectory:subagent-used:shapes:critic", True)


@pytest.mark.slow
def test_a_plugin_claude_code_does_not_load_is_an_error_saying_why(tmp_path: Path) -> None:
    # A manifest broken after `init` (init refuses it before): every stage is an
    # error quoting the CLI, not a failure of its checks.
    repo = plugin_repo(tmp_path, {"agents/critic.md": AGENT.format(name="critic")})
    assert cli(repo, "init", "plugin").returncode == 0
    write(
        repo / "plugin" / ".claude-plugin" / "plugin.json",
        '{"name": "shapes", "agents": ["./agents"]}\n',
    )
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    done = cli(repo, "run", "--model", "stub:stub/shapes.yaml")
    assert done.returncode != 0
    (results,) = (repo / ".ci-evals" / "runs").glob("*/results.json")
    (stage,) = json.loads(results.read_text())["scenarios"][0]["stages"]
    assert stage["status"] == "error"
    assert stage["error"] == (
        "Claude Code did not load the plugin: Failed to load plugin: Plugin plugin has an "
        "invalid manifest file at PLUGIN/.claude-plugin/plugin.json. Validation errors: "
        'agents.0: Invalid string: must end with ".md"'
    )


def test_a_hook_script_that_fetches_a_package_gets_no_check_and_the_draft_says_why(
    tmp_path: Path,
) -> None:
    # The fetch inside the plugin script the hook runs, not in hooks.json: a check
    # on it would fail every run, within seconds, for the sandbox's sake.
    repo = _hook_plugin(tmp_path, "#!/bin/sh\n# sign the call\nexec npx -y pkg@1 sign\n")
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        "      # no check of the SessionStart hook (${CLAUDE_PLUGIN_ROOT}/hooks/x.sh): its "
        "script hooks/x.sh runs `npx` (line 3), which needs the network the sandbox does "
        "not have (it fails at once, offline): vendor what it fetches, or check it by hand\n"
    ) in suite
    assert "{ hook:" not in suite
    # A script without one keeps its check.
    (tmp_path / "other").mkdir()
    other = _hook_plugin(tmp_path / "other", "#!/bin/sh\necho hi\n")
    assert '{ trajectory: { hook: "SessionStart" } }' in (other / "ci-evals.yaml").read_text()


@pytest.mark.slow
def test_a_hook_that_fetches_a_package_gets_no_check_and_the_draft_says_why(
    tmp_path: Path,
) -> None:
    # As wshobson/agents' protect-mcp: its hooks run `npx protect-mcp@0.7.4 ...` on
    # every tool call; offline each fails at once, and a check on it fails every run.
    hooks = {
        "hooks": {
            "PostToolUse": [
                {"matcher": ".*", "hooks": [{"type": "command", "command": "npx pkg@1 sign"}]}
            ]
        }
    }
    repo = plugin_repo(tmp_path, {"hooks/hooks.json": json.dumps(hooks)})
    onboard(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        "      # no check of the PostToolUse hook (npx pkg@1 sign): it runs `npx`, which needs "
        "the network the sandbox does not have (it fails at once, offline): vendor what it "
        "fetches, or check it by hand\n"
    ) in suite
    assert criteria(repo)["session"] == [("session-output-written", True)]
