"""GitHub's REST API over the standard library: authenticated JSON requests, pages, retries.

Standard library only (`urllib.request`, `json`): `report` and `baseline fetch`
must not need an HTTP client package. The rules its callers (`comment`, `pulls`,
`artifacts`) share — what is retried and how long it waits, the one deadline per
operation, one-line errors, the token never in a message (checked before it
reaches a header, redirects refused, pages kept on the API's host):
docs/github.md (*GitHub's API*).
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from email.message import Message
from typing import IO, TypeVar

from ci_evals import backoff
from ci_evals.backoff import Deadline, RetryPolicy
from ci_evals.errors import UserError
from ci_evals.text import one_line

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100  # GitHub's maximum
RESPONSE_LIMIT = 32 * 1024 * 1024  # a page of 100 comments of 64 Ki characters fits
_MESSAGE_CHARS = 300  # GitHub's message or a network error, on one line

_T = TypeVar("_T")

_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
# A token is sent in a header: any space or control character would either break
# the header or make http.client raise an error that quotes the value.
_TOKEN = re.compile(r"[\x21-\x7e]+")
_LINK = re.compile(r"<([^>]*)>([^,<]*)")
_REL = re.compile(r"""\brel\s*=\s*"?([^";]*)"?""")

# A wait above `cap_s` is not waited for (the error is reported at once: a step
# that sleeps for an hour is worse than one whose comment waits for the next run).
# Five minutes: a secondary limit's `retry-after: 120` is waited out. Ten minutes
# for the whole operation (requests, pages, waits): three tries with five-minute
# waits and 30-second requests would otherwise hold a step for over 20 minutes.
DEFAULT_RETRY = RetryPolicy(attempts=3, first_s=2.0, cap_s=300.0, total_s=600.0)
# A secondary rate limit that names no wait: GitHub's documentation says to wait
# at least a minute before trying again (within the policy's cap).
RATE_LIMIT_MIN_WAIT_S = 60.0


class StatusError(Exception):
    """GitHub answered with an error status: for a caller to retry (`with_retries`),
    accept (a read-only token's 403) or turn into a `UserError` — never shown as is."""

    def __init__(  # noqa: PLR0917 - a record
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


class NoRedirect(urllib.request.HTTPRedirectHandler):
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


class Client:
    """Authenticated JSON requests to one API origin, as `user_agent`."""

    def __init__(
        self,
        api: str,
        token: str,
        timeout: float,
        deadline: Deadline | None = None,
        *,
        user_agent: str,
    ) -> None:
        self._api = api
        self._origin = urllib.parse.urlsplit(api)[:2]
        self._token = token
        self._timeout = timeout
        self._user_agent = user_agent
        self.deadline = deadline or Deadline(None)  # the operation's, shared with its retries
        self._opener = urllib.request.build_opener(NoRedirect)

    def request(
        self, method: str, url: str, payload: Mapping[str, object] | None = None
    ) -> tuple[object, Message]:
        """The parsed JSON reply and its headers; `StatusError` for an error status."""
        if urllib.parse.urlsplit(url)[:2] != self._origin:
            # Checked for every URL, so a `Link` page cannot carry the token elsewhere.
            raise UserError(
                f"GitHub API: refusing to send the token to {_origin_text(url)}",
                hint=f"pages and comments must stay on {_origin_text(self._api)}",
            )
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        # S310: the origin (scheme included) is checked above; api_base allows only http(s).
        request = urllib.request.Request(  # noqa: S310
            url, data=data, method=method, headers=self._headers()
        )
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.deadline.passed():
            raise UserError(
                f"GitHub API: {method} {api_path(url)} not sent: {passed(self.deadline)}"
            )
        cut = self.deadline.cuts(self._timeout)
        timeout = self.deadline.bounded(self._timeout)
        try:
            raw, headers = self._within_deadline(request, timeout)
        except TimeoutError:
            if cut:
                raise UserError(
                    f"GitHub API: {method} {api_path(url)} cut: {passed(self.deadline)}"
                ) from None
            raise UserError(
                f"GitHub API: {method} {api_path(url)} did not finish within {self._timeout:g} s",
                hint=f"check that {_origin_text(self._api)} is reachable (GITHUB_API_URL)",
            ) from None
        except urllib.error.HTTPError as exc:
            raise self._status_error(method, url, exc) from None
        except (OSError, http.client.HTTPException) as exc:  # URLError is an OSError
            raise UserError(
                f"GitHub API: {method} {api_path(url)} failed: {self._redact(_reason(exc))}",
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
            "User-Agent": self._user_agent,
        }

    def _status_error(self, method: str, url: str, exc: urllib.error.HTTPError) -> StatusError:
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
        return StatusError(
            method, api_path(url), exc.code, message, rate_limited, requested_wait(headers)
        )

    def _json(self, method: str, url: str, raw: bytes) -> object:
        if len(raw) > RESPONSE_LIMIT:
            raise UserError(f"GitHub API: the reply to {method} {api_path(url)} is too large")
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise UserError(
                f"GitHub API: the reply to {method} {api_path(url)} is not JSON",
                hint="check GITHUB_API_URL: it must be the REST API, not the web site",
            ) from None

    def _redact(self, text: str) -> str:
        # GitHub does not echo tokens, but a proxy or a stand-in server might.
        return text.replace(self._token, "***")


# ------------------------------------------------------------------ retries


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


def retryable(exc: StatusError) -> bool:
    """A 5xx, or a rate limit: 429, or 403 with `Retry-After` / no requests left."""
    return exc.status >= 500 or exc.status == 429 or (exc.status == 403 and exc.rate_limited)


def retry_wait(exc: StatusError, attempt: int, policy: RetryPolicy) -> float | None:
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
    built: UserError, exc: StatusError, wait: float, deadline: Deadline
) -> UserError:
    """`built` (the caller's error for `exc`), saying the deadline, not the tries, ended it."""
    return UserError(
        f"GitHub API: {exc.method} {exc.url} answered {exc.status}: {exc.message} "
        f"(not retried: a wait of {wait:.0f} s would pass the overall deadline of "
        f"{deadline.total_s:g} s for GitHub)",
        hint=built.hint,
    )


