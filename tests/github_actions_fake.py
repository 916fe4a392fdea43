"""The stand-in GitHub of the comment tests, extended with workflow runs and artifacts.

`ActionsGitHub` is the comment tests' `FakeGitHub` plus what `ci-evals
baseline fetch` asks for, answered the way GitHub answers it:

- `GET /repos/O/R/actions/workflows/W/runs?branch=B&status=success` — the runs
  of workflow W (newest first) whose `head_branch` is B (GitHub filters on the
  head branch, so a fork's pull request from its `main` is listed too),
  paged with `Link` headers;
- `GET /repos/O/R/actions/runs/ID/artifacts?name=N` — that run's artifacts;
- `GET /repos/O/R/actions/artifacts/ID/zip` — `302 Found` to a short-lived URL
  on a second local server (GitHub's storage host), which serves the zip to
  anyone holding the URL and records whether a token came along.
"""

from __future__ import annotations

import io
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.github.test_comment import REPO, TOKEN, FakeGitHub, Recorded, _Handler

SIGNATURE = "sv=2026&sig=s3cr3t-url-signature"


@dataclass
class ActionsGitHub(FakeGitHub):
    runs: list[dict[str, Any]] = field(default_factory=list)  # newest first
    artifacts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by run id
    blobs: dict[int, bytes] = field(default_factory=dict)  # zip bytes by artifact id
    storage_url: str = ""
    storage_requests: list[Recorded] = field(default_factory=list)
    next_run: int = 500

    def add_run(
        self,
        *,
        workflow: str = "evals.yml",
        branch: str = "main",
        event: str = "push",
        head_repository: str = REPO,
        conclusion: str = "success",
    ) -> int:
        """A workflow run, newer than every run before it; its id."""
        self.next_run += 1
        run_id = self.next_run
        self.runs.insert(
            0,
            {
                "id": run_id,
                "run_number": run_id - 400,
                "workflow": workflow,
                "head_branch": branch,
                "head_sha": f"{run_id:040x}",
                "event": event,
                "status": "completed",
                "conclusion": conclusion,
                "head_repository": {"full_name": head_repository},
                "html_url": f"https://github.com/{REPO}/actions/runs/{run_id}",
            },
        )
        return run_id

    def add_artifact(
        self, run_id: int, data: bytes, *, name: str = "ci-evals-run", size: int | None = None
    ) -> int:
        """An artifact of `run_id` holding `data` (a zip); `size` what GitHub declares."""
        self.next_id += 1
        artifact_id = self.next_id
        self.artifacts.setdefault(run_id, []).append(
            {
                "id": artifact_id,
                "name": name,
                "size_in_bytes": len(data) if size is None else size,
                "expired": False,
                "archive_download_url": f"{self.url}/repos/{REPO}/actions/artifacts/"
                f"{artifact_id}/zip",
            }
        )
        self.blobs[artifact_id] = data
        return artifact_id

    def paths(self) -> list[str]:
        return [urllib.parse.urlsplit(r.path).path for r in self.requests]


def zip_of(entries: dict[str, bytes]) -> bytes:
    """A zip holding `entries` (name -> content) as plain files, names as given."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():
            archive.writestr(zipfile.ZipInfo(name), content, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


class _ActionsHandler(_Handler):
    server: _ActionsServer  # type: ignore[assignment]

    def _handle(self, method: str) -> None:
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path.split("/")[1:]
        if method != "GET" or path[:4] != ["repos", *REPO.split("/"), "actions"]:
            return super()._handle(method)
        github = self.server.github
        github.requests.append(Recorded(method, self.path, dict(self.headers.items()), None))
        if self.headers.get("Authorization") != f"Bearer {github.token}":
            return self._reply(401, {"message": "Bad credentials"})
        if method in github.fail and github.fail_times.get(method, 1) > 0:
            if method in github.fail_times:
                github.fail_times[method] -= 1
            status, reply, headers = github.fail[method]
            return self._reply(status, reply, headers)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}
        rest = path[4:]
        if len(rest) == 3 and rest[0] == "workflows" and rest[2] == "runs":
            return self._runs(rest[1], query)
        if len(rest) == 3 and rest[0] == "runs" and rest[2] == "artifacts":
            items = [
                a
                for a in github.artifacts.get(int(rest[1]), [])
                if "name" not in query or a["name"] == query["name"]
            ]
            return self._reply(200, {"total_count": len(items), "artifacts": items})
        if len(rest) == 3 and rest[0] == "artifacts" and rest[2] == "zip":
            location = f"{github.storage_url}/blob/{rest[1]}?{SIGNATURE}"
            return self._reply(302, {}, {"Location": location})
        return self._reply(404, {"message": "Not Found"})

    def _runs(self, workflow: str, query: dict[str, str]) -> None:
        github = self.server.github
        runs = [
            r
            for r in github.runs
            if r["workflow"] == workflow
            and r["head_branch"] == query.get("branch", r["head_branch"])
            and (query.get("status") != "success" or r["conclusion"] == "success")
        ]
        per_page = min(int(query.get("per_page", "30")), 100)
        page = int(query.get("page", "1"))
        items = runs[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(runs):
            following = urllib.parse.urlencode({**query, "page": page + 1})
            url = f"{github.url}/repos/{REPO}/actions/workflows/{workflow}/runs?{following}"
            headers["Link"] = f'<{url}>; rel="next"'
        self._reply(200, {"total_count": len(runs), "workflow_runs": items}, headers)


class _ActionsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, github: ActionsGitHub) -> None:
        self.github = github
        super().__init__(("127.0.0.1", 0), _ActionsHandler)


class _StorageHandler(BaseHTTPRequestHandler):
    """GitHub's storage host: the signed URL is the credential, any token is noise."""

    server: _StorageServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        github = self.server.github
        github.storage_requests.append(Recorded("GET", self.path, dict(self.headers.items()), None))
        parts = urllib.parse.urlsplit(self.path)
        name = parts.path.removeprefix("/blob/")
        data = github.blobs.get(int(name)) if name.isdigit() else None
        if parts.query != SIGNATURE or data is None:
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _StorageServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, github: ActionsGitHub) -> None:
        self.github = github
        super().__init__(("127.0.0.1", 0), _StorageHandler)


@pytest.fixture
def actions_github() -> Iterator[ActionsGitHub]:
    fake = ActionsGitHub()
    servers: list[ThreadingHTTPServer] = [_ActionsServer(fake), _StorageServer(fake)]
    fake.url = f"http://127.0.0.1:{servers[0].server_address[1]}"
    fake.storage_url = f"http://127.0.0.1:{servers[1].server_address[1]}"
    threads = [threading.Thread(target=s.serve_forever, args=(0.01,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield fake
    for server, thread in zip(servers, threads, strict=True):
        server.shutdown()
        server.server_close()
        thread.join()


__all__ = ["SIGNATURE", "TOKEN", "ActionsGitHub", "actions_github", "zip_of"]
