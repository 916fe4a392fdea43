"""`ci-evals init` on the feature-dev test plugin (tests/data/onboarding/):
what it drafts passes check-coverage (also through the real pre-commit framework)
and `ci-evals check` at once, and runs end to end with the real CLI on the stub."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci_evals.suite import draft
from ci_evals.suite.plugin_source import plugin_at
from tests.conftest import git
from tests.onboarding_helpers import (
    COMMIT_COMMANDS,
    cli,
    copy_feature_dev,
    follow_printed_lines,
    write,
)

STAGES = "explore,architect,implement"


def repo_with_plugin(tmp_path: Path, folder: str = "plugin") -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    if folder == ".":
        copy_feature_dev(tmp_path, "repo-plugin")
        for item in (tmp_path / "repo-plugin").iterdir():
            item.rename(repo / item.name)
    else:
        copy_feature_dev(repo, folder)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the plugin, as its authors wrote it")
    return repo


def snapshot(top: Path) -> dict[str, bytes]:
    return {
        p.relative_to(top).as_posix(): p.read_bytes()
        for p in sorted(top.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(top).parts
    }


@pytest.mark.slow
def test_init_drafts_a_suite_that_checks_and_runs_on_the_stub(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    pin = "acme/ci-evals@" + "0" * 40
    proc = cli(repo, "init", "plugin", "--stages", STAGES, "--action", pin)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "drafted phases, as --stages names them: explore, architect, implement",
        "wrote stage_map.yaml",
        "wrote ci-evals.yaml",
        "wrote stub/feature-dev.yaml",
        "wrote fixtures/1-explore-output/outputs/explore.md",
        "wrote fixtures/2-architect-output/outputs/architect.md",
        "wrote fixtures/3-implement-output/outputs/implement.md",
        "wrote .pre-commit-config.yaml",
        "wrote .github/workflows/evals.yml",
        "wrote .gitignore: /.ci-evals/ (run folders, never committed)",
        f".github/workflows/evals.yml: the action pinned to {pin} (--action)",
        "next: git add -A && ci-evals check-coverage && ci-evals check --model "
        "stub:stub/feature-dev.yaml && ci-evals run --model stub:stub/feature-dev.yaml",
    ]
    suite = (repo / "ci-evals.yaml").read_text()
    # Each stage's prompt comes from the command, says which part it is, and where
    # to write what its check reads.
    assert (
        'prompt: "/feature-dev:feature-dev {feature-dev} (ci-evals stage architect: '
        "do only this stage's part, write it to outputs/architect.md, then stop)\"" in suite
    )
    # The command stops to ask the user: the draft says where, and what to do.
    # confirm, answers, approach, approval, review: the other places, by line
    assert (
        "# commands/feature-dev.md:12 (also lines 23, 37, 46, 50, 60) stops for a person:" in suite
    )
    assert '"Wait for user answers before writing code"' in suite
    # The input is a plausible value of the kind the hint names, not the hint itself.
    assert (
        '    # feature-dev\'s argument-hint is "The feature to build (optional)": a made-up value\n'
        '    inputs: { "feature-dev": "add a --verbose flag that prints each step" }\n'
    ) in suite
    stage_map = (repo / "stage_map.yaml").read_text()
    assert '{ glob: "/agents/code-explorer.md", stage: explore }' in stage_map

    git(repo, "add", "-A")
    coverage = cli(repo, "check-coverage")
    assert coverage.returncode == 0, coverage.stdout + coverage.stderr
    stub = "stub:stub/feature-dev.yaml"
    checked = cli(repo, "check", "--model", stub, "--from-stage", "3")
    assert checked.returncode == 0, checked.stderr

    for start in ("1", "2"):
        out = tmp_path / f"run-from-{start}"
        ran = cli(repo, "run", "--model", stub, "--from-stage", start, "--out", str(out))
        assert ran.returncode == 0, ran.stdout + ran.stderr
        results = json.loads((out / "results.json").read_text())
        stages = results["scenarios"][0]["stages"]
        expected = {"1": ["explore", "architect", "implement"], "2": ["architect", "implement"]}
        assert [s["name"] for s in stages] == expected[start]
        assert {s["status"] for s in stages} == {"passed"}
        for stage in stages:  # the stub script matched every request of every stage
            trajectory = (out / stage["trajectory"]).read_text()
            assert "stub: no rule matched" not in trajectory
            assert "has no turn" not in trajectory
    explore = (tmp_path / "run-from-1" / "example" / "1-explore" / "trajectory.jsonl").read_text()
    for agent in ("code-architect", "code-explorer", "code-reviewer"):
        assert f"Placeholder findings of {agent} (stub)." in explore  # each subagent ran


def test_init_never_overwrites(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    assert cli(repo, "init", "plugin", "--stages", STAGES).returncode == 0
    (repo / "ci-evals.yaml").write_text("# mine now\n")
    before = snapshot(repo)
    again = cli(repo, "init", "plugin", "--stages", STAGES)
    assert again.returncode == 0, again.stderr
    assert snapshot(repo) == before
    assert not [line for line in again.stdout.splitlines() if line.startswith("wrote ")]
    assert "kept ci-evals.yaml (exists; not overwritten)" in again.stdout
    # The pre-commit file has the hook already (the first init wrote it): no offer to add it.
    assert "add to .pre-commit-config.yaml's repos:" not in again.stdout
    assert ".gitignore" not in again.stdout  # /.ci-evals/ is ignored already


def test_init_offers_its_hook_to_a_pre_commit_file_without_it(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    (repo / ".pre-commit-config.yaml").write_text("repos: []\n")
    (repo / ".gitignore").write_text("*.pyc")  # no newline at its end
    proc = cli(repo, "init", "plugin", "--stages", STAGES)
    assert proc.returncode == 0, proc.stderr
    assert "kept .pre-commit-config.yaml (exists; not overwritten)" in proc.stdout
    assert "add to .pre-commit-config.yaml's repos:" in proc.stdout
    assert "id: ci-evals-coverage" in proc.stdout
    assert "added /.ci-evals/ to .gitignore (run folders, never committed)" in proc.stdout
    assert (repo / ".gitignore").read_text() == "*.pyc\n/.ci-evals/\n"


def test_a_plugin_at_the_repository_top_and_the_real_pre_commit_hook(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path, ".")
    proc = cli(repo, "init")  # one stage per command: feature-dev
    assert proc.returncode == 0, proc.stderr
    assert "wrote fixtures/1-feature-dev-output/outputs/feature-dev.md" in proc.stdout
    # Its own files live inside the plugin's root: global, so nothing is uncovered.
    assert (
        'global: ["ci-evals.yaml", "stub", ".pre-commit-config.yaml", '
        '"/.github/workflows/evals.yml", "/.gitignore"]' in (repo / "stage_map.yaml").read_text()
    )
    git(repo, "add", "-A")
    home = tmp_path / "pre-commit-home"
    framework = subprocess.run(
        [Path(sys.executable).parent / "pre-commit", "run", "--all-files"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={
            **os.environ,
            "PRE_COMMIT_HOME": str(home),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )
    assert framework.returncode == 0, framework.stdout + framework.stderr
    assert "stage map covers every plugin file" in framework.stdout
    assert "fixtures hold the stages' contracts" in framework.stdout  # the second hook
    assert cli(repo, "check", "--model", "stub:stub/feature-dev.yaml").returncode == 0


def test_odd_file_names_get_entries_that_match_only_them(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    odd = ["notes [old].md", "a*b?.md", "#hash.md", "!bang.md", "back\\slash.md", "trail.md "]
    for name in odd:
        write(repo / "plugin" / name, "x\n")
    write(repo / "plugin" / "skills" / "t[1]" / "SKILL.md", "A skill.\n")
    git(repo, "add", "-A")
    assert cli(repo, "init", "plugin").returncode == 0
    git(repo, "add", "-A")
    coverage = cli(repo, "check-coverage")  # every file covered, every entry used
    assert coverage.returncode == 0, coverage.stdout + coverage.stderr
    assert "13 entries" in coverage.stdout, coverage.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("plugin", "--stages", "explore=nope"), "stage 'explore': the plugin has no command"),
        (("plugin", "--stages", "Explore"), "--stages: bad stage name 'Explore'"),
        (("plugin", "--stages", "a,a"), "--stages: stage 'a' is named twice"),
        (("missing",), "no such folder: missing"),
        ((".",), "has no commands, skills, agents or hooks"),  # a folder above the plugin
        (("plugin", "--plugin", "x"), "--plugin: plugin is not a marketplace"),
    ],
)
def test_mistakes_are_one_line_and_write_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    repo = repo_with_plugin(tmp_path)
    before = snapshot(repo)
    proc = cli(repo, "init", *args)
    assert proc.returncode == 2
    assert len(proc.stderr.splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert snapshot(repo) == before


def test_components_take_the_lowest_stage_that_names_them(tmp_path: Path) -> None:
    """A fixed point over who names whom; what nothing names is stage 1 (fail closed)."""
    plugin = tmp_path / "p"
    write(plugin / ".claude-plugin" / "plugin.json", '{"name": "lab"}')
    write(plugin / "commands" / "plan.md", "Plan $ARGUMENTS with the planner agent.\n")
    write(plugin / "commands" / "write.md", "Use the drafting skill to write.\n")
    write(plugin / "agents" / "planner.md", "---\nname: planner\n---\nFill templates/plan.md.\n")
    write(plugin / "agents" / "orphan.md", "No one calls me.\n")
    write(plugin / "skills" / "drafting" / "SKILL.md", "Follow chapter.md.\n")
    write(plugin / "skills" / "drafting" / "notes.md", "More.\n")
    write(plugin / "templates" / "plan.md", "# Plan\n")
    write(plugin / "templates" / "chapter.md", "# Chapter\n")
    files = [p.relative_to(plugin).as_posix() for p in plugin.rglob("*") if p.is_file()]
    planned = draft.plan(plugin_at(plugin), "p", files, "plan,write")
    stages = {entry.glob: entry.stage for entry in planned.entries}
    assert stages == {
        "/.claude-plugin/plugin.json": 1,
        "/commands/plan.md": 1,
        "/commands/write.md": 2,
        "/agents/planner.md": 1,  # named by plan.md
        "/agents/orphan.md": 1,  # named by nothing
        "skills/drafting/**": 2,  # named by write.md
        "/templates/plan.md": 1,  # named by the planner (stage 1) -- and by plan.md's name
        "/templates/chapter.md": 2,  # named by the skill (stage 2)
    }
    assert planned.stages[0].input_name == "plan"  # $ARGUMENTS: an input
    assert planned.stages[1].input_name is None  # no arguments
    assert dict(planned.agents) == {"orphan": 1, "planner": 1}


def test_a_plugin_name_check_would_refuse_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """init promises a suite that passes `ci-evals check`: a manifest name the suite
    loader refuses (it names the commands, /NAME:command) must stop init, not the check."""
    repo = repo_with_plugin(tmp_path)
    write(repo / "plugin/.claude-plugin/plugin.json", '{"name": "feature dev:x"}\n')
    git(repo, "commit", "-qam", "a name with a space and a colon")
    before = snapshot(repo)
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 2, proc.stdout
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "plugin.json:1: name: not a plain plugin name: 'feature dev:x'" in proc.stderr
    assert snapshot(repo) == before


@pytest.mark.slow
def test_the_evals_layout_end_to_end_following_only_the_printed_lines(tmp_path: Path) -> None:
    """docs/onboarding.md's layout: the plugin vendored in `evals/feature-dev/plugin`,
    `init` run from `evals/feature-dev/`, then exactly the commands it printed."""
    repo = tmp_path / "repo"
    here = repo / "evals" / "feature-dev"
    here.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    copy_feature_dev(here, "plugin")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the plugin, vendored")
    proc = cli(here, "init", "plugin", "--stages", STAGES)
    assert proc.returncode == 0, proc.stderr
    follow_printed_lines(here, proc.stdout)
    assert "?? " not in git(repo, "status", "--porcelain")  # the run folder is ignored
    assert ".ci-evals" not in git(repo, "ls-files")
    git(repo, "commit", "-q", "-m", "evals")

    def answer(path: Path, text: str) -> str:
        with path.open("a") as handle:
            handle.write(text)
        git(repo, "commit", "-q", "-am", f"edit {path.name}")
        out = cli(here, "compute-stage", "HEAD~1")  # the map found from here, as the suite is
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert answer(here / "stub" / "feature-dev.yaml", "# more\n") == "1"  # a stub edit: all
    assert answer(here / "plugin" / "agents" / "code-reviewer.md", "More.\n") in {"1", "2", "3"}


def _vendored(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A repository with `name` (tests/data/onboarding/) vendored in `evals/<name>/plugin`."""
    repo = tmp_path / "repo"
    here = repo / "evals" / name
    here.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    copy_feature_dev(here, "plugin", COMMIT_COMMANDS)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the plugin, vendored")
    return repo, here


