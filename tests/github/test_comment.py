"""The sticky PR comment, against a local HTTP server that plays GitHub's REST API.

The fake keeps issue comments in memory, records every request, pages the
listing with `Link` headers like GitHub (per_page, at most 100), rejects a body
over 65,536 characters with 422 and answers 401 to a wrong token. Failures are
injected per method. The code under test talks real HTTP to it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ci_evals.backoff import RetryPolicy
from ci_evals.errors import UserError
from ci_evals.github.comment import (
    COMMENT_LIMIT,
    CommentSettings,
    comment_body,
    comment_on_pull_request,
    post_sticky_comment,
    pr_number_from_event,
    sticky_marker,
)

TOKEN = "ghs_s3cr3tT0kenValue1234567890"
REPO = "acme/widgets"
PR = 7
MARKER = sticky_marker("ci-evals")
BOT = {"login": "github-actions[bot]", "type": "Bot"}
HUMAN = {"login": "mallory", "type": "User"}
OTHER_BOT = {"login": "other-app[bot]", "type": "Bot"}
DEPENDABOT = {"login": "dependabot[bot]", "type": "Bot"}
APP = {"login": "ci-evals-app[bot]", "type": "Bot"}  # what an App's token posts as


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy from the developer's environment must not stand between us and the fake."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


# ------------------------------------------------------------------ the fake GitHub


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGitHub:
    url: str = ""
    token: str = TOKEN
    body_limit: int = COMMENT_LIMIT
    comments: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    # method -> (status, JSON reply, extra headers): answered instead of the real thing
    fail: dict[str, tuple[int, Any, dict[str, str]]] = field(default_factory=dict)
    # method -> how many more requests `fail` answers (absent: every one)
    fail_times: dict[str, int] = field(default_factory=dict)
    # number -> the `GET /repos/OWNER/NAME/pulls/N` reply (the fork path checks a PR's head)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_id: int = 1000
    poster: dict[str, str] = field(default_factory=lambda: dict(BOT))  # the token's identity

    def add(self, body: str, user: dict[str, str]) -> int:
        self.next_id += 1
        self.comments.append({"id": self.next_id, "body": body, "user": dict(user)})
        return self.next_id

    def body_of(self, comment_id: int) -> str:
        body: str = next(c["body"] for c in self.comments if c["id"] == comment_id)
        return body

    def methods(self) -> list[str]:
        return [r.method for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        github = self.server.github
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        github.requests.append(Recorded(method, self.path, dict(self.headers.items()), body))
        if self.headers.get("Authorization") != f"Bearer {github.token}":
            return self._reply(401, {"message": "Bad credentials"})
        if method in github.fail and github.fail_times.get(method, 1) > 0:
            if method in github.fail_times:
                github.fail_times[method] -= 1
            status, reply, headers = github.fail[method]
            return self._reply(status, reply, headers)
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path.split("/")[1:]
        if path[:3] != ["repos", *REPO.split("/")]:
            return self._reply(404, {"message": "Not Found"})
        rest = path[3:]
        if len(rest) == 2 and rest[0] == "pulls" and method == "GET":
            pull = github.pulls.get(int(rest[1])) if rest[1].isdigit() else None
            return self._reply(200, pull) if pull else self._reply(404, {"message": "Not Found"})
        if rest == ["issues", str(PR), "comments"] and method == "GET":
            return self._list(urllib.parse.parse_qs(parts.query))
        if rest == ["issues", str(PR), "comments"] and method == "POST":
            return self._create(body)
        if len(rest) == 3 and rest[:2] == ["issues", "comments"] and method == "PATCH":
            return self._update(int(rest[2]), body)
        return self._reply(404, {"message": "Not Found"})

    def _list(self, query: dict[str, list[str]]) -> None:
        github = self.server.github
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        items = github.comments[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(github.comments) // per_page))
        links = []
        base = f"{github.url}/repos/{REPO}/issues/{PR}/comments?per_page={per_page}"
        if page < last:
            links.append(f'<{base}&page={page + 1}>; rel="next"')
            links.append(f'<{base}&page={last}>; rel="last"')
        headers = {"Link": ", ".join(links)} if links else {}
        self._reply(200, [self._public(c) for c in items], headers)

    def _too_long(self, body: Any) -> bool:
        return len(body["body"]) > self.server.github.body_limit

    def _create(self, body: Any) -> None:
        github = self.server.github
        if self._too_long(body):
            return self._reply(422, _TOO_LONG)
        comment_id = github.add(body["body"], github.poster)
        self._reply(201, self._public(github.comments[-1]) | {"id": comment_id})

    def _update(self, comment_id: int, body: Any) -> None:
        github = self.server.github
        comment = next((c for c in github.comments if c["id"] == comment_id), None)
        if comment is None:
            return self._reply(404, {"message": "Not Found"})
        if self._too_long(body):
            return self._reply(422, _TOO_LONG)
        comment["body"] = body["body"]
        self._reply(200, self._public(comment))

    def _public(self, comment: dict[str, Any]) -> dict[str, Any]:
        url = f"https://github.com/{REPO}/pull/{PR}#issuecomment-{comment['id']}"
        return {**comment, "html_url": url}

    def _reply(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)


_TOO_LONG = {
    "message": "Validation Failed",
    "errors": [
        {
            "resource": "IssueComment",
            "code": "custom",
            "field": "body",
            "message": "body is too long (maximum is 65536 characters)",
        }
    ],
    "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, github: FakeGitHub) -> None:
        self.github = github
        super().__init__(("127.0.0.1", 0), _Handler)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    server = _Server(fake)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    # A short poll: shutdown() waits for it (0.5 s by default, per test).
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join()


def post(github: FakeGitHub, body: str = "## ci-evals: passed\n", **kwargs: Any) -> Any:
    options: dict[str, Any] = {
        "api_url": github.url,
        "repository": REPO,
        "pr_number": PR,
        "token": TOKEN,
        "timeout": 5.0,
        "retry": FAST_RETRY,
    }
    options.update(kwargs)
    return post_sticky_comment(body, **options)


# The real waits, scaled down: a test must not sleep for seconds.
FAST_RETRY = RetryPolicy(attempts=3, first_s=0.01, cap_s=0.5)


# ------------------------------------------------------------------ create and update


def test_creates_a_comment_when_none_exists(github: FakeGitHub) -> None:
    github.add("LGTM", HUMAN)
    outcome = post(github, "## ci-evals: passed\n")
    assert outcome.action == "created"
    assert github.methods() == ["GET", "POST"]
    assert github.requests[0].path == f"/repos/{REPO}/issues/{PR}/comments?per_page=100"
    new = github.comments[-1]
    assert new["body"] == f"{MARKER}\n## ci-evals: passed\n"
    assert outcome.comment_url == f"https://github.com/{REPO}/pull/{PR}#issuecomment-{new['id']}"


def test_a_second_run_updates_the_first_runs_comment(github: FakeGitHub) -> None:
    first = post(github, "first\n")
    second = post(github, "second\n")
    assert (first.action, second.action) == ("created", "updated")
    assert len(github.comments) == 1
    assert github.comments[0]["body"] == f"{MARKER}\nsecond\n"
    assert first.comment_url == second.comment_url


def test_updates_the_posting_identitys_latest_marked_comment_only(github: FakeGitHub) -> None:
    human = github.add(f"{MARKER}\nI pasted the marker", HUMAN)
    older = github.add(f"{MARKER}\nold summary", BOT)
    ours = github.add(f"{MARKER}\nour summary", BOT)
    other_key = github.add(f"{sticky_marker('nightly')}\nnightly summary", BOT)
    quoted = github.add(f"> {MARKER}\nquoting it", BOT)  # the marker, but not first
    newer = github.add(f"{MARKER}\nanother bot's", OTHER_BOT)  # a bot, but not us
    github.add("thanks", HUMAN)

    outcome = post(github, "fresh\n")

    assert outcome.action == "updated"
    assert github.methods() == ["GET", "PATCH"]
    assert github.requests[1].path == f"/repos/{REPO}/issues/comments/{ours}"
    assert github.body_of(ours) == f"{MARKER}\nfresh\n"
    assert github.body_of(newer) == f"{MARKER}\nanother bot's"
    assert github.body_of(human) == f"{MARKER}\nI pasted the marker"
    assert github.body_of(older) == f"{MARKER}\nold summary"
    assert github.body_of(other_key).endswith("nightly summary")
    assert github.body_of(quoted).endswith("quoting it")


def test_another_bots_marker_comment_is_never_edited(github: FakeGitHub) -> None:
    """Any `type: Bot` used to match: dependabot's comment quoting the marker was edited."""
    planted = github.add(f"{MARKER}\nBumps foo from 1.0 to 1.1", DEPENDABOT)
    assert post(github).action == "created"
    assert github.body_of(planted) == f"{MARKER}\nBumps foo from 1.0 to 1.1"
    assert [c["user"]["login"] for c in github.comments] == ["dependabot[bot]", BOT["login"]]


