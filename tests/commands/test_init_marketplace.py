"""A marketplace of many plugins, `init --plugin` run for one after another at
its top: each suite in its own folder (`evals/<plugin>/`) with its own map,
fixtures and stub, a `next:` line that runs only that suite, every map in the
one pre-commit hook (run by the real pre-commit framework), a long plugin list
one per line, and a `.gitignore` that hides the suites said by `init` and `check`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import git
from tests.onboarding_helpers import cli, follow_printed_lines, write

PLUGINS = ("alpha", "beta", "gamma")


def marketplace(tmp_path: Path, names: tuple[str, ...] = PLUGINS) -> Path:
    """A repository whose marketplace lists `names`, each a plugin of one command in
    `plugins/<name>/` with no manifest (the entry names it)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    entries = [{"name": name, "source": f"./plugins/{name}"} for name in names]
    write(
        repo / ".claude-plugin" / "marketplace.json",
        json.dumps({"name": "many", "owner": {"name": "x"}, "plugins": entries}, indent=2),
    )
    for name in names:
        write(
            repo / "plugins" / name / "commands" / f"{name}-run.md",
            f"---\ndescription: {name}\nargument-hint: [topic]\n---\n"
            f"Write what {name} says about $ARGUMENTS to outputs/{name}.md.\n",
        )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the marketplace")
    return repo