def _only_results(here: Path) -> dict[str, Any]:
    (found,) = (here / ".ci-evals" / "runs").glob("*/results.json")
    data: dict[str, Any] = json.loads(found.read_text())
    return data


@pytest.mark.slow
def test_commands_that_run_git_onboard_end_to_end_following_only_the_printed_lines(
    tmp_path: Path,
) -> None:
    """The done-criterion of issue 22: commit-commands' `commit` fills its prompt
    with `` !`git status` ``, `` !`git diff HEAD` ``...; `init` drafts `git: true`,
    the printed line runs it to a pass on the real CLI, and compute-stage answers."""
    repo, here = _vendored(tmp_path, "commit-commands")
    proc = cli(here, "init", "plugin")
    assert proc.returncode == 0, proc.stderr
    suite = (here / "ci-evals.yaml").read_text()
    assert "    # commands/commit.md:8 runs `!`git ...`` first" in suite
    assert suite.endswith("\n    git: true\n")  # on the drafted scenario
    follow_printed_lines(here, proc.stdout)

    (stage,) = _only_results(here)["scenarios"][0]["stages"]
    assert (stage["name"], stage["status"], stage["model_ran"]) == ("commit", "passed", True)
    assert stage["turns"] >= 1 and stage["error"] is None
    assert [p["path"] for p in stage["produced"]] == ["outputs/commit.md"]  # no .git/...
    trajectory = (here / ".ci-evals" / "runs").glob(f"*/{stage['trajectory']}")
    text = next(trajectory).read_text()
    assert "Shell command failed" not in text and "stub: no rule matched" not in text
    after = next((here / ".ci-evals" / "runs").glob("*/example/1-commit/after"))
    assert sorted(p.name for p in after.iterdir()) == ["outputs"]  # no .git, no link
    links = json.loads((after.parent / "after.links.json").read_text())
    assert "commands" in json.dumps(links)  # the plugin's link, recorded as data

    assert "?? " not in git(repo, "status", "--porcelain")
    git(repo, "commit", "-q", "-m", "evals")

    def answer(path: Path, text: str, old: str | None = None) -> str:
        if old is None:
            with path.open("a") as handle:
                handle.write(text)
        else:
            path.write_text(path.read_text().replace(old, text))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"edit {path.name}")
        out = cli(here, "compute-stage", "HEAD~1")
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert answer(here / "plugin" / "commands" / "commit.md", "Be brief.\n") == "1"
    assert answer(here / "stub" / "commit-commands.yaml", "# more\n") == "1"
    assert answer(here / "ci-evals.yaml", "max_turns: 31", old="max_turns: 30") == "1"
    assert answer(here / "ci-evals.yaml", "# a comment only\n") == "none"
    assert answer(repo / "NOTES.md", "Not the plugin.\n") == "none"