def test_an_app_token_owns_the_marker_it_posts_as(github: FakeGitHub, tmp_path: Path) -> None:
    """An App's token posts as APP[bot]: CI_EVALS_COMMENT_AUTHOR names it (GET /user is
    not open to such tokens), and github-actions[bot]'s marker comment is not its own."""
    github.poster = dict(APP)
    actions = github.add(f"{MARKER}\nposted with GITHUB_TOKEN", BOT)
    settings = CommentSettings.from_environ(
        {
            "GITHUB_API_URL": github.url,
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_TOKEN": TOKEN,
            "CI_EVALS_COMMENT_AUTHOR": "CI-Evals-App[bot]",  # logins ignore case
        }
    )
    event = _event(tmp_path, {"pull_request": {"number": PR}})

    def note(markdown: str) -> str:
        return comment_on_pull_request(
            markdown, event_name="pull_request", event_path=event, settings=settings
        )

    assert note("first\n").startswith("created a comment")
    assert note("second\n").startswith("updated comment")
    assert github.body_of(actions) == f"{MARKER}\nposted with GITHUB_TOKEN"
    assert [c["body"] for c in github.comments if c["user"] == APP] == [f"{MARKER}\nsecond\n"]
    assert CommentSettings.from_environ({}).author == "github-actions[bot]"