def with_ci_evals(repo: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """`argv` in `repo`, ci-evals (this virtualenv's bin) first on PATH, `env` added."""
    bin_dir = Path(sys.executable).parent
    return subprocess.run(
        argv,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", **env},
    )


def pre_commit(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The real pre-commit framework on every file, with ci-evals on PATH."""
    bin_dir = Path(sys.executable).parent
    return with_ci_evals(
        repo,
        [str(bin_dir / "pre-commit"), "run", "--all-files"],
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
    )


def hook_args(repo: Path) -> list[str]:
    config = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text())
    (hook,) = [h for r in config["repos"] for h in r["hooks"] if h["id"] == "ci-evals-coverage"]
    return [str(arg) for arg in hook.get("args", [])]


def test_three_plugins_drafted_in_turn_never_mix(tmp_path: Path) -> None:
    repo = marketplace(tmp_path)
    printed = {}
    for name in PLUGINS:
        proc = cli(repo, "init", ".", "--plugin", name)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        printed[name] = proc.stdout
        kept = [line for line in proc.stdout.splitlines() if line.startswith("kept ")]
        assert kept in ([], ["kept .pre-commit-config.yaml (exists; not overwritten)"]), kept
        assert (
            f"wrote evals/{name}/.gitignore: /.ci-evals/ (run folders, never committed)"
            in proc.stdout
        )
        last = proc.stdout.splitlines()[-1]
        assert last == (
            f"next: cd evals/{name} && git add -A && ci-evals check-coverage && "
            f"ci-evals check --model stub:stub/{name}.yaml && "
            f"ci-evals run --model stub:stub/{name}.yaml"
        )
    for name in PLUGINS:
        here = repo / "evals" / name
        suite = yaml.safe_load((here / "ci-evals.yaml").read_text())
        assert suite["plugin"] == {"marketplace": "../..", "name": name}
        assert suite["stages"][0]["prompt"].startswith(f"/{name}:{name}-run")
        assert (
            yaml.safe_load((here / "stage_map.yaml").read_text())["root"] == f"../../plugins/{name}"
        )
        assert sorted(p.name for p in (here / "fixtures").iterdir()) == [f"1-{name}-run-output"]
        assert sorted(p.name for p in (here / "stub").iterdir()) == [f"{name}.yaml"]
    assert not (repo / "ci-evals.yaml").exists() and not (repo / "fixtures").exists()
    # The first init wrote the hook; each later one added its map to it.
    assert "wrote .pre-commit-config.yaml" in printed["alpha"]
    for name in ("beta", "gamma"):
        assert (
            f"added --map evals/{name}/stage_map.yaml to the ci-evals-coverage hook in "
            ".pre-commit-config.yaml"
        ) in printed[name]
    assert hook_args(repo) == [a for n in PLUGINS for a in ("--map", f"evals/{n}/stage_map.yaml")]
    again = cli(repo, "init", ".", "--plugin", "beta")  # nothing new: said, not added twice
    assert "checks evals/beta/stage_map.yaml already" in again.stdout
    assert len(hook_args(repo)) == 6

    git(repo, "add", "-A")
    framework = pre_commit(repo, tmp_path)
    assert framework.returncode == 0, framework.stdout + framework.stderr
    # Every suite's map is checked: a file beta's map does not cover fails the hook.
    write(repo / "plugins" / "beta" / "agents" / "helper.md", "A helper.\n")
    git(repo, "add", "-A")
    framework = pre_commit(repo, tmp_path)
    assert framework.returncode == 1, framework.stdout + framework.stderr
    assert "plugins/beta/agents/helper.md: not covered by any entry" in framework.stdout
    assert "evals/beta/stage_map.yaml" in framework.stdout


def git_hook_commit(repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`git commit` through the plain-sh hooks/pre-commit (core.hooksPath), run by
    dash, the shell git starts it with here (`#!/bin/sh`), ci-evals on PATH."""
    hooks = Path(__file__).resolve().parents[2] / "hooks"
    git(repo, "config", "core.hooksPath", str(hooks))
    return with_ci_evals(repo, ["git", "commit", "-qm", "change"], **env)


def test_the_plain_sh_hook_checks_every_suites_map(tmp_path: Path) -> None:
    repo = marketplace(tmp_path)
    for name in PLUGINS:
        assert cli(repo, "init", ".", "--plugin", name).returncode == 0
    (repo / ".pre-commit-config.yaml").unlink()  # the git hook alone
    write(repo / "tests" / "data" / "stage_map.yaml", "not a map: [\n")  # no suite beside it
    git(repo, "add", "-A")
    done = git_hook_commit(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    # (git hands a hook's output to stderr)
    assert done.stderr.count("ci-evals: stage map OK") == 3, done.stderr
    # A file gamma's map does not cover stops the commit, named with the map.
    write(repo / "plugins" / "gamma" / "agents" / "helper.md", "A helper.\n")
    git(repo, "add", "-A")
    done = git_hook_commit(repo)
    assert done.returncode != 0
    assert "plugins/gamma/agents/helper.md: not covered by any entry" in done.stderr
    assert "evals/gamma/stage_map.yaml" in done.stderr
    # CI_EVALS_MAP names maps instead, several separated by ':' (gamma's left out).
    done = git_hook_commit(
        repo, CI_EVALS_MAP="evals/alpha/stage_map.yaml:evals/beta/stage_map.yaml"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.count("ci-evals: stage map OK") == 2, done.stderr


def test_a_hook_without_args_keeps_checking_the_top_map(tmp_path: Path) -> None:
    """A suite at the top (its hook has no --map) and then a marketplace plugin's: the
    hook names both, the top map first, so neither goes unchecked."""
    repo = marketplace(tmp_path, ("alpha", "beta"))
    assert cli(repo, "init", ".", "--plugin", "alpha", "--into", ".").returncode == 0
    assert hook_args(repo) == []
    proc = cli(repo, "init", ".", "--plugin", "beta")
    assert proc.returncode == 0, proc.stderr
    assert hook_args(repo) == ["--map", "stage_map.yaml", "--map", "evals/beta/stage_map.yaml"]
    git(repo, "add", "-A")
    framework = pre_commit(repo, tmp_path)
    assert framework.returncode == 0, framework.stdout + framework.stderr


def test_a_long_plugin_list_is_one_per_line(tmp_path: Path) -> None:
    names = tuple(f"plugin-{i:02d}" for i in range(12))
    repo = marketplace(tmp_path, names)
    proc = cli(repo, "init")
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [f"  {n}  (./plugins/{n})" for n in names]
    (line,) = proc.stderr.splitlines()
    assert "is a marketplace of 12 plugins (listed above)" in line
    assert "choose one: ci-evals init . --plugin NAME" in line


def test_a_gitignore_hiding_the_suite_is_said_by_init_and_check(tmp_path: Path) -> None:
    """superpowers ignores `evals/`: the drafted suite would run here and never on a PR."""
    repo = marketplace(tmp_path, ("alpha",))
    write(repo / ".gitignore", "# local harness\nevals/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ignore evals")
    proc = cli(repo, "init", ".", "--plugin", "alpha")
    assert proc.returncode == 0, proc.stderr
    said = (
        "evals/alpha/ci-evals.yaml is ignored by git (.gitignore:2: evals/): the suite "
        "would not be committed, nor run on a pull request; un-ignore its folder (evals/* "
        "and !/evals/alpha/ in place of evals/), or draft the suite elsewhere "
        "(ci-evals init --into DIR)"
    )
    assert said in proc.stdout.splitlines()
    here = repo / "evals" / "alpha"
    checked = cli(here, "check", "--model", "stub:stub/alpha.yaml")
    assert checked.returncode == 0, checked.stderr
    from_here = said.replace("evals/alpha/ci-evals.yaml", "ci-evals.yaml").replace(
        "(.gitignore:", "(../../.gitignore:"
    )
    assert checked.stderr.splitlines() == [f"ci-evals check: warning: {from_here}"]
    # What the line says works: un-ignored, nothing is said.
    write(repo / ".gitignore", "# local harness\nevals/*\n!/evals/alpha/\n")
    assert cli(here, "check", "--model", "stub:stub/alpha.yaml").stderr == ""


@pytest.mark.slow
def test_the_third_plugin_runs_green_following_only_its_printed_lines(tmp_path: Path) -> None:
    repo = marketplace(tmp_path)
    for name in PLUGINS:
        proc = cli(repo, "init", ".", "--plugin", name)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    here = follow_printed_lines(repo, proc.stdout)
    assert here == repo / "evals" / "gamma"
    (found,) = (here / ".ci-evals" / "runs").glob("*/results.json")
    results = json.loads(found.read_text())
    assert results["suite"]["plugin"] == "gamma"
    assert [s["status"] for s in results["scenarios"][0]["stages"]] == ["passed"]
    assert "?? " not in git(repo, "status", "--porcelain")
