"""The fork path end to end: the untrusted run packs its results and the PR
number (`ci-evals comment --pack`), the artifact travels, and the trusted
`workflow_run` job checks it (`ci-evals comment --from-artifact`) and posts
the sticky comment on the stand-in GitHub REST server of the comment tests.

Each tampered artifact — a PR number that is not the payload's, another PR
whose head is not the evaluated commit, a head SHA that is not the run's, an
oversized or non-JSON results file, a link instead of a file, extra keys —
must post nothing (no write reaches the server) and say why, exit 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci_evals.github.fork_artifact import RESULTS_LIMIT
from ci_evals.results.model import write_results
from tests.github.test_comment import BOT, MARKER, PR, REPO, TOKEN, FakeGitHub, github
from tests.report.test_report import a_run, failed_stage, passed_stage, scenario

__all__ = ["github"]  # the stand-in server fixture, shared with the comment tests

HEAD = "a" * 40
OTHER = "b" * 40
FORK = "mallory/widgets"


def ci_evals(
    tmp_path: Path, argv: list[str], event_name: str, payload: dict[str, Any], **env: str
) -> subprocess.CompletedProcess[str]:
    """`ci-evals ARGV` as an Actions step would run it: event payload, step summary."""
    event = tmp_path / f"event-{event_name}.json"
    event.write_text(json.dumps(payload), encoding="utf-8")
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GITHUB_") and k.lower() not in ("http_proxy", "https_proxy")
    }
    base |= {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(tmp_path / f"summary-{event_name}.md"),
        "GITHUB_REPOSITORY": REPO,
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *argv],
        env=base,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def pull_request_event(number: int = PR, sha: str = HEAD) -> dict[str, Any]:
    return {"number": number, "pull_request": {"number": number, "head": {"sha": sha}}}


def workflow_run_event(
    head_sha: str = HEAD, pull_requests: list[int] | None = None, event: str = "pull_request"
) -> dict[str, Any]:
    """What GitHub sends the comment workflow: for a fork, `pull_requests` is empty."""
    return {
        "action": "completed",
        "workflow_run": {
            "id": 4242,
            "event": event,
            "conclusion": "failure",
            "head_sha": head_sha,
            "head_repository": {"full_name": FORK},
            "pull_requests": [
                {"number": n, "head": {"sha": head_sha}} for n in (pull_requests or [])
            ],
        },
    }


def packed(tmp_path: Path, passed: bool = True) -> Path:
    """The untrusted half: a run folder packed into the artifact folder."""
    stages = (passed_stage(3),) if passed else (passed_stage(3), failed_stage(4))
    run_dir = tmp_path / "run"
    write_results(run_dir, a_run(scenario("acme", *stages)))
    out = tmp_path / "artifact"
    done = ci_evals(
        tmp_path,
        ["comment", "--pack", str(run_dir), "--out", str(out)],
        "pull_request",
        pull_request_event(),
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["pr.json", "results.json"]
    # What actions/download-artifact lays down in the trusted job: the same files.
    downloaded = tmp_path / "downloaded"
    shutil.copytree(out, downloaded)
    return downloaded


def post(tmp_path: Path, github: FakeGitHub, artifact: Path, **event: Any) -> Any:
    return ci_evals(
        tmp_path,
        ["comment", "--from-artifact", str(artifact)],
        "workflow_run",
        workflow_run_event(**event),
        GITHUB_API_URL=github.url,
        GITHUB_TOKEN=TOKEN,
    )


def a_fork_pr(github: FakeGitHub, number: int = PR, sha: str = HEAD) -> None:
    github.pulls[number] = {
        "number": number,
        "state": "open",
        "head": {"sha": sha, "repo": {"full_name": FORK}},
    }


def writes(github: FakeGitHub) -> list[str]:
    return [m for m in github.methods() if m in ("POST", "PATCH")]


# ------------------------------------------------------------------ the path that posts


def test_a_fork_artifact_is_checked_and_posted(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path, passed=False)
    assert json.loads((artifact / "pr.json").read_text()) == {
        "version": 1,
        "pr_number": PR,
        "head_sha": HEAD,
    }
    done = post(tmp_path, github, artifact)
    assert done.returncode == 0, done.stderr
    assert f"created a comment on {REPO}#{PR}" in done.stdout
    (comment,) = github.comments
    body = comment["body"]
    assert body.startswith(MARKER + "\n_From the pull request's own run (workflow run 4242")
    assert "## ci-evals: failed" in body
    assert github.requests[0].path == f"/repos/{REPO}/pulls/{PR}"  # the head checked first
    # A second delivery of the same artifact edits nothing.
    again = post(tmp_path, github, artifact)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout
    assert writes(github) == ["POST"]


def test_a_same_repository_pr_is_listed_in_the_payload(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    github.add(f"{MARKER}\nold", BOT)
    done = post(tmp_path, github, packed(tmp_path), pull_requests=[PR])
    assert done.returncode == 0, done.stderr
    assert writes(github) == ["PATCH"]


# ------------------------------------------------------------------ tampered artifacts


def refused(done: subprocess.CompletedProcess[str], github: FakeGitHub, why: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "not posted:" in line
    assert why in line, line
    assert writes(github) == []
    assert TOKEN not in done.stderr + done.stdout


def test_a_pr_number_not_in_the_payload_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    done = post(tmp_path, github, artifact, pull_requests=[PR + 1])
    refused(done, github, f"names #{PR}, but the run belongs to #{PR + 1}")
    assert github.requests == []  # refused before any call


def test_a_fork_naming_another_pr_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    # Empty pull_requests (a fork): the number is checked against the PR's head.
    a_fork_pr(github, sha=OTHER)  # PR 7 is someone else's pull request
    done = post(tmp_path, github, packed(tmp_path))
    refused(done, github, f"pull request #{PR}'s head is {OTHER[:12]}, not the evaluated")


def test_a_pr_from_another_repository_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    github.pulls[PR]["head"]["repo"]["full_name"] = "someone/else"
    refused(post(tmp_path, github, packed(tmp_path)), github, "comes from someone/else")


def test_a_head_sha_that_is_not_the_runs_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    done = post(tmp_path, github, artifact, head_sha=OTHER)
    refused(done, github, f"names commit {HEAD[:12]}, but the run that uploaded it evaluated")


def test_an_unknown_pr_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    refused(post(tmp_path, github, packed(tmp_path)), github, "404")


def test_an_oversized_results_file_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    with (artifact / "results.json").open("ab") as fh:
        fh.truncate(RESULTS_LIMIT + 1)  # sparse: no 16 MiB written
    refused(post(tmp_path, github, artifact), github, "over the limit of 16777216")


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        ("results.json", b'{"version": 2, "run_id": ', "results.json: not valid JSON"),
        ("results.json", b'{"version": 2}', "results.json: not a valid results file"),
        ("pr.json", b"{not json", "not valid JSON"),
        ("pr.json", b'{"version": 1, "pr_number": 7}', "expected exactly"),
        (
            "pr.json",
            b'{"version": 1, "pr_number": 7, "head_sha": "' + HEAD.encode() + b'", "x": 1}',
            "expected exactly",
        ),
        ("pr.json", b'{"version": 1, "pr_number": "7", "head_sha": "a"}', "pr_number"),
        ("pr.json", b'{"version": 1, "pr_number": true, "head_sha": "a"}', "pr_number"),
        ("pr.json", b"[7]", "not a JSON object"),
    ],
)
def test_invalid_files_post_nothing(
    tmp_path: Path, github: FakeGitHub, name: str, content: bytes, why: str
) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    (artifact / name).write_bytes(content)
    refused(post(tmp_path, github, artifact), github, why)


def test_a_link_in_the_artifact_is_not_followed(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    secret = tmp_path / "secret.json"
    shutil.move(artifact / "results.json", secret)
    (artifact / "results.json").symlink_to(secret)
    refused(post(tmp_path, github, artifact), github, "not a plain file")


def test_a_missing_file_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    (artifact / "pr.json").unlink()
    refused(post(tmp_path, github, artifact), github, "missing from the artifact")


def test_a_run_that_was_not_a_pull_request_posts_nothing(
    tmp_path: Path, github: FakeGitHub
) -> None:
    refused(post(tmp_path, github, packed(tmp_path), event="push"), github, "not a pull_request")


def test_from_artifact_outside_workflow_run_posts_nothing(
    tmp_path: Path, github: FakeGitHub
) -> None:
    done = ci_evals(
        tmp_path,
        ["comment", "--from-artifact", str(packed(tmp_path))],
        "pull_request_target",
        pull_request_event(),
        GITHUB_API_URL=github.url,
        GITHUB_TOKEN=TOKEN,
    )
    refused(done, github, "runs on a workflow_run event")


def test_pack_needs_a_pull_request_event(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_results(run_dir, a_run(scenario("acme", passed_stage(1))))
    done = ci_evals(
        tmp_path, ["comment", "--pack", str(run_dir), "--out", str(tmp_path / "o")], "push", {}
    )
    assert done.returncode == 2
    assert "--pack runs on a pull_request event" in done.stderr


# ------------------------------------------------------------------ the zip, never unpacked


def zipped(artifact: Path, extra: dict[str, bytes] | None = None) -> Path:
    """The folder as download-artifact leaves it with `skip-decompress`: only the zip."""
    import zipfile  # noqa: PLC0415

    folder = artifact.parent / "zipped"
    folder.mkdir()
    with zipfile.ZipFile(folder / "ci-evals-pr.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(artifact.iterdir()):
            zf.write(path, path.name)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return folder


def test_the_zip_itself_is_read_and_posted(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    done = post(tmp_path, github, zipped(packed(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert len(github.comments) == 1


def test_a_zip_bomb_member_is_refused_by_its_size(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    (artifact / "results.json").write_bytes(b" " * (RESULTS_LIMIT + 1))  # deflates to ~16 KiB
    folder = zipped(artifact)
    assert (folder / "ci-evals-pr.zip").stat().st_size < 100_000
    refused(post(tmp_path, github, folder), github, "ci-evals-pr.zip:results.json: 16777217 bytes")


def test_a_zip_of_many_entries_is_refused(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    folder = zipped(packed(tmp_path), {f"junk/{n}": b"" for n in range(100)})
    refused(post(tmp_path, github, folder), github, "102 entries, over the limit of 64")


def test_a_zip_without_the_pr_file_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    a_fork_pr(github)
    artifact = packed(tmp_path)
    (artifact / "pr.json").unlink()
    refused(post(tmp_path, github, zipped(artifact)), github, "pr.json: missing from the artifact")


def test_a_corrupt_deflate_stream_posts_nothing(tmp_path: Path, github: FakeGitHub) -> None:
    """zipfile raises zlib.error (not BadZipFile) for it: still one line, no traceback."""
    a_fork_pr(github)
    archive = zipped(packed(tmp_path)) / "ci-evals-pr.zip"
    data = bytearray(archive.read_bytes())
    name = data.find(b"results.json")  # the local header's name; its data follows
    data[name + len(b"results.json") : name + len(b"results.json") + 2] = b"\xff\xff"
    archive.write_bytes(bytes(data))
    refused(post(tmp_path, github, archive.parent), github, "not a readable zip")