@pytest.mark.slow
def test_a_stage_whose_command_cannot_expand_never_reaches_the_model(tmp_path: Path) -> None:
    """Without `git: true` the CLI's `` !`git status --short` `` fails before any
    model turn: the stage is `error` with the CLI's own line, not `failed`, and the
    cost line does not count it as a live run."""
    _, here = _vendored(tmp_path, "commit-commands")
    assert cli(here, "init", "plugin").returncode == 0
    suite = here / "ci-evals.yaml"
    suite.write_text(suite.read_text().replace("    git: true\n", ""))
    ran = cli(here, "run", "--model", "stub:stub/commit-commands.yaml")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    (stage,) = _only_results(here)["scenarios"][0]["stages"]
    assert (stage["status"], stage["model_ran"], stage["turns"]) == ("error", False, 0)
    # The bundled CLI's own message; it runs the expansions at once, so any may be first
    # (`git diff HEAD` says "warning: Not a git repository. Use --no-index ...").
    expected = (
        r'the model never ran: Shell command failed for pattern "!`git [a-zA-Z0-9 -]+`": '
        r"\[stderr\] (fatal|warning): not a git repository"
    )
    assert re.match(expected, stage["error"], re.IGNORECASE), stage["error"]
    assert stage["error"].endswith(
        "(the workspace is no git repository: `git: true` on scenario 'example' makes it "
        "one, docs/suite.md)"
    )
    assert stage["grading"] is None  # nothing was graded
    run_dir = next((here / ".ci-evals" / "runs").iterdir())
    report = cli(here, "report", str(run_dir))
    assert "(error): the model never ran: Shell command failed" in report.stdout
    assert "0 stage run(s) (1 more never reached the model)" in report.stdout


