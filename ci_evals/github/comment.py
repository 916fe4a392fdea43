"""The sticky pull-request comment: one comment per pull request and key, edited in place.

A hidden marker (`<!-- ci-evals-sticky:KEY -->`) finds it; only a comment the
posting identity wrote counts (`CommentSettings.author`), so nobody else who
writes the marker can make ci-evals overwrite or hide behind their text. An
unchanged summary is not edited again; the retried unit is the whole
find-then-write, so a create that landed despite a 5xx is not posted twice; a
read-only token (a fork's pull request) skips the comment, not an error.
The rules and why: docs/github.md (*The sticky comment*).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ci_evals.backoff import RetryPolicy
from ci_evals.errors import UserError
from ci_evals.github.event import PULL_REQUEST_EVENTS, load_event
from ci_evals.github.rest import (
    DEFAULT_API_URL,
    DEFAULT_RETRY,
    PER_PAGE,
    Client,
    StatusError,
    api_path,
    checked_request,
    next_page,
    with_retries,
)

DEFAULT_AUTHOR = "github-actions[bot]"  # who GITHUB_TOKEN posts as
AUTHOR_ENV = "CI_EVALS_COMMENT_AUTHOR"
# GitHub answers 422 "body is too long (maximum is 65536 characters)".
COMMENT_LIMIT = 65_536
USER_AGENT = "ci-evals (sticky PR comment)"
MAX_PAGES = 200  # 20,000 comments: far beyond any real PR; a Link loop must still end

Action = Literal["created", "updated", "unchanged", "skipped-read-only"]

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class CommentOutcome:
    """What happened to the sticky comment; `detail` is one line for a person."""

    action: Action
    comment_url: str | None
    detail: str


@dataclass(frozen=True)
class CommentSettings:
    """Where to comment from, read once from the environment; the token is kept out of `repr`."""

    api_url: str
    repository: str | None
    token: str | None = field(repr=False)
    author: str = DEFAULT_AUTHOR  # the login the token posts as: it alone owns the marker

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> CommentSettings:
        env = os.environ if environ is None else environ
        return cls(
            api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            repository=env.get("GITHUB_REPOSITORY") or None,
            token=env.get("GITHUB_TOKEN") or None,
            author=env.get(AUTHOR_ENV, "").strip() or DEFAULT_AUTHOR,
        )


# ------------------------------------------------------------------ the marker and the size


def sticky_marker(marker_key: str) -> str:
    """The hidden first line that identifies the comment for `marker_key`."""
    if not _KEY.fullmatch(marker_key):
        # The key goes inside an HTML comment: `-->` or a newline would end it early.
        raise UserError(
            f"invalid comment key {marker_key!r}",
            hint="use at most 100 letters, digits, '.', '_' and '-'",
        )
    return f"<!-- ci-evals-sticky:{marker_key} -->"


def _units(text: str) -> int:
    """The length in UTF-16 code units: never less than in characters, so a safe
    measure whichever of the two GitHub counts (an emoji is 1 character, 2 units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut_index(text: str, budget: int) -> int:
    """A prefix length (in characters) as long as possible whose UTF-16 size fits `budget`."""
    end = min(len(text), budget)
    while (excess := _units(text[:end]) - budget) > 0:
        end -= (excess + 1) // 2  # each character is 1 or 2 units
    return end


def _cut_note(characters: int) -> str:
    # Starts with an empty line: a line right after a table would become a table row.
    return f"\n... summary cut: {characters} more characters; see the step summary / run artifact\n"


def comment_body(markdown: str, marker: str, limit: int = COMMENT_LIMIT) -> str:
    """The marker line, then `markdown`, cut at a line boundary to fit `limit` with a note."""
    head = marker + "\n"
    if _units(head + markdown) <= limit:
        return head + markdown
    # The note is sized for the largest count it can show, so the result always fits.
    budget = limit - _units(head) - len(_cut_note(len(markdown)))
    end = _cut_index(markdown, max(0, budget))
    line_end = markdown.rfind("\n", 0, end)
    if line_end >= 0:
        end = line_end + 1
    kept = markdown[:end]
    if kept and not kept.endswith("\n"):  # one line longer than the whole budget
        kept += "\n"
    return head + kept + _cut_note(len(markdown) - end)


# ------------------------------------------------------------------ the comment


@dataclass(frozen=True)
class _Sticky:
    id: int
    body: str
    html_url: str | None


def _sticky(comment: object, marker: str, author: str) -> _Sticky | None:
    """The comment when `author` wrote it and it starts with `marker`."""
    if not isinstance(comment, dict):
        return None
    body, user, number = comment.get("body"), comment.get("user"), comment.get("id")
    if not isinstance(body, str) or not body.startswith(marker):
        return None
    login = user.get("login") if isinstance(user, dict) else None
    # Logins are case-insensitive on GitHub.
    if not isinstance(login, str) or login.casefold() != author.casefold():
        return None
    if isinstance(number, bool) or not isinstance(number, int):
        return None
    return _Sticky(number, body, _html_url(comment))


def _find_sticky(client: Client, url: str, marker: str, author: str) -> _Sticky | None:
    """The most recent sticky comment, over every page of the listing."""
    found: list[_Sticky] = []
    seen: set[str] = set()
    next_url: str | None = url
    while next_url is not None and len(seen) < MAX_PAGES and next_url not in seen:
        seen.add(next_url)
        page, headers = client.request("GET", next_url)
        if not isinstance(page, list):
            raise UserError(
                f"GitHub API: GET {api_path(next_url)} did not answer a list of comments"
            )
        found.extend(s for s in (_sticky(c, marker, author) for c in page) if s is not None)
        next_url = next_page(headers, next_url)
    # Comment ids grow with time: the largest is the most recent.
    return max(found, key=lambda sticky: sticky.id, default=None)


def _html_url(reply: object) -> str | None:
    url: object = reply.get("html_url") if isinstance(reply, dict) else None
    return url if isinstance(url, str) else None


def _skippable(exc: StatusError, *, listing: bool) -> bool:
    """A read-only token's answer: 403 (404 for a listing on some setups), not a rate limit."""
    if exc.rate_limited:
        return False
    return exc.status == 403 or (listing and exc.status == 404)


def _skipped(exc: StatusError, where: str) -> CommentOutcome:
    detail = (
        f"no PR comment on {where}: GitHub answered {exc.status} to {exc.method} "
        f"({exc.message}); the token is read-only, as for a pull request from a fork "
        "(the job needs `pull-requests: write`)"
    )
    return CommentOutcome("skipped-read-only", None, detail)


def post_sticky_comment(
    body: str,
    *,
    api_url: str,
    repository: str,
    pr_number: int,
    token: str,
    marker_key: str = "ci-evals",
    author: str = DEFAULT_AUTHOR,
    timeout: float = 30.0,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> CommentOutcome:
    """Create or edit the sticky comment for `marker_key` on the pull request (module doc)."""
    api, owner, name = checked_request(api_url, repository, pr_number, token, timeout)
    marker = sticky_marker(marker_key)
    deadline = retry.deadline()
    target = _Target(
        client=Client(api, token, timeout, deadline, user_agent=USER_AGENT),
        repo_url=f"{api}/repos/{owner}/{name}",
        comments_url=f"{api}/repos/{owner}/{name}/issues/{pr_number}/comments",
        where=f"{owner}/{name}#{pr_number}",
        author=author,
    )
    text = comment_body(body, marker)
    return with_retries(
        lambda: _upsert(target, marker, text), retry, target.where, deadline=deadline
    )


@dataclass(frozen=True)
class _Target:
    client: Client
    repo_url: str
    comments_url: str
    where: str  # OWNER/NAME#N, for messages
    author: str  # the login whose marker comment is ours


def _upsert(target: _Target, marker: str, text: str) -> CommentOutcome:
    """One attempt: find the sticky comment, then leave, edit or create it.

    A `StatusError` that is not a read-only token's answer propagates, for the
    caller to retry or report.
    """
    client, where = target.client, target.where
    try:
        listing = f"{target.comments_url}?per_page={PER_PAGE}"
        existing = _find_sticky(client, listing, marker, target.author)
    except StatusError as exc:
        if _skippable(exc, listing=True):
            return _skipped(exc, where)
        raise
    try:
        if existing is not None:
            if existing.body == text:
                # No edit: an edit notifies nobody, but marks the comment "edited"
                # and costs a write against the rate limit for nothing.
                detail = f"comment {existing.id} on {where} is unchanged"
                return CommentOutcome("unchanged", existing.html_url, detail)
            try:
                url = f"{target.repo_url}/issues/comments/{existing.id}"
                reply, _ = client.request("PATCH", url, {"body": text})
                return CommentOutcome(
                    "updated", _html_url(reply), f"updated comment {existing.id} on {where}"
                )
            except StatusError as exc:
                if exc.status != 404:
                    raise
                # Deleted between the listing and the edit: create a new one.
        reply, _ = client.request("POST", target.comments_url, {"body": text})
    except StatusError as exc:
        if _skippable(exc, listing=False):
            return _skipped(exc, where)
        raise
    return CommentOutcome("created", _html_url(reply), f"created a comment on {where}")


# ------------------------------------------------------------------ GitHub Actions


def pr_number_from_event(
    event: Mapping[str, object], *, event_name: str | None = None
) -> int | None:
    """`pull_request.number` of a `pull_request`/`pull_request_target` payload, else None.

    `event_name` (`GITHUB_EVENT_NAME`), when given, must be one of those two
    events: a review or comment event also carries a `pull_request`, but
    ci-evals does not run for those.
    """
    if event_name is not None and event_name not in PULL_REQUEST_EVENTS:
        return None
    pull_request = event.get("pull_request")
    if not isinstance(pull_request, Mapping):
        return None
    number = pull_request.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        return None
    return number


def comment_on_pull_request(
    markdown: str,
    *,
    event_name: str | None,
    event_path: Path | None,
    settings: CommentSettings,
    marker_key: str = "ci-evals",
    timeout: float = 30.0,
) -> str:
    """Post `markdown` as the sticky comment of this run's pull request.

    Returns one line to print. Not a pull request or no token: a note, not an
    error — `--comment` can stay on in a workflow that also runs on push.
    """
    if event_name not in PULL_REQUEST_EVENTS:
        what = f"a {event_name!r} event" if event_name else "this run"
        return f"no PR comment: {what} is not a pull request"
    if event_path is None:
        raise UserError("GITHUB_EVENT_PATH is not set", hint="run --comment in GitHub Actions")
    number = pr_number_from_event(load_event(event_path), event_name=event_name)
    if number is None:
        return "no PR comment: the event payload has no pull_request.number"
    if settings.token is None:
        return "no PR comment: GITHUB_TOKEN is not set (env: GITHUB_TOKEN: ${{ github.token }})"
    if settings.repository is None:
        raise UserError("GITHUB_REPOSITORY is not set", hint="run --comment in GitHub Actions")
    outcome = post_sticky_comment(
        markdown,
        api_url=settings.api_url,
        repository=settings.repository,
        pr_number=number,
        token=settings.token,
        marker_key=marker_key,
        author=settings.author,
        timeout=timeout,
    )
    if outcome.action == "skipped-read-only":
        return f"{outcome.detail}; the summary is in the step summary"
    return f"{outcome.detail}: {outcome.comment_url or '(no URL in the reply)'}"
