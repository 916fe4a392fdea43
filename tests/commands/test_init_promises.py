"""What `ci-evals init`'s draft promises a real model (issue 33): each stage's
prompt says where to write what its check reads; inputs come from the
command's own examples and argument hint, never its name or a value outside
the hint's choices; prose that runs git or gh makes the scenario a repository;
phases come from a file one command writes and another reads, never from one
command naming another, and `--independent` forces a scenario per command.
Each plugin is written here in that shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import git
from tests.onboarding_helpers import cli, follow_printed_lines, write


def plugin_repo(tmp_path: Path, commands: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    write(repo / "plugin" / ".claude-plugin" / "plugin.json", '{"name": "kit"}\n')
    for name, text in commands.items():
        write(repo / "plugin" / "commands" / f"{name}.md", text)
    return repo


def init(repo: Path, *args: str) -> str:
    proc = cli(repo, "init", "plugin", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_command_stage_prompt_says_where_to_write_what_its_check_reads(
    tmp_path: Path,
) -> None:
    repo = plugin_repo(
        tmp_path, {"summarize": "---\nargument-hint: [file]\n---\nSummarize $ARGUMENTS.\n"}
    )
    init(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        '    prompt: "/kit:summarize {summarize} (then write the result to outputs/summarize.md)"\n'
    ) in suite
    assert 'files: "outputs/summarize.md"' in suite


LIST_PENDING = """\
    ---
    argument-hint: [--last N]
    ---
    List the pending reviews: $ARGUMENTS

    ```
    /list-pending            # all of them
    /list-pending --last 5   # the five newest
    ```
    """


def test_inputs_come_from_the_commands_own_example_and_hint_never_its_name(
    tmp_path: Path,
) -> None:
    repo = plugin_repo(
        tmp_path,
        {
            "list-pending": LIST_PENDING,
            "setup": "---\nargument-hint: [--resume]\n---\nSet up. $ARGUMENTS\n",
            "explain": "---\ndescription: Explain\n---\nExplain $ARGUMENTS.\n",
        },
    )
    init(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        "  - id: explain\n"
        '    inputs: { command: "explain", arguments: "a small example task on the files in '
        'this workspace (then write the result to outputs/command.md)" }\n'
        "  - id: list-pending\n"
        "    # as commands/list-pending.md shows it run\n"
        '    inputs: { command: "list-pending", arguments: "--last 5 (then write the result '
        'to outputs/command.md)" }\n'
        "  - id: setup\n"
        '    # setup\'s argument-hint is "[--resume]": a made-up value\n'
        '    inputs: { command: "setup", arguments: "(then write the result to '
        'outputs/command.md)" }\n'
    ) in suite


HELP = """\
    ---
    description: List the commands
    ---
    - `/kit:build` builds the bundle
    - `/kit:deploy` deploys it (run /kit:build first)
    """
BUILD = "---\ndescription: Build\n---\nBuild the app and write the bundle to dist/bundle.js.\n"
DEPLOY = "---\ndescription: Deploy\n---\nRun /kit:build first, then upload dist/bundle.js.\n"


def test_naming_another_command_is_no_dependency_a_file_read_is(tmp_path: Path) -> None:
    repo = plugin_repo(
        tmp_path,
        {"help": HELP, "build": "---\ndescription: Build\n---\nBuild the app.\n", "deploy": DEPLOY},
    )
    # help names every command, deploy names build: neither reads a file another writes.
    assert (
        init(repo)
        .splitlines()[0]
        .startswith(
            "drafted independent commands (build, deploy, help): none reads another's output"
        )
    )
    repo = plugin_repo(tmp_path / "files", {"help": HELP, "build": BUILD, "deploy": DEPLOY})
    assert init(repo).splitlines()[0] == (
        "drafted phases, in turn: build, deploy, help (deploy reads dist/bundle.js, from build)"
    )


def test_independent_forces_a_scenario_per_command(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"build": BUILD, "deploy": DEPLOY})
    assert init(repo, "--independent").splitlines()[0] == (
        "drafted independent commands (build, deploy): as --independent asks, so one stage "
        "runs each as its own scenario (phases instead: --stages A,B,...)"
    )
    both = cli(repo, "init", "plugin", "--independent", "--stages", "a,b", "--into", "other")
    assert both.returncode == 2
    assert both.stderr.strip().splitlines() == [
        "ci-evals: error: --independent: --independent and --stages ask for opposite drafts "
        "(give one: --stages for phases, --independent for a scenario per command)"
    ]


REVIEW = """\
    ---
    description: Review the change
    ---
    Run `git diff HEAD` and review what changed. Then write a summary.
    """
PR = """\
    ---
    argument-hint: [pr-number]
    ---
    Read the pull request with `gh pr view $ARGUMENTS` and review it.
    """


def test_git_from_prose_makes_the_workspace_a_repository(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"review": REVIEW})
    init(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        "    # commands/review.md:4 has the model run `git diff`: the workspace is a repository,\n"
        "    # the seed fixtures/0-<name>/ its one commit (docs/suite.md#a-git-workspace)\n"
        "    git: true\n"
    ) in suite
    repo = plugin_repo(tmp_path / "gh", {"pr": PR})
    init(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert "has the model run `gh pr`" in suite
    assert "gh needs GitHub and a network, which the sandbox does not have" in suite
    assert "    git: true\n" in suite


@pytest.mark.slow
def test_a_command_that_runs_git_in_prose_goes_green_on_the_stub(tmp_path: Path) -> None:
    repo = plugin_repo(tmp_path, {"review": REVIEW})
    # The stub runs what the command tells the model to run: a repository answers.
    printed = init(repo)
    stub = repo / "stub" / "kit.yaml"
    stub.write_text(
        stub.read_text().replace(
            "      - tools:\n", "      - tools:\n          - bash: git diff HEAD --stat\n", 1
        )
    )
    follow_printed_lines(repo, printed)
    (trajectory,) = (repo / ".ci-evals" / "runs").glob("*/example/1-review/trajectory.jsonl")
    # git's "Not a git repository", from the Bash call, before this change
    assert "not a git repository" not in trajectory.read_text().lower()


LOOP = """\
    ---
    argument-hint: PROMPT [--max-iterations N]
    ---
    ```!
    "${CLAUDE_PLUGIN_ROOT}/scripts/setup.sh" $ARGUMENTS
    ```
    Work on the task.
    """


def test_arguments_handed_to_a_shell_get_nothing_appended(tmp_path: Path) -> None:
    # ralph-wiggum's ralph-loop: `(then write ...)` there was a bash syntax error, and
    # the stage an error before the model ran.
    repo = plugin_repo(tmp_path, {"loop": LOOP, "help": "---\ndescription: Help\n---\nHelp.\n"})
    init(repo)
    suite = (repo / "ci-evals.yaml").read_text()
    assert (
        "  - id: loop\n"
        "    # commands/loop.md hands its arguments to a shell (`!`...$ARGUMENTS``):\n"
        "    # nothing is added to them to say where to write; check what it writes itself\n"
        '    # loop\'s argument-hint is "PROMPT [--max-iterations N]": a made-up value\n'
        '    inputs: { command: "loop", arguments: "example-PROMPT" }\n'
    ) in suite
    repo = plugin_repo(tmp_path / "one", {"loop": LOOP})
    init(repo)
    assert '    prompt: "/kit:loop {loop}"\n' in (repo / "ci-evals.yaml").read_text()
