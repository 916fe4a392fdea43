"""The sticky pull-request comment: one comment per pull request and key, edited in place.

The comment starts with a hidden marker, `<!-- ci-evals-sticky:KEY -->`. Each
run lists the pull request's issue comments (every page: a busy PR has
hundreds), takes the most recent one that starts with the marker AND was
written by the identity that posts (`CommentSettings.author`: by default
`github-actions[bot]`, what `GITHUB_TOKEN` posts as; an App's token posts as
`APP[bot]`, set with `CI_EVALS_COMMENT_AUTHOR`), and edits it; without one it
creates a new comment. Only that identity's comment counts — not any bot's: a
person, or another bot (`dependabot[bot]`, a bot that quotes comments), that
writes the marker cannot make ci-evals overwrite (or hide behind) their text.
The token cannot say whose it is (`GET /user` answers 403 to `GITHUB_TOKEN`),
hence a configured login. Two suites in one repository keep two comments by
using two keys.

A second run whose summary is unchanged leaves the comment alone: no edit, no
notification, no "edited" mark.

Failure rules:
- a 5xx or a secondary rate limit (403/429 with `Retry-After`, or
  `x-ratelimit-remaining: 0`) is retried a bounded number of times
  (`backoff.RetryPolicy`): the wait is GitHub's `Retry-After` (or the time to
  `x-ratelimit-reset`), a rate limit that names none at least a minute (as
  GitHub's documentation asks), else an exponential backoff; a wait longer
  than the cap (five minutes) is not waited for: the error is reported at once. The retried unit is
  the whole find-then-write, so a create that failed with a 5xx but did land
  is found and edited by the next attempt instead of posted twice;
- the whole operation — every request, page and wait — has one deadline
  (`RetryPolicy.total_s`, ten minutes): a wait that would pass it is not
  waited, a request is cut at it, and the error says the deadline ended it;
- a read-only token — what a pull request from a fork gets — answers 403 to
  the write (some setups 404 to the listing): not an error, the outcome says
  the comment was skipped, and the caller points at the step summary;
- any other HTTP error, a network error or a reply that is not JSON: one-line
  `UserError` with the status and GitHub's `message`, never a traceback;
- the token never appears in a message: it is checked before it reaches a
  header (http.client would echo a bad header value), redirects are refused
  (urllib would send the Authorization header to any host a redirect names),
  and `Link` pages must stay on the API's own host.

Standard library only (`urllib.request`, `json`): `report` must not need an
HTTP client package.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import IO, Literal, TypeVar

from ci_evals import backoff
from ci_evals.backoff import Deadline, RetryPolicy
from ci_evals.errors import UserError
from ci_evals.github.event import PULL_REQUEST_EVENTS, load_event
from ci_evals.text import one_line

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_AUTHOR = "github-actions[bot]"  # who GITHUB_TOKEN posts as
AUTHOR_ENV = "CI_EVALS_COMMENT_AUTHOR"
# GitHub answers 422 "body is too long (maximum is 65536 characters)".
COMMENT_LIMIT = 65_536
API_VERSION = "2022-11-28"
USER_AGENT = "ci-evals (sticky PR comment)"
PER_PAGE = 100  # GitHub's maximum
MAX_PAGES = 200  # 20,000 comments: far beyond any real PR; a Link loop must still end
RESPONSE_LIMIT = 32 * 1024 * 1024  # a page of 100 comments of 64 Ki characters fits
_MESSAGE_CHARS = 300  # GitHub's message or a network error, on one line

_T = TypeVar("_T")
Action = Literal["created", "updated", "unchanged", "skipped-read-only"]

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
# A token is sent in a header: any space or control character would either break
# the header or make http.client raise an error that quotes the value.
_TOKEN = re.compile(r"[\x21-\x7e]+")
_LINK = re.compile(r"<([^>]*)>([^,<]*)")
_REL = re.compile(r"""\brel\s*=\s*"?([^";]*)"?""")


@dataclass(frozen=True)
class CommentOutcome:
    """What happened to the sticky comment; `detail` is one line for a person."""

    action: Action
    comment_url: str | None
    detail: str


# A wait above `cap_s` is not waited for (the error is reported at once: a step
# that sleeps for an hour is worse than one whose comment waits for the next run).
# Five minutes: a secondary limit's `retry-after: 120` is waited out. Ten minutes
# for the whole operation (requests, pages, waits): three tries with five-minute
# waits and 30-second requests would otherwise hold a step for over 20 minutes.
DEFAULT_RETRY = RetryPolicy(attempts=3, first_s=2.0, cap_s=300.0, total_s=600.0)
# A secondary rate limit that names no wait: GitHub's documentation says to wait
# at least a minute before trying again (within the policy's cap).
RATE_LIMIT_MIN_WAIT_S = 60.0


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


