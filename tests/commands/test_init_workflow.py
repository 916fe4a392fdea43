"""`ci-evals init` drafts `.github/workflows/evals.yml` (the README's job, the action
pinned to a full commit SHA) and every pre-commit hook the suite needs; it never
overwrites a file, and drafts no workflow where one runs ci-evals already."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci_evals.suite.draft_workflow import PLACEHOLDER, github_slug
from tests.actions_runner import runner_python
from tests.commands.test_init import repo_with_plugin
from tests.github.test_action_as_pasted import readme_workflow
from tests.onboarding_helpers import cli
from tests.paths import REPO

SHA = "0123456789abcdef0123456789abcdef01234567"
PIN = f"acme/ci-evals@{SHA}"
WORKFLOW = ".github/workflows/evals.yml"
TOOLS = Path(sys.executable).parent  # check-jsonschema and zizmor: dev dependencies


def steps_without_pin(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    (job,) = workflow["jobs"].values()
    steps = [dict(step) for step in job["steps"]]
    del steps[-1]["uses"]  # the pin: the README's is a placeholder
    return steps


def test_init_drafts_the_readmes_workflow_pinned_and_linted(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    done = cli(repo, "init", "plugin", "--action", PIN)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"wrote {WORKFLOW}" in lines
    assert f"{WORKFLOW}: the action pinned to {PIN} (--action)" in lines
    text = (repo / WORKFLOW).read_text(encoding="utf-8")
    drafted = yaml.safe_load(text)
    (job,) = drafted["jobs"].values()
    assert job["steps"][-1]["uses"] == PIN
    # The README's job, step for step (the suite at the top: nothing more to say).
    readme = readme_workflow()
    assert steps_without_pin(drafted) == steps_without_pin(readme)
    (readme_job,) = readme["jobs"].values()
    assert job["runs-on"] == readme_job["runs-on"]
    assert job["permissions"] == readme_job["permissions"] and drafted["permissions"] == {}
    for linter in (
        [TOOLS / "check-jsonschema", "--builtin-schema", "vendor.github-workflows", WORKFLOW],
        [TOOLS / "zizmor", "--offline", "--persona=pedantic", "--no-progress", WORKFLOW],
    ):
        linted = subprocess.run(linter, cwd=repo, capture_output=True, text=True, check=False)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_hooks_the_suite_needs_coverage_and_fixtures(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    assert cli(repo, "init", "plugin", "--action", PIN).returncode == 0
    config = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = {hook["id"]: hook for hook in config["repos"][0]["hooks"]}
    assert hooks["ci-evals-coverage"]["entry"] == "ci-evals check-coverage"
    assert hooks["ci-evals-fixtures"]["entry"] == "ci-evals check-fixtures --contracts-only"
    assert "args" not in hooks["ci-evals-fixtures"]  # the suite at the top: found there


def test_a_suite_below_the_top_is_named_to_the_action_and_the_hooks(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    done = cli(repo, "init", "plugin", "--into", "evals/dev", "--action", PIN)
    assert done.returncode == 0, done.stderr
    (job,) = yaml.safe_load((repo / WORKFLOW).read_text(encoding="utf-8"))["jobs"].values()
    given = job["steps"][-1]["with"]
    assert (given["suite"], given["stage-map"]) == (
        "evals/dev/ci-evals.yaml",
        "evals/dev/stage_map.yaml",
    )
    config = yaml.safe_load((repo / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = {hook["id"]: hook for hook in config["repos"][0]["hooks"]}
    assert hooks["ci-evals-fixtures"]["args"] == ["--suite", "evals/dev/ci-evals.yaml"]
    assert hooks["ci-evals-coverage"]["args"] == ["--map", "evals/dev/stage_map.yaml"]


def test_without_a_known_pin_the_placeholder_is_said(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    done = cli(repo, "init", "plugin")
    assert done.returncode == 0, done.stderr
    (job,) = yaml.safe_load((repo / WORKFLOW).read_text(encoding="utf-8"))["jobs"].values()
    uses = job["steps"][-1]["uses"]
    if uses == PLACEHOLDER:  # this ci-evals was not installed from a GitHub commit
        assert (
            f"{WORKFLOW}: replace {PLACEHOLDER} with the repository you host or mirror "
            "ci-evals in at a full commit SHA (or draft again with --action OWNER/NAME@SHA)"
        ) in done.stdout.splitlines()
    else:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", uses), uses


def test_the_pin_is_the_commit_pip_installed_ci_evals_from(tmp_path: Path) -> None:
    """`pip install git+https://github.com/acme/ci-evals@main` records the commit it
    resolved (PEP 610's direct_url.json, as pip writes it): the draft pins that."""
    bin_dir = runner_python(tmp_path)  # its own site-packages first, this repo's after
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(
        subprocess.run(
            [bin_dir / "python", "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    assert purelib != Path(sysconfig.get_paths()["purelib"])
    (purelib / "ci-evals-source.pth").write_text(f"{REPO}\n")  # the code, after its metadata
    info = purelib / "ci_evals-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ci-evals\nVersion: 0.1.0\n")
    direct = {
        "url": "https://github.com/acme/ci-evals.git",
        "vcs_info": {"vcs": "git", "commit_id": SHA, "requested_revision": "main"},
    }
    (info / "direct_url.json").write_text(json.dumps(direct))
    repo = repo_with_plugin(tmp_path)
    done = subprocess.run(
        [bin_dir / "python", "-m", "ci_evals", "init", "plugin"],
        cwd=repo, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (job,) = yaml.safe_load((repo / WORKFLOW).read_text(encoding="utf-8"))["jobs"].values()
    assert job["steps"][-1]["uses"] == PIN
    assert (
        f"{WORKFLOW}: the action pinned to {PIN} (the commit ci-evals was installed from "
        "(https://github.com/acme/ci-evals.git))"
    ) in done.stdout.splitlines()


def test_an_existing_workflow_is_never_overwritten(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    (repo / ".github/workflows").mkdir(parents=True)
    (repo / WORKFLOW).write_text("name: something else\n")
    done = cli(repo, "init", "plugin", "--action", PIN)
    assert done.returncode == 0, done.stderr
    assert (repo / WORKFLOW).read_text() == "name: something else\n"
    assert f"kept {WORKFLOW} (exists; not overwritten)" in done.stdout.splitlines()


def test_no_workflow_is_drafted_where_one_runs_ci_evals(tmp_path: Path) -> None:
    repo = repo_with_plugin(tmp_path)
    (repo / ".github/workflows").mkdir(parents=True)
    mine = "on: [push]\njobs: {e: {runs-on: x, steps: [{uses: acme/ci-evals@v1}]}}\n"
    (repo / ".github/workflows/ci.yml").write_text(mine)
    done = cli(repo, "init", "plugin", "--action", PIN)
    assert done.returncode == 0, done.stderr
    assert not (repo / WORKFLOW).exists()
    assert ".github/workflows/ci.yml runs ci-evals already: no workflow drafted" in done.stdout


@pytest.mark.parametrize("given", ["acme/ci-evals@v1", "acme/ci-evals@main", "ci-evals@" + SHA])
def test_an_action_not_pinned_to_a_commit_is_refused_before_any_file(
    tmp_path: Path, given: str
) -> None:
    repo = repo_with_plugin(tmp_path)
    done = cli(repo, "init", "plugin", "--action", given)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert f"{given!r} is not OWNER/NAME@SHA with a full 40-character commit SHA" in line
    assert "Traceback" not in done.stderr
    assert not (repo / "ci-evals.yaml").exists() and not (repo / ".github").exists()


@pytest.mark.parametrize(
    ("url", "slug"),
    [
        ("https://github.com/acme/ci-evals.git", "acme/ci-evals"),
        ("git+https://github.com/acme/ci-evals@v1", "acme/ci-evals"),
        ("git@github.com:acme/ci-evals.git", "acme/ci-evals"),
        ("ssh://git@github.com/acme/ci-evals", "acme/ci-evals"),
        ("https://x-access-token:t@github.com/acme/ci-evals/", "acme/ci-evals"),
        ("https://gitlab.com/acme/ci-evals", None),
        ("file:///srv/ci-evals", None),
    ],
)
def test_github_slug(url: str, slug: str | None) -> None:
    assert github_slug(url) == slug