def test_a_human_comment_with_the_marker_is_never_taken_over(github: FakeGitHub) -> None:
    human = github.add(f"{MARKER}\nhijack", HUMAN)
    assert post(github).action == "created"
    assert github.body_of(human) == f"{MARKER}\nhijack"
    assert len(github.comments) == 2


def test_two_keys_keep_two_comments(github: FakeGitHub) -> None:
    post(github, "unit\n", marker_key="unit")
    post(github, "nightly\n", marker_key="nightly")
    post(github, "unit again\n", marker_key="unit")
    bodies = sorted(c["body"] for c in github.comments)
    assert bodies == [
        f"{sticky_marker('nightly')}\nnightly\n",
        f"{sticky_marker('unit')}\nunit again\n",
    ]


def test_follows_link_pages_to_find_the_comment(github: FakeGitHub) -> None:
    for n in range(120):
        github.add(f"comment {n}", HUMAN)
    sticky = github.add(f"{MARKER}\nold", BOT)
    for n in range(100):
        github.add(f"later comment {n}", HUMAN)
    # 221 comments: 3 pages of 100; the sticky one is on page 2, the last page has 21.

    outcome = post(github, "new\n")

    assert outcome.action == "updated"
    gets = [r.path for r in github.requests if r.method == "GET"]
    assert gets == [
        f"/repos/{REPO}/issues/{PR}/comments?per_page=100",
        f"/repos/{REPO}/issues/{PR}/comments?per_page=100&page=2",
        f"/repos/{REPO}/issues/{PR}/comments?per_page=100&page=3",
    ]
    assert github.body_of(sticky) == f"{MARKER}\nnew\n"
    assert len(github.comments) == 221


def test_a_comment_deleted_meanwhile_is_created_again(github: FakeGitHub) -> None:
    github.add(f"{MARKER}\nold", BOT)
    github.fail["PATCH"] = (404, {"message": "Not Found"}, {})
    outcome = post(github)
    assert outcome.action == "created"
    assert github.methods() == ["GET", "PATCH", "POST"]


# ------------------------------------------------------------------ size


def test_a_long_body_is_cut_at_a_line_with_a_note(github: FakeGitHub) -> None:
    lines = [f"| stage {n} | failed | {'x' * 80} |" for n in range(2000)]
    summary = "\n".join(lines) + "\n"
    assert len(summary) > 3 * COMMENT_LIMIT

    outcome = post(github, summary)

    assert outcome.action == "created"
    sent = github.comments[-1]["body"]
    assert len(sent) <= COMMENT_LIMIT
    assert sent.startswith(MARKER + "\n")
    kept, note = sent[len(MARKER) + 1 :].split("\n\n... summary cut: ")
    assert summary.startswith(kept + "\n")  # whole lines only
    cut = len(summary) - len(kept) - 1
    assert note == f"{cut} more characters; see the step summary / run artifact\n"
    assert COMMENT_LIMIT - len(sent) < 200  # cut at the last line that fits