SABOTAGE = """\
rules:
  - name: commit
    match: {command: "commit-commands:commit"}
    turns:
      - tools:
          - write: {path: "outputs/commit.md", content: "done\\n"}
          - bash: "rm -rf .git/objects .git/refs; echo garbage > .git/HEAD"
      - text: "Committed (stub)."
"""


@pytest.mark.slow
def test_a_repository_an_earlier_stage_broke_is_the_agents_failure(tmp_path: Path) -> None:
    """Stage 1's agent (it passes) deletes the workspace's objects and refs: stage 2's
    `` !`git ...` `` expansions fail and it never reaches the model. That is the
    agent's doing, not the infrastructure's: its k-of-n verdict is `failed`, never
    an `error` that takes the repeats out of the count (measured before the fix:
    `error`, "0 of 2 runs passed (needs 2); 2 ended in error")."""
    _, here = _vendored(tmp_path, "commit-commands")
    assert cli(here, "init", "plugin").returncode == 0
    suite = here / "ci-evals.yaml"
    stage_two = '  - name: again\n    prompt: "/commit-commands:commit again"\n'
    text = suite.read_text().replace("scenarios:\n", f"{stage_two}scenarios:\n")
    suite.write_text(text)
    (here / "stub" / "commit-commands.yaml").write_text(SABOTAGE)
    stage_map = here / "stage_map.yaml"
    stage_map.write_text(stage_map.read_text().replace("stages: [commit]", "stages: [commit, again]"))  # fmt: skip  # noqa: E501
    ran = cli(here, "run", "--model", "stub:stub/commit-commands.yaml", "--repeat", "2")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    results = _only_results(here)
    stages = [(s["number"], s["status"], s["model_ran"]) for r in results["scenarios"] for s in r["stages"]]  # fmt: skip  # noqa: E501
    assert stages == [(1, "passed", True), (2, "error", False)] * 2
    verdicts = {s["stage"]: s["summary"]["verdict"] for s in results["summaries"]}
    assert verdicts == {1: "passed", 2: "failed"}
    (two,) = [s["summary"] for s in results["summaries"] if s["stage"] == 2]
    assert (two["failed"], two["errors"]) == (2, 0)
    run_dir = next((here / ".ci-evals" / "runs").iterdir())
    assert cli(here, "report", str(run_dir)).returncode == 1  # consistent, and failed