# ------------------------------------------------------------------ HTTP


class _StatusError(Exception):
    """GitHub answered with an error status (internal; the public API raises UserError)."""

    def __init__(  # noqa: PLR0917 - an internal record
        self,
        method: str,
        url: str,
        status: int,
        message: str,
        rate_limited: bool,
        wait_s: float | None = None,
    ):
        super().__init__(f"{method} {url}: {status} {message}")
        self.method = method
        self.url = url
        self.status = status
        self.message = message
        self.rate_limited = rate_limited
        self.wait_s = wait_s  # what GitHub asked for: Retry-After or until x-ratelimit-reset


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would resend the Authorization header to any host,
    and would turn a redirected POST into a GET that looks like success."""

    def redirect_request(  # noqa: PLR0917 - urllib's signature
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


def _error_message(raw: bytes, fallback: str) -> str:
    """GitHub's `message`, with the first validation error's text (422) when there is one."""
    try:
        data = json.loads(raw)
    except ValueError:
        return fallback
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        return fallback
    message: str = data["message"]
    errors = data.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0].get("message") or errors[0].get("code")
        if isinstance(first, str):
            message = f"{message}: {first}"
    return message


class _Client:
    """Authenticated JSON requests to one API origin."""

    def __init__(
        self, api: str, token: str, timeout: float, deadline: Deadline | None = None
    ) -> None:
        self._api = api
        self._origin = urllib.parse.urlsplit(api)[:2]
        self._token = token
        self._timeout = timeout
        self.deadline = deadline or Deadline(None)  # the operation's, shared with its retries
        self._opener = urllib.request.build_opener(_NoRedirect)

    def request(
        self, method: str, url: str, payload: Mapping[str, object] | None = None
    ) -> tuple[object, Message]:
        """The parsed JSON reply and its headers; `_StatusError` for an error status."""
        if urllib.parse.urlsplit(url)[:2] != self._origin:
            # Checked for every URL, so a `Link` page cannot carry the token elsewhere.
            raise UserError(
                f"GitHub API: refusing to send the token to {_origin_text(url)}",
                hint=f"pages and comments must stay on {_origin_text(self._api)}",
            )
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        # S310: the origin (scheme included) is checked above; _api_base allows only http(s).
        request = urllib.request.Request(  # noqa: S310
            url, data=data, method=method, headers=self._headers()
        )
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.deadline.passed():
            raise UserError(f"GitHub API: {method} {_path(url)} not sent: {passed(self.deadline)}")
        cut = self.deadline.cuts(self._timeout)
        timeout = self.deadline.bounded(self._timeout)
        try:
            raw, headers = self._within_deadline(request, timeout)
        except TimeoutError:
            if cut:
                raise UserError(
                    f"GitHub API: {method} {_path(url)} cut: {passed(self.deadline)}"
                ) from None
            raise UserError(
                f"GitHub API: {method} {_path(url)} did not finish within {self._timeout:g} s",
                hint=f"check that {_origin_text(self._api)} is reachable (GITHUB_API_URL)",
            ) from None
        except urllib.error.HTTPError as exc:
            raise self._status_error(method, url, exc) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError is an OSError
            raise UserError(
                f"GitHub API: {method} {_path(url)} failed: {self._redact(_reason(exc))}",
                hint=f"check that {_origin_text(self._api)} is reachable (GITHUB_API_URL)",
            ) from None
        return self._json(method, url, raw), headers

    def _within_deadline(
        self, request: urllib.request.Request, timeout: float
    ) -> tuple[bytes, Message]:
        """The reply's body and headers, the whole exchange within `timeout` seconds:
        the socket's timeout is per read, and a server that trickles a byte at a time
        would hold a step for ever. Past it the exchange is left to its daemon thread
        (its socket times out on its own) and `TimeoutError` raised."""
        done: list[tuple[bytes, Message]] = []
        failed: list[BaseException] = []

        def exchange() -> None:
            try:
                with self._opener.open(request, timeout=timeout) as response:
                    done.append((response.read(RESPONSE_LIMIT + 1), response.headers))
            except BaseException as exc:
                failed.append(exc)

        worker = threading.Thread(target=exchange, name="github-request", daemon=True)
        worker.start()
        worker.join(timeout)
        if failed:
            raise failed[0]
        if not done:
            raise TimeoutError
        return done[0]

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        }

    def _status_error(self, method: str, url: str, exc: urllib.error.HTTPError) -> _StatusError:
        try:
            raw = exc.read(64 * 1024)
        except (OSError, http.client.HTTPException):
            raw = b""
        finally:
            exc.close()  # the error holds the open response
        # Redacted before it is shortened: a cut must not leave half a token.
        redacted = self._redact(_error_message(raw, exc.reason or "no message"))
        message = one_line(redacted, _MESSAGE_CHARS)
        headers = exc.headers
        rate_limited = (
            headers.get("x-ratelimit-remaining") == "0"
            or headers.get("retry-after") is not None
            or "rate limit" in message.lower()
        )
        return _StatusError(
            method, _path(url), exc.code, message, rate_limited, requested_wait(headers)
        )

    def _json(self, method: str, url: str, raw: bytes) -> object:
        if len(raw) > RESPONSE_LIMIT:
            raise UserError(f"GitHub API: the reply to {method} {_path(url)} is too large")
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise UserError(
                f"GitHub API: the reply to {method} {_path(url)} is not JSON",
                hint="check GITHUB_API_URL: it must be the REST API, not the web site",
            ) from None

    def _redact(self, text: str) -> str:
        # GitHub does not echo tokens, but a proxy or a stand-in server might.
        return text.replace(self._token, "***")


def requested_wait(headers: Message, now: float | None = None) -> float | None:
    """The seconds GitHub asks a client to wait: `Retry-After` (`backoff.requested_wait`),
    else the time until `x-ratelimit-reset` (epoch seconds) when `x-ratelimit-remaining` is 0."""
    wait = backoff.requested_wait(headers, now)
    if wait is not None:
        return wait
    reset = str(headers.get("x-ratelimit-reset") or "").strip()
    if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        return max(0.0, float(reset) - (time.time() if now is None else now))
    return None


def retryable(exc: _StatusError) -> bool:
    """A 5xx, or a rate limit: 429, or 403 with `Retry-After` / no requests left."""
    return exc.status >= 500 or exc.status == 429 or (exc.status == 403 and exc.rate_limited)


def retry_wait(exc: _StatusError, attempt: int, policy: RetryPolicy) -> float | None:
    """How long to wait before try `attempt + 1`, or None when not to retry at all."""
    if not retryable(exc) or not policy.retries_left(attempt) or policy.exceeds_cap(exc.wait_s):
        return None
    requested = exc.wait_s
    if requested is None and exc.status in (403, 429):  # a secondary limit, no wait named
        requested = min(policy.cap_s, max(RATE_LIMIT_MIN_WAIT_S, policy.backoff(attempt)))
    return policy.wait(attempt, requested)


def passed(deadline: Deadline) -> str:
    """The end of a message about an operation its overall deadline ended."""
    return f"the overall deadline of {deadline.total_s:g} s for GitHub passed"


def _past_deadline(
    built: UserError, exc: _StatusError, wait: float, deadline: Deadline
) -> UserError:
    """`built` (the caller's error for `exc`), saying the deadline, not the tries, ended it."""
    return UserError(
        f"GitHub API: {exc.method} {exc.url} answered {exc.status}: {exc.message} "
        f"(not retried: a wait of {wait:.0f} s would pass the overall deadline of "
        f"{deadline.total_s:g} s for GitHub)",
        hint=built.hint,
    )


def _reason(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return one_line(str(reason) or type(reason).__name__, _MESSAGE_CHARS)


def _path(url: str) -> str:
    """The URL without scheme and host: enough to say which call failed."""
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _origin_text(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _next_page(headers: Message, current: str) -> str | None:
    """The `rel="next"` URL of a `Link` header, or None on the last page."""
    link = str(headers.get("Link") or "")
    for match in _LINK.finditer(link):
        rel = _REL.search(match.group(2))
        if rel is not None and "next" in rel.group(1).split():
            url: str = urllib.parse.urljoin(current, match.group(1))
            return url
    return None


# ------------------------------------------------------------------ validation


def _api_base(api_url: str) -> str:
    parts = urllib.parse.urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"the GitHub API URL must be http(s)://HOST[/PATH], got {api_url!r}",
            field="GITHUB_API_URL",
        )
    return api_url.rstrip("/")


def _split_repository(repository: str) -> tuple[str, str]:
    owner, _, name = repository.partition("/")
    if not _OWNER.fullmatch(owner) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise UserError(
            f"the repository must be OWNER/NAME, got {repository!r}", field="GITHUB_REPOSITORY"
        )
    return owner, name


def checked_request(
    api_url: str, repository: str, pr_number: int, token: str, timeout: float
) -> tuple[str, str, str]:
    """(API base, owner, name) once every argument of a pull request call is checked."""
    api = _api_base(api_url)
    owner, name = _split_repository(repository)
    _check_request(pr_number, token, timeout)
    return api, owner, name


def _check_request(pr_number: int, token: str, timeout: float) -> None:
    if isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number < 1:
        raise UserError(f"the pull request number must be a positive integer, got {pr_number!r}")
    if not _TOKEN.fullmatch(token):
        # Never show the value: it is a secret, however malformed.
        raise UserError(
            "the GitHub token is empty or contains spaces or control characters",
            field="GITHUB_TOKEN",
            hint="pass the token itself, e.g. GITHUB_TOKEN: ${{ github.token }}",
        )
    if not timeout > 0:
        raise UserError(f"the timeout must be positive, got {timeout!r}")


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


def _find_sticky(client: _Client, url: str, marker: str, author: str) -> _Sticky | None:
    """The most recent sticky comment, over every page of the listing."""
    found: list[_Sticky] = []
    seen: set[str] = set()
    next_url: str | None = url
    while next_url is not None and len(seen) < MAX_PAGES and next_url not in seen:
        seen.add(next_url)
        page, headers = client.request("GET", next_url)
        if not isinstance(page, list):
            raise UserError(f"GitHub API: GET {_path(next_url)} did not answer a list of comments")
        found.extend(s for s in (_sticky(c, marker, author) for c in page) if s is not None)
        next_url = _next_page(headers, next_url)
    # Comment ids grow with time: the largest is the most recent.
    return max(found, key=lambda sticky: sticky.id, default=None)


def _html_url(reply: object) -> str | None:
    url: object = reply.get("html_url") if isinstance(reply, dict) else None
    return url if isinstance(url, str) else None


def _skippable(exc: _StatusError, *, listing: bool) -> bool:
    """A read-only token's answer: 403 (404 for a listing on some setups), not a rate limit."""
    if exc.rate_limited:
        return False
    return exc.status == 403 or (listing and exc.status == 404)


def _skipped(exc: _StatusError, where: str) -> CommentOutcome:
    detail = (
        f"no PR comment on {where}: GitHub answered {exc.status} to {exc.method} "
        f"({exc.message}); the token is read-only, as for a pull request from a fork "
        "(the job needs `pull-requests: write`)"
    )
    return CommentOutcome("skipped-read-only", None, detail)


def _user_error(exc: _StatusError, where: str, attempts: int = 1) -> UserError:
    tries = f"; {attempts} tries" if attempts > 1 else ""
    if retryable(exc) and exc.wait_s is not None and attempts == 1:
        tries = f"; GitHub asked to wait {exc.wait_s:.0f}s, more than the retry cap"
    return UserError(
        f"GitHub API: {exc.method} {exc.url} answered {exc.status}: {exc.message} ({where}{tries})",
        hint=_HINTS.get(429 if exc.rate_limited else exc.status),
    )


_HINTS = {
    401: "the token is missing, expired or revoked",
    404: "check the repository, the pull request number and the token's access",
    422: "GitHub refused the comment body",
    429: "GitHub rate-limited the token; wait and run again",
}


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
        client=_Client(api, token, timeout, deadline),
        repo_url=f"{api}/repos/{owner}/{name}",
        comments_url=f"{api}/repos/{owner}/{name}/issues/{pr_number}/comments",
        where=f"{owner}/{name}#{pr_number}",
        author=author,
    )
    text = comment_body(body, marker)
    return with_retries(
        lambda: _upsert(target, marker, text), retry, target.where, deadline=deadline
    )


def with_retries(
    call: Callable[[], _T],
    retry: RetryPolicy,
    where: str,
    error: Callable[[_StatusError, str, int], UserError] | None = None,
    deadline: Deadline | None = None,
) -> _T:
    """`call()`, tried again (`retry_wait`) while GitHub answers "try again later" and
    the wait fits in the operation's `deadline` (the policy's, from now, when not given);
    any other error status, or the last one, as a one-line `UserError` (`error`'s)."""
    overall = deadline or retry.deadline()
    attempt = 1
    while True:
        try:
            return call()
        except _StatusError as exc:
            wait = retry_wait(exc, attempt, retry)
            built = (error or _user_error)(exc, where, attempt)
            if wait is None:
                raise built from None
            if wait >= overall.left():  # the try after the wait could not even start
                raise _past_deadline(built, exc, wait, overall) from None
        retry.sleep(wait)
        attempt += 1


@dataclass(frozen=True)
class _Target:
    client: _Client
    repo_url: str
    comments_url: str
    where: str  # OWNER/NAME#N, for messages
    author: str  # the login whose marker comment is ours


def _upsert(target: _Target, marker: str, text: str) -> CommentOutcome:
    """One attempt: find the sticky comment, then leave, edit or create it.

    A `_StatusError` that is not a read-only token's answer propagates, for the
    caller to retry or report.
    """
    client, where = target.client, target.where
    try:
        listing = f"{target.comments_url}?per_page={PER_PAGE}"
        existing = _find_sticky(client, listing, marker, target.author)
    except _StatusError as exc:
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
            except _StatusError as exc:
                if exc.status != 404:
                    raise
                # Deleted between the listing and the edit: create a new one.
        reply, _ = client.request("POST", target.comments_url, {"body": text})
    except _StatusError as exc:
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