def test_a_body_of_emoji_is_measured_in_utf16_units(github: FakeGitHub) -> None:
    summary = ("\U0001f600" * 50 + "\n") * 2000
    assert post(github, summary).action == "created"
    sent = github.comments[-1]["body"]
    assert len(sent.encode("utf-16-le")) // 2 <= COMMENT_LIMIT
    assert "summary cut" in sent


def test_one_huge_line_is_cut_inside_it() -> None:
    body = comment_body("y" * 100_000, MARKER)
    assert len(body) <= COMMENT_LIMIT
    assert body.startswith(f"{MARKER}\nyyy")
    assert body.endswith("see the step summary / run artifact\n")


def test_a_body_that_fits_is_sent_whole() -> None:
    summary = "z" * (COMMENT_LIMIT - len(MARKER) - 1)
    assert comment_body(summary, MARKER) == f"{MARKER}\n{summary}"


def test_github_refusing_a_body_is_a_user_error(github: FakeGitHub) -> None:
    github.body_limit = 1000  # a stricter GitHub: its 422 reaches the user intact
    with pytest.raises(UserError) as info:
        post(github, "line\n" * 1000)
    text = str(info.value)
    assert "422" in text
    assert "body is too long (maximum is 65536 characters)" in text
    assert TOKEN not in text


# ------------------------------------------------------------------ read-only tokens and errors


Failure = tuple[int, Any, dict[str, str]]
READ_ONLY: Failure = (403, {"message": "Resource not accessible by integration"}, {})


@pytest.mark.parametrize("existing", [False, True])
def test_a_read_only_token_skips_the_comment(github: FakeGitHub, existing: bool) -> None:
    if existing:
        github.add(f"{MARKER}\nold", BOT)
    github.fail["PATCH"] = github.fail["POST"] = READ_ONLY
    outcome = post(github)
    assert outcome.action == "skipped-read-only"
    assert outcome.comment_url is None
    assert "403" in outcome.detail
    assert "Resource not accessible by integration" in outcome.detail
    assert len(github.comments) == int(existing)


def test_a_listing_refused_with_404_skips_the_comment(github: FakeGitHub) -> None:
    github.fail["GET"] = (404, {"message": "Not Found"}, {})
    outcome = post(github)
    assert outcome.action == "skipped-read-only"
    assert github.methods() == ["GET"]


def test_a_rate_limit_403_is_an_error_not_a_skip(github: FakeGitHub) -> None:
    github.fail["POST"] = (
        403,
        {"message": "API rate limit exceeded for installation ID 1."},
        {"x-ratelimit-remaining": "0"},
    )
    with pytest.raises(UserError, match="403: API rate limit exceeded"):
        post(github)


def test_a_wrong_token_is_a_401_user_error_without_the_token(github: FakeGitHub) -> None:
    github.token = "ghs_theRightOne"
    with pytest.raises(UserError) as info:
        post(github)
    text = f"{info.value} {info.value!r} {info.value.hint}"
    assert "401" in text
    assert "Bad credentials" in text
    assert TOKEN not in text


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_server_error_is_a_user_error(github: FakeGitHub, method: str) -> None:
    github.fail[method] = (500, {"message": f"Server Error {TOKEN}"}, {})
    with pytest.raises(UserError) as info:
        post(github)
    text = str(info.value)
    assert "500" in text
    assert "Server Error ***" in text  # redacted even when a server echoes it
    assert TOKEN not in text


def test_a_listing_that_is_not_a_list_is_a_user_error(github: FakeGitHub) -> None:
    github.fail["GET"] = (200, "<html>", {})  # JSON string, not a list of comments
    with pytest.raises(UserError, match="did not answer a list of comments"):
        post(github)


def test_every_request_carries_the_api_headers(github: FakeGitHub) -> None:
    github.add(f"{MARKER}\nold", BOT)
    post(github)
    post(github, marker_key="other")
    assert github.methods() == ["GET", "PATCH", "GET", "POST"]
    for request in github.requests:
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["accept"] == "application/vnd.github+json"
        assert headers["x-github-api-version"] == "2022-11-28"
        assert headers["user-agent"].startswith("ci-evals")


