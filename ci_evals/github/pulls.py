"""One pull request's head, from the REST API: the check a fork's artifact cannot fake.

`workflow_run.pull_requests` is empty for a pull request from a fork, so the
number in the artifact is checked the other way round: GitHub is asked for
that pull request, and its head commit (and head repository) must be the ones
the triggering run evaluated. The client, its limits and its retries are
`github.rest`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ci_evals.backoff import RetryPolicy
from ci_evals.errors import UserError
from ci_evals.github.rest import DEFAULT_RETRY, Client, checked_request, with_retries

USER_AGENT = "ci-evals (pull request head)"


@dataclass(frozen=True)
class PullRequestHead:
    number: int
    state: str
    head_sha: str
    head_repository: str | None


def pull_request_head(
    *,
    api_url: str,
    repository: str,
    pr_number: int,
    token: str,
    timeout: float = 30.0,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> PullRequestHead:
    """`GET /repos/OWNER/NAME/pulls/N`: its state, head SHA and head repository."""
    api, owner, name = checked_request(api_url, repository, pr_number, token, timeout)
    client = Client(api, token, timeout, retry.deadline(), user_agent=USER_AGENT)
    where = f"{owner}/{name}#{pr_number}"
    url = f"{api}/repos/{owner}/{name}/pulls/{pr_number}"
    reply, _ = with_retries(
        lambda: client.request("GET", url), retry, where, deadline=client.deadline
    )
    if not isinstance(reply, Mapping):
        raise UserError(f"GitHub API: GET /repos/{owner}/{name}/pulls/{pr_number}: not an object")
    head = reply.get("head")
    sha = head.get("sha") if isinstance(head, Mapping) else None
    repo = head.get("repo") if isinstance(head, Mapping) else None
    full_name = repo.get("full_name") if isinstance(repo, Mapping) else None
    state = reply.get("state")
    if not isinstance(sha, str):
        raise UserError(f"GitHub API: pull request {where} has no head SHA in the reply")
    return PullRequestHead(
        number=pr_number,
        state=state if isinstance(state, str) else "",
        head_sha=sha,
        head_repository=full_name if isinstance(full_name, str) else None,
    )
