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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.actions_runner import ActionsRunner, ArtifactStore, runner_env, runner_python
from tests.conftest import git
from tests.github.test_comment import MARKER, PR, REPO, TOKEN, FakeGitHub
from tests.github_actions_fake import ActionsGitHub, actions_github, zip_of
from tests.paths import DATA
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

    def download_zipped(self, step: Mapping[str, Any]) -> None:
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


@dataclass
class PrRun:
    """`evals.yml`'s jobs as they ran on a pull request."""

    select: ActionsRunner
    matrix: list[dict[str, str]]
    shards: list[ActionsRunner]
    evals: ActionsRunner
    head: str
    shard_requests: int  # to the GitHub API, by the shard jobs


def fork_pr_run(
    tmp_path: Path,
    store: Path,
    github: FakeGitHub,
    *,
    durations: str = "",
    between: Callable[[], None] = lambda: None,
) -> PrRun:
    """`evals.yml` on a fork's pull request: every job. `durations`: the select job's output
    expected (the file plan balanced by; empty: none); `between`: what happens on GitHub
    after select, before the shards."""
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
    outputs = select.run_job(
        evals["jobs"]["select"], uses={"actions/upload-artifact": Artifacts(select, store).upload}
    )
    assert outputs is not None, select.log()
    assert select.failed() == [], select.log()
    matrix = json.loads(outputs.pop("matrix"))
    assert outputs == {
        "from_stage": "5",
        "fixture_stages": "",
        "shards": "2",
        "durations": durations,
    }, select.log()
    # The example's two scenarios, a shard each, from the stage compute-stage chose.
    assert matrix == {"include": [{"shard": f"{k}/2", "from_stage": "5"} for k in (1, 2)]}
    needs = {"select": {"outputs": {**outputs, "matrix": json.dumps(matrix)}}}
    if (repo / ".ci-evals").exists():
        shutil.rmtree(repo / ".ci-evals")  # the baseline fetched: the next job's checkout is fresh
    between()
    shards = []
    before = len(github.requests)

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
        shard_artifacts = Artifacts(shard, store)
        shard.run_job(
            shard_job,
            uses={
                "actions/upload-artifact": shard_artifacts.upload,
                "actions/download-artifact": shard_artifacts.download,
            },
            provided=frozenset({"Install bubblewrap and ci-evals"}),  # sudo; done by select
        )
        shards.append(shard)
        assert shard.failed() == [], shard.log()
        (run_step,) = [s for s in shard.steps if s.name == "Run the shard"]
        assert "::notice title=ci-evals::no ANTHROPIC_API_KEY: the stub model" in run_step.stdout
        shutil.rmtree(repo / ".ci-evals")  # the next job's checkout is fresh
    shard_requests = len(github.requests) - before

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
    return PrRun(select, matrix["include"], shards, runner, head, shard_requests)


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
        uses={"actions/download-artifact": artifacts.download_zipped},
        provided=frozenset({"Install ci-evals"}),  # pip from the repository: the network
    )
    return runner


def shard_units(store: Path) -> dict[int, list[str]]:
    """Each uploaded shard's scenarios, by its index; every shard of one plan's split."""
    shards = [
        json.loads((folder / "results.json").read_text(encoding="utf-8"))["shard"]
        for folder in sorted(store.glob("ci-evals-shard-*"))
    ]
    assert len({s["plan_sha256"] for s in shards}) == 1, shards
    return {s["index"]: [u["scenario"] for u in s["units"]] for s in shards}


@pytest.mark.slow
def test_a_pr_run_balances_its_shards_by_the_base_branchs_last_run(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    """main's last good run took longer on acme-arm-students (its stage 5: 2.4 s against
    1.7 s): plan gives it to shard 1, longest first, and each shard computes that split again
    from the very file plan read, uploaded by select, even when main has a newer run by then."""
    github = actions_github
    recorded = (DATA / "results-v2-full.json").read_bytes()
    github.add_artifact(github.add_run(), zip_of({"results.json": recorded}))
    store = tmp_path / "artifacts"
    newer = json.loads(recorded)  # main's next run: the other way round
    for scenario in newer["scenarios"]:
        scenario["stages"][4]["duration_s"] = {"acme-arm": 9.0}.get(scenario["id"], 0.1)
    run = fork_pr_run(
        tmp_path,
        store,
        github,
        durations=".ci-evals/baseline/results.json",
        between=lambda: github.add_artifact(
            github.add_run(), zip_of({"results.json": json.dumps(newer).encode()})
        ),
    )

    (planned,) = [s for s in run.select.steps if s.name == "Split the run into shards"]
    assert "shard 1/2: 1 unit(s), estimate 2.4" in planned.stderr, run.select.log()
    assert "shard 2/2: 1 unit(s), estimate 1.7" in planned.stderr
    assert (store / "ci-evals-durations" / "results.json").read_bytes() == recorded
    assert shard_units(store) == {1: ["acme-arm-students"], 2: ["acme-arm"]}
    # The newer run unseen: the shards asked GitHub nothing, they downloaded select's file.
    assert run.shard_requests == 0
    summary = run.evals.summary.read_text(encoding="utf-8")
    assert "## ci-evals: passed" in summary
    merged = json.loads((store / "ci-evals-run" / "results.json").read_text())
    assert [s["id"] for s in merged["scenarios"]] == ["acme-arm", "acme-arm-students"]


@pytest.mark.slow
def test_a_baseline_this_ci_evals_cannot_read_is_not_used_to_plan(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    """main's last run wrote a newer results version than the pull request's ci-evals reads:
    plan says why, balances by stage count, and no shard is given the file."""
    github = actions_github
    recorded = json.loads((DATA / "results-v2-full.json").read_text(encoding="utf-8"))
    newer = json.dumps({**recorded, "version": 999}).encode()
    github.add_artifact(github.add_run(), zip_of({"results.json": newer}))
    store = tmp_path / "artifacts"
    readable = zip_of({"results.json": json.dumps(recorded).encode()})

    # (main runs again before the report: its baseline is one this ci-evals reads)
    run = fork_pr_run(
        tmp_path, store, github, between=lambda: github.add_artifact(github.add_run(), readable)
    )

    (planned,) = [s for s in run.select.steps if s.name == "Split the run into shards"]
    assert "written by a newer ci-evals: results version 999" in planned.stderr, planned.stderr
    assert "the base branch's durations were not read (above)" in planned.stdout
    assert "estimate 1.0" in planned.stderr
    assert not (store / "ci-evals-durations").exists()
    assert shard_units(store) == {1: ["acme-arm"], 2: ["acme-arm-students"]}


@pytest.mark.slow
def test_a_fork_pr_is_evaluated_on_the_stub_and_commented_by_the_trusted_workflow(
    tmp_path: Path, actions_github: ActionsGitHub
) -> None:
    github = actions_github
    github.add_run(conclusion="failure")  # main has no successful evals run yet: no baseline
    store = tmp_path / "artifacts"
    run = fork_pr_run(tmp_path, store, github)
    evals, head = run.evals, run.head
    # No baseline: plan balanced by stage count, and no shard was given a durations file.
    (fetched,) = [s for s in run.select.steps if s.name == "Fetch the base branch's durations"]
    assert "no successful run of evals.yml on main" in fetched.stdout, run.select.log()
    (planned,) = [s for s in run.select.steps if s.name == "Split the run into shards"]
    assert "estimate 1.0" in planned.stderr and "::warning" not in planned.stdout
    assert shard_units(store) == {1: ["acme-arm"], 2: ["acme-arm-students"]}  # ties: in order

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