def test_a_link_to_another_host_is_not_followed(github: FakeGitHub) -> None:
    github.fail["GET"] = (200, [], {"Link": '<https://evil.example/steal?page=2>; rel="next"'})
    with pytest.raises(UserError, match=r"refusing to send the token to https://evil\.example"):
        post(github)
    assert github.methods() == ["GET"]


def test_a_redirect_is_not_followed(github: FakeGitHub) -> None:
    github.fail["POST"] = (301, {"message": "Moved Permanently"}, {"Location": "http://x.test/"})
    with pytest.raises(UserError, match="301"):
        post(github)
    assert github.methods() == ["GET", "POST"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_refused_connection_is_a_user_error() -> None:
    api = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(UserError) as info:
        post_sticky_comment("x", api_url=api, repository=REPO, pr_number=PR, token=TOKEN)
    assert "refused" in str(info.value).lower()
    assert TOKEN not in str(info.value)


def test_a_silent_server_times_out_as_a_user_error() -> None:
    with socket.socket() as sock:  # listens, never accepts: the request hangs
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        api = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(UserError, match=r"failed|did not finish"):
            post_sticky_comment(
                "x", api_url=api, repository=REPO, pr_number=PR, token=TOKEN, timeout=0.2
            )


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("api_url", "file:///etc/passwd", "http"),
        ("api_url", "api.github.com", "http"),
        ("repository", "widgets", "OWNER/NAME"),
        ("repository", "acme/../x", "OWNER/NAME"),
        ("pr_number", 0, "positive"),
        ("marker_key", "x --> <b>", "invalid comment key"),
        ("token", f"{TOKEN}\r\nX-Evil: 1", "GITHUB_TOKEN"),
        ("token", "", "GITHUB_TOKEN"),
    ],
)
def test_bad_arguments_are_user_errors(option: str, value: Any, expected: str) -> None:
    options: dict[str, Any] = {
        "api_url": "https://api.github.com",
        "repository": REPO,
        "pr_number": PR,
        "token": TOKEN,
    }
    options[option] = value
    with pytest.raises(UserError, match=expected) as info:
        post_sticky_comment("x", **options)
    assert TOKEN not in str(info.value)


def test_an_enterprise_api_path_is_kept(github: FakeGitHub) -> None:
    github.fail["GET"] = (200, [], {})
    # The fake serves no /api/v3 prefix: its 404 to the POST shows the prefix was sent.
    with pytest.raises(UserError, match="404"):
        post(github, api_url=f"{github.url}/api/v3/")
    assert github.requests[0].path.startswith(f"/api/v3/repos/{REPO}/issues/{PR}/comments")


# ------------------------------------------------------------------ GitHub Actions


def test_pr_number_from_event() -> None:
    payload = {"number": 7, "pull_request": {"number": 7}}
    assert pr_number_from_event(payload) == 7
    assert pr_number_from_event(payload, event_name="pull_request_target") == 7
    assert pr_number_from_event(payload, event_name="pull_request_review") is None
    assert pr_number_from_event({"after": "abc"}, event_name="push") is None
    assert pr_number_from_event({"pull_request": {"number": True}}) is None
    assert pr_number_from_event({"pull_request": {"number": "7"}}) is None
    assert pr_number_from_event({"pull_request": None}) is None


