"""The core install, as `evals-comment.yml` installs it: from git, no extra.

This project's installable files are committed in a git repository standing in
for GitHub (`git+file://…`), and the workflow's own *Install ci-evals* step runs
in a fresh venv: `pip install "ci-evals @ git+SERVER/REPOSITORY@SHA"`
(pydantic and the rest of the core from the index, no agent SDK). On that
install `report` writes every output, refuses an invalid results file in one
line, `--version` names the commit, and the rest of the comment job —
`baseline fetch`, then `comment --from-artifact` — posts the sticky comment on the stand-in GitHub.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci_evals.github.fork_artifact import PullRequestRef
from ci_evals.results.model import dump_results, write_results
from tests.actions_runner import ActionsRunner
from tests.conftest import git
from tests.github.test_comment import MARKER, PR, REPO, TOKEN
from tests.github.test_workflow_runs import Artifacts
from tests.github_actions_fake import ActionsGitHub, actions_github, zip_of
from tests.install_helpers import (
    AGENT_MODULES,
    PROJECT,
    absent,
    ci_evals,
    clean_env,
    copy_installable,
    new_venv,
)
from tests.report.test_report import a_run, failed_stage, passed_stage, scenario

__all__ = ["actions_github"]  # the stand-in GitHub (comments, runs, artifacts)

WORKFLOW = PROJECT / ".github" / "workflows" / "evals-comment.yml"
HEAD = "a" * 40
FORK = "mallory/widgets"
OWNER_REPO = "acme/ci-evals"  # where the comment workflow's own code lives


def comment_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["comment"]
    return job


def runner_for(tmp_path: Path, name: str, bin_dir: Path, **github: str) -> ActionsRunner:
    """A runner of the comment job (nothing checked out), `bin_dir` first on PATH as
    setup-python puts its interpreter; the proxies out, the stand-in is local."""
    env = clean_env(PATH=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin")
    env = {k: v for k, v in env.items() if not k.startswith("GITHUB_")}
    payload = {
        "action": "completed",
        "workflow_run": {
            "id": 4242,
            "event": "pull_request",
            "head_sha": HEAD,
            "head_repository": {"full_name": FORK},
            "pull_requests": [],  # a fork's
        },
        "repository": {"default_branch": "main"},
    }
    runner = ActionsRunner(
        workspace=tmp_path / f"{name}-workspace",
        temp=tmp_path / f"{name}-temp",
        event_name="workflow_run",
        event=payload,
        github={"token": TOKEN, **github},
        base_env=env,
    )
    runner.workspace.mkdir()
    return runner


@pytest.fixture(scope="module")
def source_commit(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(server URL, commit): the installable files committed at SERVER/acme/ci-evals."""
    server = tmp_path_factory.mktemp("git-server")
    repo = server / OWNER_REPO
    repo.mkdir(parents=True)
    copy_installable(repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ci-evals as the default branch holds it")
    # A host in the URL: pip reads `git+file:///…` (no host) as no URL at all.
    return f"file://localhost{server}", git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def report_venv(
    tmp_path_factory: pytest.TempPathFactory, source_commit: tuple[str, str]
) -> tuple[Path, str]:
    """(venv, what its install step printed): the workflow's *Install ci-evals* step run in a
    fresh venv, as it is written."""
    work = tmp_path_factory.mktemp("report-install")
    bin_dir = new_venv(work / "venv")
    server, sha = source_commit
    (install,) = [s for s in comment_job()["steps"] if s.get("name") == "Install ci-evals"]
    runner = runner_for(work, "install", bin_dir, server_url=server, repository=OWNER_REPO, sha=sha)
    # The index is needed here (pydantic): the proxies stay for pip.
    runner.base_env = clean_env(PATH=runner.base_env["PATH"])
    # Its `if:` asks whether an artifact was downloaded: here the install alone runs.
    runner.run_step({k: v for k, v in install.items() if k != "if"}, {})
    (done,) = runner.steps
    assert done.returncode == 0, runner.log()
    return work / "venv", done.stdout


@pytest.mark.slow
def test_the_workflow_installs_the_report_extra_and_no_agent_sdk(
    report_venv: tuple[Path, str],
) -> None:
    venv, _ = report_venv
    assert absent(venv, ("pydantic", "yaml", "pathspec", *AGENT_MODULES)) == list(AGENT_MODULES)


@pytest.mark.slow
def test_version_names_the_commit_installed_from_git(
    report_venv: tuple[Path, str], source_commit: tuple[str, str], tmp_path: Path
) -> None:
    venv, printed = report_venv
    _, sha = source_commit
    from ci_evals import __version__  # noqa: PLC0415

    line = f"ci-evals {__version__} (git {sha[:12]})"
    assert printed == line + "\n"  # the install step prints it
    done = ci_evals(venv, tmp_path, "--version")
    assert (done.returncode, done.stdout) == (0, line + "\n")


@pytest.mark.slow
def test_an_agent_command_still_names_the_run_extra(
    report_venv: tuple[Path, str], tmp_path: Path
) -> None:
    done = ci_evals(report_venv[0], tmp_path, "run", "--help")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "needs the agent dependencies: pip install 'ci-evals[run]'" in line
    assert "missing: claude_agent_sdk, anthropic, jsonschema" in line


@pytest.mark.slow
def test_report_writes_every_output_on_the_report_install(
    report_venv: tuple[Path, str], tmp_path: Path
) -> None:
    venv, _ = report_venv
    run, baseline = tmp_path / "run", tmp_path / "baseline"
    write_results(run, a_run(scenario("acme", passed_stage(1), failed_stage(2))))
    write_results(baseline, a_run(scenario("acme", passed_stage(1), passed_stage(2))))
    out = tmp_path / "out"
    done = ci_evals(
        venv,
        tmp_path,
        "report",
        str(run),
        "--markdown",
        str(out / "summary.md"),
        "--junit",
        str(out / "junit.xml"),
        "--html",
        str(out / "site"),
        "--baseline",
        str(baseline),
    )
    assert done.returncode == 1, done.stderr  # stage 2 failed: the verdict, not a crash
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "### Against the baseline" in summary and "### Cost" in summary
    cases = ET.parse(out / "junit.xml").getroot().iter("testcase")
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and "s2" in str(failed[0])
    assert (out / "site" / "index.html").is_file()


@pytest.mark.slow
def test_an_invalid_results_file_is_refused_in_one_line_on_the_report_install(
    report_venv: tuple[Path, str], tmp_path: Path
) -> None:
    """The same model validates: an unknown field fails closed, as with every extra."""
    data = json.loads(dump_results(a_run(scenario("acme", passed_stage(1)))))
    data["scenarios"][0]["stages"][0]["verdict"] = "passed"  # no such field
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    done = ci_evals(report_venv[0], tmp_path, "report", str(tmp_path))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "not a valid results file" in line and "scenarios.0.stages.0.verdict" in line
    assert done.stdout == ""


@pytest.mark.slow
def test_the_comment_job_posts_on_the_report_install(
    report_venv: tuple[Path, str], tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    """The rest of evals-comment.yml as written, on the install its own step made: the
    baseline fetched, the fork's artifact checked, the sticky comment posted."""
    github = actions_github
    base = a_run(scenario("acme", passed_stage(1), passed_stage(2)))
    github.add_artifact(github.add_run(), zip_of({"results.json": dump_results(base)}))
    github.pulls[PR] = {
        "number": PR,
        "state": "open",
        "head": {"sha": HEAD, "repo": {"full_name": FORK}},
    }
    store = tmp_path / "artifacts"
    packed = store / "ci-evals-pr"
    packed.mkdir(parents=True)
    fork_run = a_run(scenario("acme", passed_stage(1), failed_stage(2)))
    (packed / "results.json").write_bytes(dump_results(fork_run))
    (packed / "pr.json").write_text(PullRequestRef(PR, HEAD).as_json(), encoding="utf-8")

    venv, _ = report_venv
    runner = runner_for(
        tmp_path, "comment", venv / "bin", repository=REPO, sha="c" * 40, api_url=github.url
    )
    runner.run_job(
        comment_job(),
        uses={"actions/download-artifact": Artifacts(runner, store).download_zipped},
        provided=frozenset({"Install ci-evals"}),  # the fixture ran that very step
    )
    assert runner.failed() == [], runner.log()
    ran = {s.name for s in runner.steps if s.returncode == 0}
    assert {"Baseline", "Check the artifact and comment"} <= ran
    (posted,) = github.comments
    assert posted["body"].startswith(MARKER)
    assert "### Against the baseline" in posted["body"]
    assert "**No baseline:**" not in posted["body"]
