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
from typing import Any

import yaml

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
    out = option(by_command["run"], "--out")
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
