"""`ci-evals comment`: the sticky PR comment for pull requests from forks.

A fork's pull request runs with a read-only token, so its own job cannot
comment. Two halves, in two workflows (docs/github.md):

- `ci-evals comment --pack RUN_DIR --out DIR` in the untrusted run: DIR gets
  the run's `results.json` and `pr.json` (the pull request number and head
  commit, from the `pull_request` event), to upload as an artifact;
- `ci-evals comment --from-artifact DIR` in the trusted `workflow_run`
  workflow, which checks nothing out (DIR holds the two files, or only the
  artifact's zip, read without unpacking): the artifact is untrusted data
  (`github.fork_artifact`: size limits, exact schema, the claim cross-checked with
  the `workflow_run` payload and with the pull request's head from the REST
  API, `github.pulls`), then the summary is posted as the sticky comment.

Any check that fails posts nothing, prints one line saying why, and exits 2.
Otherwise exit 0: the verdict itself is the fork run's check, not this one's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.commands.report import add_comment_key, write_output
from ci_evals.errors import EXIT_OK, UserError
from ci_evals.text import inert

if TYPE_CHECKING:
    from ci_evals.github.actions import ActionsEnv
    from ci_evals.github.comment import CommentSettings
    from ci_evals.github.fork_artifact import ArtifactReader, PullRequestRef, WorkflowRun


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--pack",
        type=Path,
        metavar="RUN_DIR",
        help="(untrusted run) write RUN_DIR's results.json and the PR's pr.json into --out",
    )
    mode.add_argument(
        "--from-artifact",
        type=Path,
        metavar="DIR",
        help="(trusted workflow_run job) check the downloaded artifact and post the comment",
    )
    parser.add_argument("--out", type=Path, metavar="DIR", help="where --pack writes")
    parser.add_argument(
        "--fixtures",
        type=Path,
        metavar="FILE",
        help="with --pack: check-fixtures' report on the fixtures the change touched, packed "
        "as fixtures.json for the comment's *Changed fixtures* (a missing file: not graded)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="RUN",
        help="with --from-artifact: compare with this run, as `report --baseline` "
        "(e.g. a folder written by `ci-evals baseline fetch` in the trusted job)",
    )
    add_comment_key(parser)


def run(args: argparse.Namespace) -> int:
    from ci_evals.github.actions import ActionsEnv  # noqa: PLC0415

    env = ActionsEnv.from_environ()
    if args.pack is not None:
        if args.out is None:
            raise UserError("--pack needs --out DIR", field="--out")
        return _pack(env, args.pack, args.out, args.fixtures)
    if args.baseline is not None and args.from_artifact is None:
        raise UserError("--baseline goes with --from-artifact", field="--baseline")
    try:
        return _post(env, args.from_artifact, key=args.comment_key, baseline=args.baseline)
    except UserError as exc:
        raise UserError(
            f"not posted: {exc}", hint="the artifact is the fork's data; nothing was posted"
        ) from None


def _event(env: ActionsEnv | None) -> tuple[str | None, dict[str, object]]:
    from ci_evals.github.event import load_event  # noqa: PLC0415

    if env is None or env.event_path is None:
        raise UserError(
            "not running in GitHub Actions (no GITHUB_EVENT_PATH)",
            hint="ci-evals comment reads the Actions event payload",
        )
    return env.event_name, load_event(env.event_path)


def _pack(env: ActionsEnv | None, run_dir: Path, out: Path, fixtures: Path | None) -> int:
    from ci_evals.github.event import PULL_REQUEST_EVENTS  # noqa: PLC0415
    from ci_evals.github.fork_artifact import PR_FILE, RESULTS_FILE, PullRequestRef  # noqa: PLC0415
    from ci_evals.results.model import dump_results, read_results  # noqa: PLC0415

    event_name, payload = _event(env)
    if event_name not in PULL_REQUEST_EVENTS:
        raise UserError(f"--pack runs on a pull_request event, not {event_name!r}")
    pull_request = payload.get("pull_request")
    number = pull_request.get("number") if isinstance(pull_request, dict) else None
    head = pull_request.get("head") if isinstance(pull_request, dict) else None
    sha = head.get("sha") if isinstance(head, dict) else None
    if not isinstance(number, int) or not isinstance(sha, str):
        raise UserError("the event payload has no pull_request.number / pull_request.head.sha")
    # Re-written from the validated model: the artifact holds exactly what a reader accepts.
    result = read_results(run_dir)
    write_output(out / RESULTS_FILE, dump_results(result).decode("utf-8"), option="--out")
    write_output(out / PR_FILE, PullRequestRef(number, sha).as_json(), option="--out")
    if fixtures is not None:
        import json  # noqa: PLC0415

        from ci_evals.commands.report import read_fixtures_report  # noqa: PLC0415
        from ci_evals.github.fork_artifact import FIXTURES_FILE  # noqa: PLC0415

        # Re-written from what a reader accepts (null: not graded).
        rows = read_fixtures_report(fixtures)
        write_output(out / FIXTURES_FILE, json.dumps(rows) + "\n", option="--out")
    print(f"ci-evals comment: packed {RESULTS_FILE} and {PR_FILE} (#{number}) into {out}")
    return EXIT_OK


def _post(env: ActionsEnv | None, folder: Path, *, key: str, baseline: Path | None) -> int:
    from ci_evals.github.actions import append_summary  # noqa: PLC0415
    from ci_evals.github.comment import (  # noqa: PLC0415
        CommentSettings,
        post_sticky_comment,
        sticky_marker,
    )
    from ci_evals.github.fork_artifact import (  # noqa: PLC0415
        PR_FILE,
        PR_FILE_LIMIT,
        ArtifactReader,
        check_claim,
        parse_pr_file,
        workflow_run_from_event,
    )

    sticky_marker(key)
    event_name, payload = _event(env)
    run = workflow_run_from_event(event_name, payload)
    artifact = ArtifactReader(folder)
    claim = parse_pr_file(artifact.read(PR_FILE, PR_FILE_LIMIT), file=artifact.where(PR_FILE))
    check_claim(claim, run)
    settings = CommentSettings.from_environ()
    token, repository = settings.token, settings.repository
    if token is None or repository is None:
        raise UserError(
            "GITHUB_TOKEN and GITHUB_REPOSITORY must be set",
            hint="env: GITHUB_TOKEN: ${{ github.token }}, with `pull-requests: write`",
        )
    _check_head(settings, token, repository, claim, run)
    markdown = _summary(artifact, run, baseline)
    outcome = post_sticky_comment(
        markdown,
        api_url=settings.api_url,
        repository=repository,
        pr_number=claim.number,
        token=token,
        marker_key=key,
        author=settings.author,
    )
    if env is not None:
        append_summary(env, markdown)
    if outcome.action == "skipped-read-only":
        raise UserError(outcome.detail)
    url = outcome.comment_url or "(no URL in the reply)"
    print(f"ci-evals comment: {inert(outcome.detail)}: {inert(url)}")
    return EXIT_OK


def _check_head(
    settings: CommentSettings,
    token: str,
    repository: str,
    claim: PullRequestRef,
    run: WorkflowRun,
) -> None:
    """The REST API's word on the pull request: its head must be the evaluated commit."""
    from ci_evals.github.pulls import pull_request_head  # noqa: PLC0415

    head = pull_request_head(
        api_url=settings.api_url, repository=repository, pr_number=claim.number, token=token
    )
    if head.head_sha != run.head_sha:
        raise UserError(
            f"pull request #{claim.number}'s head is {head.head_sha[:12]}, not the evaluated "
            f"{run.head_sha[:12]}: the artifact names another pull request, or the PR was "
            "pushed to since (its next run comments)",
            field="pr_number",
        )
    if run.head_repository and head.head_repository not in (None, run.head_repository):
        raise UserError(
            f"pull request #{claim.number} comes from {head.head_repository}, but the run "
            f"evaluated {run.head_repository}",
            field="pr_number",
        )


