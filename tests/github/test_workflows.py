"""The repository's own workflows agree with each other and with the repository.

The linters (check-jsonschema, zizmor; `.ci/run`) check each file's form and
security; these check what they cannot: the paths the workflows name exist,
the run folder written is the one reported and uploaded (the README's old
snippet wrote `.ci-evals/run` and uploaded `.ci-evals/runs/`), the artifact
the comment workflow downloads is the one the evals workflow uploads, and the
trusted workflow never checks out or runs the pull request's code.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.actions_runner import ActionsRunner
from tests.paths import REPO

ROOT = REPO
WORKFLOWS = ROOT / ".github" / "workflows"


def load(name: str) -> dict[Any, Any]:
    data: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return data


def steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def commands(workflow: dict[Any, Any]) -> list[list[str]]:
    """Each `ci-evals ...` command line of the workflow's scripts, split like a shell."""
    found = []
    for step in steps(workflow):
        script = re.sub(r"\\\n", " ", str(step.get("run", "")))
        for line in script.splitlines():
            words = shlex.split(line, comments=True) if "ci-evals " in line else []
            if words and words[0] == "ci-evals":
                found.append(words)
    return found


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_every_file_the_evals_workflow_names_exists() -> None:
    named = []
    for words in commands(load("evals.yml")):
        for flag in ("--map", "--suite"):
            if flag in words:
                named.append(option(words, flag))
    text = (WORKFLOWS / "evals.yml").read_text(encoding="utf-8")
    named += re.findall(r"--model stub:(\S+)\)", text)  # the stub when there is no key
    assert any(n.endswith("ci-evals.yaml") for n in named), named
    assert any(n.endswith(".yaml") and "stub" in n for n in named), named
    for path in named:
        assert (ROOT / path).is_file(), path


def test_the_run_folder_written_is_the_one_reported_packed_and_uploaded() -> None:
    workflow = load("evals.yml")
    by_command = {words[1]: words for words in commands(workflow)}
    out = option(by_command["run"], "--out")  # each shard's, uploaded for the merge
    assert option(by_command["merge"], "--out") == out  # the merged run, in the evals job
    assert by_command["report"][2] == out
    # On a pull request the report compares with the baseline the fetch step wrote.
    text = (WORKFLOWS / "evals.yml").read_text(encoding="utf-8")
    (compared,) = re.findall(r"baseline=\(--baseline (\S+)\)", text)
    assert compared == option(by_command["baseline"], "--out")
    assert option(by_command["comment"], "--pack") == out
    uploads = {
        s["with"]["name"]: s["with"]["path"]
        for s in steps(workflow)
        if "upload-artifact" in s.get("uses", "")
    }
    assert uploads["ci-evals-run"].rstrip("/") == out
    assert uploads["ci-evals-pr"].rstrip("/") == option(by_command["comment"], "--out")
    # Each shard's folder, by its matrix job's index; the merge reads every one downloaded.
    assert uploads["ci-evals-shard-${{ strategy.job-index }}"].rstrip("/") == out
    (download,) = [
        s
        for s in workflow["jobs"]["evals"]["steps"]
        if "uses" in s and "download-artifact" in s["uses"]
    ]
    assert download["with"]["pattern"] == "ci-evals-shard-*"
    assert by_command["merge"][2] == download["with"]["path"].rstrip("/") + "/*"


def test_the_comment_workflow_reads_what_the_evals_workflow_uploads() -> None:
    evals, comment = load("evals.yml"), load("evals-comment.yml")
    trigger = comment[True]["workflow_run"]  # YAML 1.1 reads the key `on` as True
    assert trigger["workflows"] == [evals["name"]]
    (download,) = [s for s in steps(comment) if "download-artifact" in s.get("uses", "")]
    assert download["with"]["name"] == "ci-evals-pr"
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    (post,) = [w for w in commands(comment) if w[1] == "comment"]
    assert post[2] == "--from-artifact"