def _user_error(exc: StatusError, where: str, attempts: int = 1) -> UserError:
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
    422: "GitHub refused the comment body",  # the one write: the sticky comment
    429: "GitHub rate-limited the token; wait and run again",
}


def with_retries(
    call: Callable[[], _T],
    retry: RetryPolicy,
    where: str,
    error: Callable[[StatusError, str, int], UserError] | None = None,
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
        except StatusError as exc:
            wait = retry_wait(exc, attempt, retry)
            built = (error or _user_error)(exc, where, attempt)
            if wait is None:
                raise built from None
            if wait >= overall.left():  # the try after the wait could not even start
                raise _past_deadline(built, exc, wait, overall) from None
        retry.sleep(wait)
        attempt += 1


# ------------------------------------------------------------------ URLs


def _reason(exc: BaseException) -> str:
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return one_line(str(reason) or type(reason).__name__, _MESSAGE_CHARS)


def api_path(url: str) -> str:
    """The URL without scheme and host: enough to say which call failed."""
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _origin_text(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def next_page(headers: Message, current: str) -> str | None:
    """The `rel="next"` URL of a `Link` header, or None on the last page."""
    link = str(headers.get("Link") or "")
    for match in _LINK.finditer(link):
        rel = _REL.search(match.group(2))
        if rel is not None and "next" in rel.group(1).split():
            url: str = urllib.parse.urljoin(current, match.group(1))
            return url
    return None


# ------------------------------------------------------------------ validation


def api_base(api_url: str) -> str:
    """`api_url` without a trailing slash, once it is an http(s) URL with a host."""
    parts = urllib.parse.urlsplit(api_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"the GitHub API URL must be http(s)://HOST[/PATH], got {api_url!r}",
            field="GITHUB_API_URL",
        )
    return api_url.rstrip("/")


def split_repository(repository: str) -> tuple[str, str]:
    """(owner, name) of `OWNER/NAME`, each as GitHub allows it."""
    owner, _, name = repository.partition("/")
    if not _OWNER.fullmatch(owner) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise UserError(
            f"the repository must be OWNER/NAME, got {repository!r}", field="GITHUB_REPOSITORY"
        )
    return owner, name


def check_token(token: str, hint: str | None = None) -> None:
    """A token that can go into a header as it is; the error never shows the value."""
    if not _TOKEN.fullmatch(token):
        # Never show the value: it is a secret, however malformed.
        raise UserError(
            "the GitHub token is empty or contains spaces or control characters",
            field="GITHUB_TOKEN",
            hint=hint,
        )


def checked_request(
    api_url: str, repository: str, pr_number: int, token: str, timeout: float
) -> tuple[str, str, str]:
    """(API base, owner, name) once every argument of a pull request call is checked."""
    api = api_base(api_url)
    owner, name = split_repository(repository)
    if isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number < 1:
        raise UserError(f"the pull request number must be a positive integer, got {pr_number!r}")
    check_token(token, hint="pass the token itself, e.g. GITHUB_TOKEN: ${{ github.token }}")
    if not timeout > 0:
        raise UserError(f"the timeout must be positive, got {timeout!r}")
    return api, owner, name
