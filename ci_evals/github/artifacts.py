"""The baseline from GitHub: the results artifact of the last successful evals run on a branch.

`fetch_baseline` asks the REST API, newest first, for the workflow's runs on
the branch that succeeded, takes the first run it can trust that still has the
artifact, downloads its zip (GitHub answers 302 with a short-lived URL on
another host), unpacks it safely (`safe_zip`) and puts its `results.json` at
`OUT/results.json`, where `ci-evals report --baseline OUT` reads it.

Trust: only runs of this repository (`head_repository`) started by `push`,
`schedule` or `workflow_dispatch` count (a fork's pull request from a branch
named `main` is a run "on main" too); the artifact's size is capped; the redirect
is followed once, by hand, without the token (urllib would send the
Authorization header to the storage host); the archive must hold plain files.
`OUT/baseline-source.json` says where the baseline came from, or why there is
none, so the report can say *No baseline* with the reason. No baseline is not an
error. docs/report.md (*The baseline in GitHub Actions*).
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ci_evals.backoff import Deadline, RetryPolicy
from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.github.comment import CommentSettings
from ci_evals.github.rest import (
    API_VERSION,
    DEFAULT_RETRY,
    PER_PAGE,
    Client,
    NoRedirect,
    StatusError,
    api_base,
    api_path,
    check_token,
    next_page,
    passed,
    split_repository,
    with_retries,
)
from ci_evals.github.safe_zip import ZipLimits, safe_extract
from ci_evals.results import RESULTS_FILE
from ci_evals.text import one_line

SOURCE_FILE = "baseline-source.json"
ARTIFACT_FOLDER = "artifact"
DEFAULT_ARTIFACT = "ci-evals-run"
MAX_ZIP_BYTES = 256 * 1024 * 1024
MAX_RUNS = 30  # successful runs looked at for one that still has the artifact
USER_AGENT = "ci-evals (baseline fetch)"
_CHUNK = 1024 * 1024
_WORKFLOW = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_ARTIFACT = re.compile(r"[^\x00-\x1f\x7f\"<>|*?\\/:]{1,255}")


def _checked(settings: CommentSettings) -> tuple[str, str, str]:
    """(API base, repository, token) -- the comment's settings --, every missing or
    malformed one named."""
    missing = [
        name
        for name, value in (
            ("GITHUB_REPOSITORY", settings.repository),
            ("GITHUB_TOKEN", settings.token),
        )
        if not value
    ]
    if missing:
        raise UserError(
            f"{' and '.join(missing)} not set",
            hint="in Actions: env: GITHUB_TOKEN: ${{ github.token }} (needs `actions: read`)",
        )
    assert settings.repository is not None and settings.token is not None
    check_token(settings.token)
    split_repository(settings.repository)
    return api_base(settings.api_url), settings.repository, settings.token


@dataclass(frozen=True)
class Source:
    """Where a baseline came from (`found`), or why there is none (`reason`)."""

    found: bool
    repository: str
    workflow: str
    branch: str
    artifact: str
    reason: str = ""
    run_id: int | None = None
    run_number: int | None = None
    run_url: str | None = None
    head_sha: str | None = None
    artifact_id: int | None = None

    def line(self) -> str:
        where = f"{self.workflow} on {self.branch}"
        if not self.found:
            return f"no baseline: {self.reason}"
        sha = f" at {self.head_sha[:12]}" if self.head_sha else ""
        url = f" ({self.run_url})" if self.run_url else ""
        return f"baseline from run #{self.run_number} of {where}{sha}{url}"


def write_source(out: Path, source: Source) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / SOURCE_FILE).write_text(json.dumps(asdict(source), indent=2) + "\n", encoding="utf-8")


def read_source(folder: Path) -> tuple[str | None, str | None]:
    """What `baseline fetch` wrote in `folder`: (a line saying where from, why there is none).

    (None, None) for a folder it did not write (a plain run folder or file);
    an unreadable file is said, not trusted.
    """
    path = folder / SOURCE_FILE
    if not folder.is_dir() or not path.exists():
        return None, None
    try:
        data = json_input.parse(path.read_text(encoding="utf-8"), file=path)
        source = Source(**data)  # type: ignore[arg-type]
    except UserError as exc:
        return None, f"{path} is unreadable ({one_line(exc.message, 200)})"
    except (OSError, ValueError, TypeError) as exc:
        return None, f"{path} is unreadable ({one_line(str(exc), 200)})"
    if not source.found:
        return None, source.reason
    return f"Baseline {source.line().removeprefix('baseline ')}.", None


# ------------------------------------------------------------------ the REST calls


# Events that run the branch's own code. A `pull_request` run is listed under
# its head branch's name -- a fork's `main` too --, so it is never a baseline.
TRUSTED_EVENTS = frozenset({"push", "schedule", "workflow_dispatch"})


def _trusted(run: Mapping[str, Any], repository: str, branch: str) -> bool:
    """A run of this repository's own branch, not one a pull request (a fork's) started."""
    head = run.get("head_repository")
    full_name = head.get("full_name") if isinstance(head, Mapping) else None
    return (
        run.get("event") in TRUSTED_EVENTS
        and isinstance(full_name, str)
        and full_name.lower() == repository.lower()
        and run.get("head_branch") == branch
        and run.get("conclusion") == "success"
    )


def _runs(client: Client, url: str) -> Iterator[Mapping[str, Any]]:
    """The listed workflow runs, newest first, over pages, at most `MAX_RUNS`."""
    seen = 0
    next_url: str | None = url
    visited: set[str] = set()
    while next_url is not None and next_url not in visited and seen < MAX_RUNS:
        visited.add(next_url)
        page, headers = client.request("GET", next_url)
        runs = page.get("workflow_runs") if isinstance(page, dict) else None
        if not isinstance(runs, list):
            raise UserError(f"GitHub API: GET {api_path(next_url)} did not answer workflow runs")
        for run in runs:
            if isinstance(run, dict) and seen < MAX_RUNS:
                seen += 1
                yield run
        next_url = next_page(headers, next_url)


def _artifact(client: Client, repo_url: str, run_id: int, name: str) -> Mapping[str, Any] | None:
    query = urllib.parse.urlencode({"name": name, "per_page": PER_PAGE})
    page, _ = client.request("GET", f"{repo_url}/actions/runs/{run_id}/artifacts?{query}")
    items = page.get("artifacts") if isinstance(page, dict) else None
    if not isinstance(items, list):
        raise UserError(f"GitHub API: the artifacts of run {run_id} are not a list")
    for item in items:
        if isinstance(item, dict) and item.get("name") == name and not item.get("expired"):
            return item
    return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _download(
    url: str,
    token: str,
    api: str,
    target: Path,
    *,
    max_bytes: int,
    timeout: float,
    deadline: Deadline,
) -> None:
    """The artifact's zip into `target`: one redirect, followed without the token, capped,
    within the fetch's `deadline` (each read's `timeout` shortened to it)."""
    if deadline.passed():
        raise UserError(f"the artifact download was not started: {passed(deadline)}")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": USER_AGENT,
    }
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - checked by the caller
    try:
        with opener.open(request, timeout=deadline.bounded(timeout)) as response:
            _save(response, target, max_bytes, deadline)  # a server that serves it directly
            return
    except urllib.error.HTTPError as exc:
        location = exc.headers.get("Location") if exc.code in (301, 302, 303, 307, 308) else None
        status, reason = exc.code, exc.reason
        exc.close()
        if location is None:
            raise UserError(
                f"GitHub API: GET {api_path(url)} answered {status}: {reason}",
                hint="the token needs `actions: read`" if status in (401, 403, 404) else None,
            ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise UserError(
            f"GitHub API: GET {api_path(url)} failed: {exc}".replace(token, "***")
        ) from None
    where = urllib.parse.urljoin(url, location)
    scheme = urllib.parse.urlsplit(where).scheme
    # https only; plain http only when the API itself is (a local stand-in server).
    if scheme != "https" and not (scheme == "http" and api.startswith("http://")):
        raise UserError(f"the artifact download redirected to a {scheme or 'relative'} URL")
    # No token, no further redirects: the URL itself is the (short-lived) credential.
    blob = urllib.request.Request(where, headers={"User-Agent": USER_AGENT})  # noqa: S310
    try:
        with opener.open(blob, timeout=deadline.bounded(timeout)) as response:
            _save(response, target, max_bytes, deadline)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise UserError(f"the artifact download answered {exc.code}: {exc.reason}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise UserError(f"the artifact download failed: {one_line(str(exc), 300)}") from None


def _save(
    response: http.client.HTTPResponse, target: Path, max_bytes: int, deadline: Deadline
) -> None:
    length = response.headers.get("Content-Length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise _too_large(int(length), max_bytes)
    received = 0
    with target.open("wb") as out:
        # read1: what has arrived, so a server trickling a byte at a time meets the
        # deadline between reads (read(n) would wait for n bytes, each read in time).
        while chunk := response.read1(_CHUNK):
            if deadline.passed():
                raise UserError(f"the artifact download was cut: {passed(deadline)}")
            received += len(chunk)
            if received > max_bytes:
                raise _too_large(received, max_bytes, more=True)
            out.write(chunk)


def _too_large(size: int, limit: int, *, more: bool = False) -> UserError:
    over = "more than " if more else ""
    return UserError(
        f"refusing the artifact: {over}{size} bytes, over the limit of {limit}",
        field="--max-bytes",
        hint="raise --max-bytes, or upload only results.json as the baseline artifact",
    )


@dataclass(frozen=True)
class FetchRequest:
    workflow: str  # a workflow file name (evals.yml) or id
    branch: str
    out: Path
    artifact: str = DEFAULT_ARTIFACT
    max_bytes: int = MAX_ZIP_BYTES
    timeout: float = 60.0
    # A 5xx or a rate limit is tried again, as the comment does (its waits bounded).
    retry: RetryPolicy = field(default=DEFAULT_RETRY, compare=False)


def _check(request: FetchRequest) -> None:
    if not _WORKFLOW.fullmatch(request.workflow):
        raise UserError(f"not a workflow file name or id: {request.workflow!r}", field="--workflow")
    if not request.branch or any(ord(c) < 0x20 or c == "\x7f" for c in request.branch):
        raise UserError(f"not a branch name: {request.branch!r}", field="--branch")
    if not _ARTIFACT.fullmatch(request.artifact):
        raise UserError(f"not an artifact name: {request.artifact!r}", field="--artifact")
    if request.out.exists() and (not request.out.is_dir() or any(request.out.iterdir())):
        raise UserError("the folder is not empty", file=request.out, field="--out")


def _find(
    client: Client, api: str, repository: str, request: FetchRequest
) -> tuple[Mapping[str, Any], Mapping[str, Any]] | str:
    """The newest trusted successful run with the artifact, and the artifact; else why not."""
    repo_url = f"{api}/repos/{repository}"
    query = urllib.parse.urlencode(
        {"branch": request.branch, "status": "success", "per_page": PER_PAGE}
    )
    workflow = urllib.parse.quote(request.workflow, safe="")
    runs_url = f"{repo_url}/actions/workflows/{workflow}/runs?{query}"

    def look() -> tuple[tuple[Mapping[str, Any], Mapping[str, Any]] | None, int]:
        looked = 0
        for run in _runs(client, runs_url):
            run_id = _int(run.get("id"))
            if run_id is None or not _trusted(run, repository, request.branch):
                continue
            looked += 1
            artifact = _artifact(client, repo_url, run_id, request.artifact)
            if artifact is not None:
                return (run, artifact), looked
            # else e.g. a run that selected no stage and uploaded nothing: an older one
        return None, looked

    # A single 502 or a secondary rate limit is no reason to compare with nothing.
    found, looked = with_retries(look, request.retry, repository, _refused, client.deadline)
    if found is not None:
        return found
    if looked == 0:
        return (
            f"no successful run of {request.workflow} on {request.branch} (push, schedule or "
            "workflow_dispatch)"
        )
    return (
        f"none of the last {looked} successful run(s) of {request.workflow} on "
        f"{request.branch} has an artifact named {request.artifact!r} (expired, or never uploaded)"
    )


def _refused(exc: StatusError, where: str, attempts: int) -> UserError:
    hint = "the token needs `actions: read`" if exc.status in (401, 403, 404) else None
    tries = f" ({attempts} tries)" if attempts > 1 else ""
    return UserError(
        f"GitHub API: {exc.method} {exc.url} answered {exc.status}: {exc.message}{tries}",
        hint=hint,
    )


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def fetch_baseline(settings: CommentSettings, request: FetchRequest) -> Source:
    """Find, download and unpack the baseline into `request.out`; the `Source` is also
    written there. No baseline to be found is a `Source` with `found=False`, not an error;
    a refused artifact or a GitHub error raises `UserError` after writing why."""
    _check(request)
    api, repository, token = _checked(settings)
    source = Source(False, repository, request.workflow, request.branch, request.artifact)
    try:
        # One deadline for the whole fetch: the listing's pages, its retries, the download.
        client = Client(
            api, token, request.timeout, request.retry.deadline(), user_agent=USER_AGENT
        )
        found = _find(client, api, repository, request)
        if isinstance(found, str):
            source = replace(source, reason=found)
        else:
            run, artifact = found
            source = replace(
                source,
                found=True,
                run_id=_int(run.get("id")),
                run_number=_int(run.get("run_number")),
                run_url=_string(run.get("html_url")),
                head_sha=_string(run.get("head_sha")),
                artifact_id=_int(artifact.get("id")),
            )
            _unpack(artifact, request, api, token, client.deadline)
    except UserError as exc:
        write_source(request.out, replace(source, found=False, reason=f"refused: {exc}"))
        raise
    write_source(request.out, source)
    return source


def _unpack(
    artifact: Mapping[str, Any], request: FetchRequest, api: str, token: str, deadline: Deadline
) -> None:
    """The artifact's zip, downloaded and unpacked into `OUT/artifact/`; its results.json
    copied to `OUT/results.json`."""
    out = request.out
    size = _int(artifact.get("size_in_bytes"))
    if size is not None and size > request.max_bytes:
        raise _too_large(size, request.max_bytes)
    url = artifact.get("archive_download_url")
    same_host = urllib.parse.urlsplit(str(url))[:2] == urllib.parse.urlsplit(api)[:2]
    if not isinstance(url, str) or not same_host:
        raise UserError("the artifact's download URL is not on the API's host")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ci-evals-baseline-") as temp:
        archive = Path(temp) / "artifact.zip"
        _download(
            url, token, api, archive, max_bytes=request.max_bytes, timeout=request.timeout,
            deadline=deadline,
        )  # fmt: skip
        files = safe_extract(archive, out / ARTIFACT_FOLDER, ZipLimits(request.max_bytes * 4))
    results = _results_in(files)
    if results is None:
        raise UserError(f"the artifact holds no {RESULTS_FILE}", file=out / ARTIFACT_FOLDER)
    shutil.copyfile(out / ARTIFACT_FOLDER / results, out / RESULTS_FILE)


def _results_in(files: list[str]) -> str | None:
    """The shallowest `results.json` of the artifact; several at one depth: ambiguous."""
    candidates = sorted((f.count("/"), f) for f in files if f.rsplit("/", 1)[-1] == RESULTS_FILE)
    if not candidates:
        return None
    if len(candidates) > 1 and candidates[0][0] == candidates[1][0]:
        raise UserError(
            f"the artifact holds several {RESULTS_FILE} at one depth: "
            f"{candidates[0][1]}, {candidates[1][1]}",
            hint="upload one run folder as the baseline artifact",
        )
    return candidates[0][1]