def test_the_trusted_workflow_checks_nothing_out() -> None:
    comment = load("evals-comment.yml")
    assert "pull_request_target" not in comment[True]
    for step in steps(comment):
        assert "checkout" not in step.get("uses", ""), step
    text = (WORKFLOWS / "evals-comment.yml").read_text(encoding="utf-8")
    assert "head_sha" not in re.sub(r"#.*", "", text)  # nothing of the PR is fetched
    assert comment["permissions"] == {}
    (job,) = comment["jobs"].values()
    assert job["permissions"] == {"actions": "read", "pull-requests": "write"}


def test_the_untrusted_jobs_can_write_nothing() -> None:
    for name in ("ci.yml", "evals.yml"):
        workflow = load(name)
        assert workflow["permissions"] == {}, name
        for job in workflow["jobs"].values():
            assert set(job["permissions"].values()) == {"read"}, name
            assert set(job["permissions"]) <= {"contents", "actions"}, name


def test_no_expression_is_interpolated_into_a_script() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        for step in steps(yaml.safe_load(path.read_text(encoding="utf-8"))):
            assert "${{" not in str(step.get("run", "")), (path.name, step)


def test_the_shard_jobs_run_what_plan_printed() -> None:
    workflow = load("evals.yml")
    select, shard, evals = (workflow["jobs"][name] for name in ("select", "shard", "evals"))
    assert select["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    assert select["outputs"]["shards"] == "${{ steps.plan.outputs.shards }}"
    (plan,) = [s for s in select["steps"] if s.get("id") == "plan"]
    assert plan["env"]["FROM_STAGE"] == "${{ steps.stage.outputs.from_stage }}"
    by_command = {words[1]: words for words in commands(workflow)}
    assert option(by_command["plan"], "--from-stage") == "$FROM_STAGE"
    assert option(by_command["plan"], "--suite") == option(by_command["run"], "--suite")
    assert shard["strategy"] == {
        "fail-fast": False,
        "matrix": "${{ fromJSON(needs.select.outputs.matrix) }}",
    }
    (run,) = [s for s in shard["steps"] if s.get("name") == "Run the shard"]
    assert run["env"]["SHARD"] == "${{ matrix.shard }}"
    assert run["env"]["FROM_STAGE"] == "${{ matrix.from_stage }}"
    assert option(by_command["run"], "--shard") == "$SHARD"
    assert evals["needs"] == ["select", "shard"]
    assert evals["name"] == "evals"  # the required check, merged


def test_plan_and_every_shard_balance_by_the_same_durations_file() -> None:
    """select fetches the base branch's last run and plans by its durations; each shard gets
    that very file (select's upload, not a fetch of its own: main may have run again), so it
    computes plan's split again; without one, none of them passes --durations."""
    workflow = load("evals.yml")
    select, shard = workflow["jobs"]["select"], workflow["jobs"]["shard"]
    by_id = {s["id"]: s for s in select["steps"] if "id" in s}
    fetch, plan = by_id["baseline"], by_id["plan"]
    assert select["steps"].index(fetch) < select["steps"].index(plan)
    # Nothing to run: neither fetch nor plan (the nothing-to-run path as before).
    assert fetch["if"] == plan["if"] == "steps.stage.outputs.from_stage != 'none'"
    # No baseline never fails the job: a failed fetch only warns.
    assert "continue-on-error" not in fetch and "||" in fetch["run"]
    (fetched,) = [w for w in commands({"jobs": {"select": select}}) if w[1] == "baseline"]
    folder = option(fetched, "--out")
    assert option(fetched, "--workflow") == "evals.yml"
    assert plan["env"]["DURATIONS"] == "${{ steps.baseline.outputs.results }}"
    (planned,) = [w for w in commands({"jobs": {"select": select}}) if w[1] == "plan"]
    assert planned[-1] == "$@" and 'plan --durations "$DURATIONS"' in plan["run"]
    assert 'echo "durations=$DURATIONS" >> "$GITHUB_OUTPUT"' in plan["run"]
    assert select["outputs"]["durations"] == "${{ steps.plan.outputs.durations }}"
    (upload,) = [s for s in select["steps"] if "upload-artifact" in s.get("uses", "")]
    assert upload["if"] == "steps.plan.outputs.durations != ''"
    assert upload["with"]["path"] == f"{folder}/results.json"  # baseline fetch's `results`
    assert upload["with"]["if-no-files-found"] == "error"
    # Each shard: that artifact where select had it, then the same path to run --durations.
    (download,) = [s for s in shard["steps"] if "download-artifact" in s.get("uses", "")]
    assert download["if"] == "needs.select.outputs.durations != ''"
    assert download["with"] == {"name": upload["with"]["name"], "path": f"{folder}/"}
    (run,) = [s for s in shard["steps"] if s.get("name") == "Run the shard"]
    assert shard["steps"].index(download) < shard["steps"].index(run)
    assert run["env"]["DURATIONS"] == "${{ needs.select.outputs.durations }}"
    assert 'durations=(--durations "$DURATIONS")' in run["run"]
    (ran,) = [w for w in commands({"jobs": {"shard": shard}}) if w[1] == "run"]
    assert "${durations[@]}" in ran and option(ran, "--shard") == "$SHARD"
    # `actions: read` only where a baseline is fetched; the shards need none to download.
    assert select["permissions"] == {"contents": "read", "actions": "read"}
    assert shard["permissions"] == {"contents": "read"}


@pytest.mark.parametrize(
    ("outputs", "runs"),
    [
        ({"from_stage": "none", "fixture_stages": "", "matrix": "", "shards": ""}, False),
        # plan's own answer to nothing to run: GitHub refuses an empty matrix.
        ({"from_stage": "none", "matrix": '{"include":[]}', "shards": "0"}, False),
        ({"from_stage": "4", "matrix": '{"include":[]}', "shards": "0"}, False),
        ({"from_stage": "4", "matrix": '{"include":[{"shard":"1/1"}]}', "shards": "1"}, True),
    ],
)
def test_nothing_to_run_skips_the_shards_and_the_merge(
    tmp_path: Path, outputs: dict[str, str], runs: bool
) -> None:
    jobs = load("evals.yml")["jobs"]
    runner = ActionsRunner(
        workspace=tmp_path,
        temp=tmp_path / "temp",
        event_name="pull_request",
        event={},
        needs={"select": {"outputs": outputs}, "shard": {"outputs": {}}},
    )
    for name in ("shard", "evals"):  # a skipped `evals` counts as passed for a required check
        assert runner.condition(jobs[name]["if"], {}) is runs, name


def test_a_secret_reaches_only_the_step_that_runs_the_agent() -> None:
    """A workflow's or a job's `env:` reaches every step of it (upload-artifact
    included); a step's `env:` on a `uses:` of a composite action reaches every step
    inside it. So a secret appears in the `env:` of a `run:` step only, one that runs
    `ci-evals run` or `ci-evals merge` (docs/github.md)."""
    for path in sorted(WORKFLOWS.glob("*.yml")):
        workflow = load(path.name)
        assert "secrets." not in str(workflow.get("env", "")), path.name
        for name, job in workflow["jobs"].items():
            assert "secrets." not in str(job.get("env", "")), (path.name, name)
            for step in job.get("steps", []):
                env = str(step.get("env", ""))
                if "secrets." in env:  # the agent's key, or the shard key that signs and checks
                    command = step.get("run", "")
                    assert "ci-evals run" in command or "ci-evals merge" in command, (
                        path.name,
                        step,
                    )


def test_the_shards_are_signed_and_merged_with_the_repositorys_key() -> None:
    """The key reaches ci-evals only in the two steps that sign and check (never a job's
    env, never an output or artifact: a job's output is printed in a later step's env
    listing, an artifact is readable by anyone who can read the run)."""
    workflow = load("evals.yml")
    holders = [
        step["name"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if "CI_EVALS_SHARD_KEY" in (step.get("env") or {})
    ]
    assert holders == ["Run the shard", "Merge the shards"]
    for name in holders:
        (step,) = [s for s in steps(workflow) if s.get("name") == name]
        assert step["env"]["CI_EVALS_SHARD_KEY"] == "${{ secrets.CI_EVALS_SHARD_KEY }}"
    text = (WORKFLOWS / "evals.yml").read_text(encoding="utf-8")
    assert text.count("secrets.CI_EVALS_SHARD_KEY") == 2
    assert all("env" not in job for job in workflow["jobs"].values())