def _event(tmp_path: Path, payload: object) -> Path:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_comment_on_pull_request_posts_from_the_environment(
    github: FakeGitHub, tmp_path: Path
) -> None:
    settings = CommentSettings.from_environ(
        {"GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN}
    )
    assert TOKEN not in repr(settings)
    note = comment_on_pull_request(
        "## summary\n",
        event_name="pull_request",
        event_path=_event(tmp_path, {"pull_request": {"number": PR}}),
        settings=settings,
    )
    assert note.startswith(f"created a comment on {REPO}#{PR}: https://github.com/")
    assert github.comments[-1]["body"] == f"{MARKER}\n## summary\n"


def test_comment_on_pull_request_notes_why_it_did_not_post(tmp_path: Path) -> None:
    settings = CommentSettings.from_environ({"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": TOKEN})
    assert settings.api_url == "https://api.github.com"
    event = _event(tmp_path, {"pull_request": {"number": PR}})

    def note(event_name: str | None, settings: CommentSettings = settings) -> str:
        return comment_on_pull_request(
            "x", event_name=event_name, event_path=event, settings=settings
        )

    assert note(None) == "no PR comment: this run is not a pull request"
    assert note("push") == "no PR comment: a 'push' event is not a pull request"
    no_token = CommentSettings.from_environ({"GITHUB_REPOSITORY": REPO})
    assert "GITHUB_TOKEN is not set" in note("pull_request", no_token)


def test_comment_on_pull_request_says_when_the_token_is_read_only(
    github: FakeGitHub, tmp_path: Path
) -> None:
    github.fail["POST"] = READ_ONLY
    settings = CommentSettings(api_url=github.url, repository=REPO, token=TOKEN)
    note = comment_on_pull_request(
        "x",
        event_name="pull_request",
        event_path=_event(tmp_path, {"pull_request": {"number": PR}}),
        settings=settings,
    )
    assert "no PR comment" in note
    assert "read-only" in note
    assert "\n" not in note


def test_a_broken_event_file_is_a_user_error(tmp_path: Path) -> None:
    settings = CommentSettings(api_url="https://api.github.com", repository=REPO, token=TOKEN)
    bad = tmp_path / "event.json"
    bad.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(UserError, match="cannot read the event payload"):
        comment_on_pull_request("x", event_name="pull_request", event_path=bad, settings=settings)


def _on_a_pull_request(github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment of an Actions job on a pull request, GitHub played by `github`."""
    event = _event(tmp_path, {"pull_request": {"number": PR}})
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }.items():
        monkeypatch.setenv(name, value)


def test_the_report_command_posts_and_then_leaves_an_unchanged_comment(
    github: FakeGitHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ci_evals.main import main  # noqa: PLC0415
    from ci_evals.results.model import write_results  # noqa: PLC0415
    from tests.report.test_report import a_run, finished, passed_stage, scenario  # noqa: PLC0415

    run_dir = tmp_path / "run"
    write_results(run_dir, finished(a_run(scenario("acme", passed_stage(1)))))
    _on_a_pull_request(github, tmp_path, monkeypatch)

    assert main(["report", str(run_dir), "--comment", "--markdown", str(tmp_path / "s.md")]) == 0
    assert main(["report", str(run_dir), "--comment", "--markdown", str(tmp_path / "s.md")]) == 0

    # The same results twice: one comment, never edited (a PATCH would mark it "edited").
    assert github.methods() == ["GET", "POST", "GET"]
    (comment,) = github.comments
    assert comment["body"].startswith("<!-- ci-evals-sticky:ci-evals -->")
    assert (tmp_path / "s.md").read_text() in comment["body"]
    assert "ci-evals report: --comment:" in capsys.readouterr().err
    assert TOKEN not in (tmp_path / "summary.md").read_text()


# ------------------------------------------------------------------ unchanged bodies and retries


def test_a_second_run_with_the_same_summary_edits_nothing(github: FakeGitHub) -> None:
    first = post(github, "same\n")
    second = post(github, "same\n")
    assert (first.action, second.action) == ("created", "unchanged")
    assert github.methods() == ["GET", "POST", "GET"]
    assert second.comment_url == first.comment_url


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_is_retried(github: FakeGitHub, method: str, status: int) -> None:
    github.fail[method] = (status, {"message": "Server Error"}, {})
    github.fail_times[method] = 2
    outcome = post(github)
    assert outcome.action == "created"
    assert github.methods().count(method) == 3
    assert len(github.comments) == 1


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        (403, {"Retry-After": "0"}),
        (429, {"Retry-After": "0"}),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"}),
        (429, {}),
    ],
)
def test_a_secondary_rate_limit_is_retried(
    github: FakeGitHub, status: int, headers: dict[str, str]
) -> None:
    message = {"message": "You have exceeded a secondary rate limit."}
    github.fail["POST"] = (status, message, headers)
    github.fail_times["POST"] = 1
    assert post(github).action == "created"
    assert github.methods() == ["GET", "POST", "GET", "POST"]


def test_retry_after_is_honoured_and_counted(github: FakeGitHub) -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=4, first_s=0.01, cap_s=5.0, sleep=waits.append)
    github.fail["PATCH"] = (403, {"message": "secondary rate limit"}, {"Retry-After": "3"})
    github.fail_times["PATCH"] = 2
    github.add(f"{MARKER}\nold", BOT)
    assert post(github, retry=policy).action == "updated"
    assert waits == [3.0, 3.0]


def test_no_retry_after_means_exponential_backoff(github: FakeGitHub) -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=3, first_s=0.5, cap_s=5.0, sleep=waits.append)
    github.fail["GET"] = (502, {"message": "Bad Gateway"}, {})
    with pytest.raises(UserError, match=r"502: Bad Gateway .*3 tries"):
        post(github, retry=policy)
    assert waits == [0.5, 1.0]
    assert github.methods() == ["GET", "GET", "GET"]


def test_a_wait_beyond_the_cap_is_not_waited_for(github: FakeGitHub) -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=3, first_s=0.01, cap_s=60.0, sleep=waits.append)
    github.fail["POST"] = (429, {"message": "rate limit"}, {"Retry-After": "3600"})
    with pytest.raises(UserError, match=r"429: rate limit .*asked to wait 3600s") as info:
        post(github, retry=policy)
    assert waits == []
    assert info.value.hint is not None and "rate-limited" in info.value.hint


def test_a_create_that_landed_despite_a_5xx_is_not_posted_twice(github: FakeGitHub) -> None:
    # GitHub stored the comment, then the proxy in front answered 502: the next
    # attempt lists again, finds it and leaves it (same body) instead of posting a copy.
    github.add(f"{MARKER}\n## ci-evals: passed\n", BOT)
    github.fail["GET"] = (502, {"message": "Bad Gateway"}, {})
    github.fail_times["GET"] = 1
    outcome = post(github)
    assert outcome.action == "unchanged"
    assert github.methods() == ["GET", "GET"]
    assert len(github.comments) == 1


def test_a_plain_403_is_never_retried(github: FakeGitHub) -> None:
    github.fail["POST"] = READ_ONLY
    assert post(github).action == "skipped-read-only"
    assert github.methods() == ["GET", "POST"]


def test_the_comment_names_stub_mismatches(
    github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ci_evals.main import main  # noqa: PLC0415
    from ci_evals.results.model import write_results  # noqa: PLC0415
    from tests.report.test_report import a_run, finished, scenario, stub_missed_stage  # noqa: PLC0415

    run_dir = tmp_path / "run"
    write_results(run_dir, finished(a_run(scenario("acme", stub_missed_stage(1)))))
    _on_a_pull_request(github, tmp_path, monkeypatch)

    assert main(["report", str(run_dir), "--comment", "--markdown", str(tmp_path / "s.md")]) == 1

    (comment,) = github.comments
    body = str(comment["body"])
    assert "**Stub script mismatch:** 3 request(s) in 1 stage(s)" in body
    assert "| 1 s1 | error:stub |" in body
    assert "stub: rule 'r' has no turn 3 (it scripts 2)" in body


@pytest.mark.parametrize(
    ("status", "headers"),
    [(422, {}), (429, {"Retry-After": "3600"}), (403, {"x-ratelimit-remaining": "0"})],
)
def test_a_comment_that_cannot_be_posted_never_turns_a_passing_run_red(
    github: FakeGitHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: int,
    headers: dict[str, str],
) -> None:
    # Before: `report --comment` exited 2 at once (a passing job red) on a 422,
    # or a rate limit longer than the retry cap.
    from ci_evals.main import main  # noqa: PLC0415
    from ci_evals.results.model import write_results  # noqa: PLC0415
    from tests.report.test_report import a_run, finished, passed_stage, scenario  # noqa: PLC0415

    if status == 403:  # a primary limit that resets in 10 minutes: past the cap
        headers = {**headers, "x-ratelimit-reset": str(int(time.time()) + 600)}
    github.fail["POST"] = (status, {"message": "Validation Failed"}, headers)
    github.fail_times["POST"] = 99
    run_dir = tmp_path / "run"
    write_results(run_dir, finished(a_run(scenario("acme", passed_stage(1)))))
    _on_a_pull_request(github, tmp_path, monkeypatch)

    assert main(["report", str(run_dir), "--comment", "--markdown", str(tmp_path / "s.md")]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if "--comment: warning" in line]
    assert len(warned) == 1 and f"{status}" in warned[0], captured.err
    assert "::warning title=" not in captured.out  # no title: a plain warning annotation
    assert "::warning::the PR comment was not posted" in captured.out
    assert "the PR comment was not posted" in (tmp_path / "summary.md").read_text()
    assert github.comments == []


def test_a_secondary_rate_limit_naming_no_wait_waits_a_minute(github: FakeGitHub) -> None:
    # GitHub's documentation: wait at least a minute. Before: 2 s.
    waits: list[float] = []
    policy = RetryPolicy(attempts=3, first_s=2.0, cap_s=300.0, sleep=waits.append)
    github.fail["POST"] = (403, {"message": "You have exceeded a secondary rate limit."}, {})
    github.fail_times["POST"] = 1
    assert post(github, retry=policy).action == "created"
    assert waits == [60.0]


@contextlib.contextmanager
def trickling_server(head: bytes, piece: bytes, every: float) -> Iterator[str]:
    """A server (its URL) that answers one request with `head`, then `piece` every
    `every` seconds, each socket read in time, never done."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(head)
            while not stop.wait(every):
                try:
                    conn.sendall(piece)
                except OSError:
                    return

    threading.Thread(target=trickle, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


TRICKLED_HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", b"X-Slow: 1\r\n"


def test_a_server_that_trickles_its_answer_cannot_hold_the_step(github: FakeGitHub) -> None:
    # A byte every 0.3 s keeps every socket read within its timeout: before,
    # `report --comment` hung until the job was killed. The answer never ends, so
    # returning at all (with the reason) is the overall deadline at work.
    late = r"did not finish within 2 s"
    with (
        trickling_server(*TRICKLED_HEADERS, every=0.3) as url,
        pytest.raises(UserError, match=late),
    ):
        post(github, api_url=url, timeout=2.0)


# ------------------------------------------------------------------ one overall deadline


class VirtualClock:
    """Real time plus the waits a test's `sleep` only records: the deadline counts
    them as if they had been slept, and the test does not sleep."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def now(self) -> float:
        return time.monotonic() + sum(self.waits)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def deadline_policy(clock: VirtualClock, total_s: float = 600.0, attempts: int = 5) -> RetryPolicy:
    return RetryPolicy(
        attempts=attempts,
        first_s=2.0,
        cap_s=300.0,
        sleep=clock.sleep,
        total_s=total_s,
        clock=clock.now,
    )


def test_waits_that_would_pass_the_overall_deadline_are_not_waited(github: FakeGitHub) -> None:
    # Before: each wait was bounded (5 minutes), their sum was not: 5 tries of a
    # secondary limit asking 300 s held the step for 20 minutes, then failed.
    clock = VirtualClock()
    github.fail["POST"] = (403, {"message": "secondary rate limit"}, {"Retry-After": "300"})
    with pytest.raises(UserError) as info:
        post(github, retry=deadline_policy(clock))
    assert clock.waits == [300.0]  # a second 300 s wait would pass 600 s
    message = str(info.value)
    assert "403: secondary rate limit" in message
    assert "not retried: a wait of 300 s would pass the overall deadline of 600 s" in message
    assert github.methods() == ["GET", "POST", "GET", "POST"]


def test_the_default_policy_has_an_overall_deadline() -> None:
    from ci_evals.github.rest import DEFAULT_RETRY  # noqa: PLC0415

    assert DEFAULT_RETRY.total_s is not None
    assert DEFAULT_RETRY.total_s >= DEFAULT_RETRY.cap_s  # one capped wait fits


def test_a_request_is_cut_at_the_overall_deadline(github: FakeGitHub) -> None:
    # Each request has its own 30 s; the operation's deadline cuts one that is
    # still trickling when it passes, and says so.
    clock = VirtualClock()
    cut = r"cut: the overall deadline of 1 s for GitHub passed"
    with trickling_server(*TRICKLED_HEADERS, every=0.2) as url, pytest.raises(UserError, match=cut):
        post(github, api_url=url, timeout=30.0, retry=deadline_policy(clock, total_s=1.0))


def test_a_request_after_the_overall_deadline_is_not_sent(github: FakeGitHub) -> None:
    # The deadline passed during a wait that fitted (a backoff, GitHub named none):
    # the next try is not sent.
    clock = VirtualClock()
    github.fail["GET"] = (502, {"message": "Bad Gateway"}, {})
    github.fail_times["GET"] = 1
    overran = RetryPolicy(
        attempts=3,
        first_s=2.0,
        sleep=lambda s: clock.sleep(s + 99.0),  # the wait overran (a suspended runner)
        total_s=100.0,
        clock=clock.now,
    )
    with pytest.raises(UserError, match=r"GET /repos/.* not sent: the overall deadline of 100 s"):
        post(github, retry=overran)
    assert github.methods() == ["GET"]
