"""This repository's own workflows, run: a fork's pull request from `evals.yml`
to the comment `evals-comment.yml` posts.

The checkout is a copy of this repository (its tracked and new files) as a
git repository with a base commit and a pull request commit that edits a
stage-5 agent of the example. Each job's steps run with bash in an
Actions-like environment (tests/actions_runner.py): `select` installs the
core, runs compute-stage and plans the shards (`ci-evals plan`: the matrix);
one `shard` job per matrix entry (no ANTHROPIC_API_KEY: a fork) runs its
units of stage 5 on the stub model and uploads its run folder; `evals`
downloads them (played by the test), merges, reports and packs; the
artifacts it uploads are handed to `evals-comment`, whose download step is
played by the test and whose `ci-evals comment --from-artifact` posts to the
stand-in GitHub server. What this machine already has stands in for two
install steps (`sudo apt-get` for bubblewrap; pip from the repository over
the network).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.actions_runner import ActionsRunner, ArtifactStore, runner_env, runner_python
from tests.conftest import git
from tests.github.test_comment import MARKER, PR, REPO, TOKEN, FakeGitHub
from tests.github_actions_fake import ActionsGitHub, actions_github
from tests.paths import REPO as REPO_DIR

__all__ = ["actions_github"]  # the stand-in GitHub (comments, runs, artifacts), shared

ROOT = REPO_DIR
WORKFLOWS = ROOT / ".github" / "workflows"
FORK = "mallory/ci-evals"
AGENT = "examples/labsmith/plugin/agents/chapter-implementer.md"


def workflow(name: str) -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return data


def checkout(tmp_path: Path) -> tuple[Path, str, str]:
    """This repository at a base commit, then a PR commit touching a stage-5 agent."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    repo = tmp_path / "checkout"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    agent = repo / AGENT
    agent.write_text(agent.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    git(repo, "commit", "-q", "-am", "tweak the chapter implementer")
    return repo, base, git(repo, "rev-parse", "HEAD").strip()


class Artifacts(ArtifactStore):
    """Plays upload-artifact and download-artifact: a name -> folder store."""

    def __init__(self, runner: ActionsRunner, store: Path) -> None:
        super().__init__(store)
        self.runner = runner

    def download(self, step: Mapping[str, Any]) -> None:
        """The artifact zipped into `path` (`skip-decompress`): its files at the root."""
        assert self.runner is not None
        options = step["with"]
        assert options["run-id"] == "${{ github.event.workflow_run.id }}"
        assert options["skip-decompress"] is True
        target = Path(self.runner.evaluate(options["path"], {}))
        target.mkdir(parents=True)
        source = self.store / options["name"]
        with zipfile.ZipFile(target / f"{options['name']}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(source.iterdir()):
                zf.write(path, path.name)


def fork_pr_run(tmp_path: Path, store: Path, github: FakeGitHub) -> tuple[ActionsRunner, str]:
    """`evals.yml` on a fork's pull request: both jobs; returns the evals runner and HEAD."""
    repo, base, head = checkout(tmp_path)
    bin_dir = runner_python(tmp_path)
    payload = {
        "number": PR,
        "pull_request": {"number": PR, "base": {"sha": base}, "head": {"sha": head}},
    }
    context_base_ref = "main"
    # The fork's run holds a read-only token: it may read runs and artifacts (the baseline).
    context = {
        "repository": REPO,
        "sha": head,
        "token": TOKEN,
        "api_url": github.url,
        "base_ref": context_base_ref,
    }
    evals = workflow("evals.yml")

    select = ActionsRunner(
        workspace=repo,
        temp=tmp_path / "select-temp",
        event_name="pull_request",
        event=payload,
        github=context,
        base_env=runner_env(bin_dir),
    )
    outputs = select.run_job(evals["jobs"]["select"])
    assert outputs is not None, select.log()
    matrix = json.loads(outputs.pop("matrix"))
    assert outputs == {"from_stage": "5", "fixture_stages": "", "shards": "2"}, select.log()
    # The example's two scenarios, a shard each, from the stage compute-stage chose.
    assert matrix == {"include": [{"shard": f"{k}/2", "from_stage": "5"} for k in (1, 2)]}
    needs = {"select": {"outputs": {**outputs, "matrix": json.dumps(matrix)}}}

    shard_job = evals["jobs"]["shard"]
    assert shard_job["strategy"]["matrix"] == "${{ fromJSON(needs.select.outputs.matrix) }}"
    for index, entry in enumerate(matrix["include"]):
        shard = ActionsRunner(
            workspace=repo,  # one checkout: each shard job writes its .ci-evals/run, uploads it
            temp=tmp_path / f"shard-{index}-temp",
            event_name="pull_request",
            event=payload,
            github=context,
            base_env=runner_env(bin_dir),
            secrets={},  # a fork's pull request gets none
            needs=needs,
            matrix=entry,
            strategy={"job-index": str(index)},
        )
        shard.run_job(
            shard_job,
            uses={"actions/upload-artifact": Artifacts(shard, store).upload},
            provided=frozenset({"Install bubblewrap and ci-evals"}),  # sudo; done by select
        )
        assert shard.failed() == [], shard.log()
        (run_step,) = [s for s in shard.steps if s.name == "Run the shard"]
        assert "::notice title=ci-evals::no ANTHROPIC_API_KEY: the stub model" in run_step.stdout
        shutil.rmtree(repo / ".ci-evals")  # the next job's checkout is fresh

    runner = ActionsRunner(
        workspace=repo,
        temp=tmp_path / "evals-temp",
        event_name="pull_request",
        event=payload,
        github=context,
        base_env=runner_env(bin_dir),
        secrets={},
        needs=needs | {"shard": {"outputs": {}}},
    )
    artifacts = Artifacts(runner, store)
    runner.run_job(
        evals["jobs"]["evals"],
        uses={
            "actions/upload-artifact": artifacts.upload,
            "actions/download-artifact": artifacts.download_pattern,
        },
        provided=frozenset({"Install ci-evals"}),  # pip: done by the select job
    )
    assert runner.failed() == [], runner.log()
    return runner, head


def comment_run(
    tmp_path: Path, github: FakeGitHub, store: Path, head: str, name: str
) -> ActionsRunner:
    """`evals-comment.yml`, triggered by that run's completion."""
    payload = {
        "action": "completed",
        "workflow_run": {
            "id": 4242,
            "event": "pull_request",
            "head_sha": head,
            "head_repository": {"full_name": FORK},
            "pull_requests": [],  # always empty for a fork
        },
        "repository": {"default_branch": "main"},
    }
    runner = ActionsRunner(
        workspace=tmp_path / f"{name}-workspace",  # nothing checked out: an empty folder
        temp=tmp_path / f"{name}-temp",
        event_name="workflow_run",
        event=payload,
        github={"repository": REPO, "sha": "c" * 40, "token": TOKEN, "api_url": github.url},
        base_env=runner_env(tmp_path / "runner-python" / "bin"),
    )
    runner.workspace.mkdir()
    artifacts = Artifacts(runner, store)
    runner.run_job(
        workflow("evals-comment.yml")["jobs"]["comment"],
        uses={"actions/download-artifact": artifacts.download},
        provided=frozenset({"Install ci-evals"}),  # pip from the repository: the network
    )
    return runner


@pytest.mark.slow
def test_a_fork_pr_is_evaluated_on_the_stub_and_commented_by_the_trusted_workflow(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    github = actions_github
    github.add_run(conclusion="failure")  # main has no successful evals run yet: no baseline
    store = tmp_path / "artifacts"
    evals, head = fork_pr_run(tmp_path, store, github)

    (merge_step,) = [s for s in evals.steps if s.name == "Merge the shards"]
    assert merge_step.stdout.startswith("merged 2 shard(s), 2 unit(s)"), merge_step.stdout
    summary = evals.summary.read_text(encoding="utf-8")
    assert "## ci-evals: passed" in summary
    assert "simulated" in summary
    assert "- Shards: 2 x " in summary  # the merged run's runner time, in Cost
    assert sorted(p.name for p in store.iterdir()) == [
        "ci-evals-pr", "ci-evals-run", "ci-evals-shard-0", "ci-evals-shard-1",
    ]  # fmt: skip
    assert sorted(p.name for p in (store / "ci-evals-pr").iterdir()) == ["pr.json", "results.json"]
    assert (store / "ci-evals-run" / "junit.xml").is_file()
    assert "**No baseline:** no successful run of evals.yml on main" in summary
    assert {r.method for r in github.requests} == {"GET"}  # the untrusted run only reads
    merged = json.loads((store / "ci-evals-pr" / "results.json").read_text())
    assert [s["id"] for s in merged["scenarios"]] == ["acme-arm", "acme-arm-students"]
    assert len(merged["merged_shards"]) == 2

    github.pulls[PR] = {
        "number": PR,
        "state": "open",
        "head": {"sha": head, "repo": {"full_name": FORK}},
    }
    comment = comment_run(tmp_path, github, store, head, "comment")
    assert comment.failed() == [], comment.log()
    (posted,) = github.comments
    assert posted["body"].startswith(
        f"{MARKER}\n_From the pull request's own run (workflow run 4242"
    )
    assert "(stub model: a wiring check, not a model verdict)" in posted["body"]
    assert "**No baseline:**" in posted["body"] and "### Cost" in posted["body"]

    # The same artifact, its PR number changed to another pull request's: nothing posted.
    pr_file = store / "ci-evals-pr" / "pr.json"
    claim = json.loads(pr_file.read_text())
    pr_file.write_text(json.dumps({**claim, "pr_number": PR + 1}))
    github.pulls[PR + 1] = {
        "number": PR + 1,
        "state": "open",
        "head": {"sha": "d" * 40, "repo": {"full_name": "bob/ci-evals"}},
    }
    before = len(github.requests)
    tampered = comment_run(tmp_path, github, store, head, "tampered")
    (failed,) = tampered.failed()
    assert failed.name == "Check the artifact and comment"
    assert (
        "not posted:" in failed.stderr
        and f"pull request #{PR + 1}'s head is dddddddddddd" in failed.stderr
    )
    later = github.requests[before:]
    assert {r.method for r in later} == {"GET"}  # the baseline and the PR looked up, no write
    assert f"/repos/{REPO}/pulls/{PR + 1}" in [r.path for r in later]
    assert len(github.comments) == 1