def _summary(artifact: ArtifactReader, run: WorkflowRun, baseline: Path | None) -> str:
    """The Markdown: where it came from, then the report of the checked results
    (with *Against the baseline* and *Cost*, as `report` writes them)."""
    from ci_evals.commands.baseline_report import against_baseline  # noqa: PLC0415
    from ci_evals.github.fork_artifact import RESULTS_FILE, RESULTS_LIMIT  # noqa: PLC0415
    from ci_evals.report.markdown import markdown_summary  # noqa: PLC0415
    from ci_evals.report.verify import problems  # noqa: PLC0415
    from ci_evals.results.model import read_results  # noqa: PLC0415

    data = artifact.read(RESULTS_FILE, RESULTS_LIMIT)
    # Parsed from the bytes already read and size-checked, via a private copy:
    # the artifact is not read a second time.
    with tempfile.TemporaryDirectory(prefix="ci-evals-artifact-") as private:
        copy = Path(private) / RESULTS_FILE
        copy.write_bytes(data)
        try:
            result = read_results(copy)
        except UserError as exc:
            raise UserError(f"{RESULTS_FILE}: {exc.message}", field=exc.field) from None
    found = problems(result)
    if found:
        # The fork's text, in the privileged job's log: inert, never a workflow command.
        print(
            f"ci-evals comment: {RESULTS_FILE} is inconsistent: {inert(found[0])}",
            file=sys.stderr,
        )
    note = (
        f"_From the pull request's own run (workflow run {run.run_id}, commit "
        f"`{run.head_sha[:12]}`): results written by the pull request's code, checked for "
        "consistency, not re-run._\n\n"
    )
    sections = against_baseline(result, argparse.Namespace(baseline=baseline, base=None), found)
    return note + markdown_summary(result, found) + "\n" + sections + _fixtures(artifact)


def _fixtures(artifact: ArtifactReader) -> str:
    """*Changed fixtures*, when the run packed check-fixtures' report (`--fixtures`)."""
    import json  # noqa: PLC0415

    from ci_evals.github.fork_artifact import FIXTURES_FILE, FIXTURES_LIMIT  # noqa: PLC0415
    from ci_evals.report.fixtures import fixtures_section  # noqa: PLC0415

    data = artifact.read_optional(FIXTURES_FILE, FIXTURES_LIMIT)
    if data is None:
        return ""
    try:
        report: object = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        report = None
    return "\n" + fixtures_section(report, FIXTURES_FILE)[0]
