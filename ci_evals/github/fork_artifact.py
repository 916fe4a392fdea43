"""The fork pull request's artifact, read as untrusted data.

A pull request from a fork runs with a read-only token and no secrets, so it
cannot comment. It uploads an artifact instead — its `results.json` and a
`pr.json` naming the pull request — and a separate workflow (`workflow_run`,
the base repository's code and token) posts the comment. Everything in that
artifact was written by code from the pull request, so it is data to check,
never to trust: only those two files are read, each under a size limit before
any parsing (`RESULTS_LIMIT`, `PR_FILE_LIMIT`; from a zip, nothing unpacked to
disk, at most `ZIP_ENTRIES` entries, `safe_zip.check_entry`: `ArtifactReader`);
`pr.json` has an exact schema; and the pull request it names must be the one the
`workflow_run` payload is about (its `head_sha`, which GitHub wrote; the caller
also asks the REST API, `github.pulls`, which covers forks).

Anything wrong: one `UserError` saying what, and the caller posts nothing. Each
check and why: docs/github.md (*Pull requests from forks*).
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.github.safe_zip import READ_ERRORS, check_entry
from ci_evals.results import RESULTS_FILE as _RESULTS_FILE

RESULTS_FILE = _RESULTS_FILE  # the run's record, as `comment` names it from here
PR_FILE = "pr.json"
# Optional: check-fixtures' verdicts on the fixtures the change touched
# (`comment --pack --fixtures`), shown as *Changed fixtures*.
FIXTURES_FILE = "fixtures.json"
FIXTURES_LIMIT = 256 * 1024
PR_FILE_VERSION = 1
RESULTS_LIMIT = 16 * 1024 * 1024  # a real run's results are well under 1 MiB
PR_FILE_LIMIT = 4 * 1024
ZIP_LIMIT = 64 * 1024 * 1024  # the zip file itself
ZIP_ENTRIES = 64  # a results folder packs two files; anything near this is not ours
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_PR_KEYS = {"version", "pr_number", "head_sha"}


@dataclass(frozen=True)
class PullRequestRef:
    """What `pr.json` claims: the pull request and the commit the run evaluated."""

    number: int
    head_sha: str

    def as_json(self) -> str:
        data = {"version": PR_FILE_VERSION, "pr_number": self.number, "head_sha": self.head_sha}
        return json.dumps(data) + "\n"


@dataclass(frozen=True)
class WorkflowRun:
    """The facts of a `workflow_run` payload that GitHub, not the fork, wrote."""

    run_id: int
    event: str
    head_sha: str
    head_repository: str | None
    pull_requests: tuple[int, ...]


def read_untrusted(path: Path, limit: int) -> bytes:
    """A regular file's bytes, never through a link, refused when over `limit` bytes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UserError("missing from the artifact", file=path) from None
    except OSError as exc:
        # ELOOP: the name is a link (O_NOFOLLOW).
        raise UserError(
            f"cannot open: {exc.strerror or exc} (not a plain file?)", file=path
        ) from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UserError("not a regular file", file=path)
        if info.st_size > limit:
            raise UserError(f"{info.st_size} bytes, over the limit of {limit}", file=path)
        data = fh.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise UserError(f"over the limit of {limit} bytes", file=path)
    return data


@dataclass(frozen=True)
class ArtifactReader:
    """The two files of a downloaded artifact: a folder holding them, or a folder
    holding only the artifact's zip (`skip-decompress`), read without unpacking."""

    folder: Path

    def read(self, name: str, limit: int) -> bytes:
        archive = self._zip()
        if archive is None:
            return read_untrusted(self.folder / name, limit)
        found = _zip_member(archive, name, limit)
        if found is None:
            raise UserError("missing from the artifact", file=self.where(name))
        return found

    def read_optional(self, name: str, limit: int) -> bytes | None:
        """`read`, or None when the artifact has no entry of that name at all."""
        archive = self._zip()
        if archive is None:
            return (
                read_untrusted(self.folder / name, limit) if _lexists(self.folder / name) else None
            )
        return _zip_member(archive, name, limit)

    def where(self, name: str) -> Path:
        archive = self._zip()
        return self.folder / name if archive is None else Path(f"{archive}:{name}")

    def _zip(self) -> Path | None:
        """The folder's one entry when it is a zip and no results file is beside it."""
        try:
            entries = sorted(self.folder.iterdir())
        except OSError as exc:
            raise UserError(f"cannot list: {exc.strerror or exc}", file=self.folder) from None
        if len(entries) != 1 or entries[0].name in (RESULTS_FILE, PR_FILE):
            return None
        # lstat first: is_zipfile would follow a link, or block on a FIFO.
        if not stat.S_ISREG(entries[0].lstat().st_mode):
            return None
        return entries[0] if zipfile.is_zipfile(entries[0]) else None


def _lexists(path: Path) -> bool:
    return os.path.lexists(path)


def _zip_member(archive: Path, name: str, limit: int) -> bytes | None:
    """The member's bytes (None: no member of that name), every limit checked."""
    where = f"{archive}:{name}"
    data = read_untrusted(archive, ZIP_LIMIT)
    import io  # noqa: PLC0415 - only the zip form needs it

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > ZIP_ENTRIES:
                raise UserError(
                    f"{len(infos)} entries, over the limit of {ZIP_ENTRIES}", file=archive
                )
            found = [info for info in infos if info.filename == name]
            if not found:
                return None
            if len(found) > 1:
                raise UserError("more than one entry of this name", file=where)
            (info,) = found
            # Encrypted, LZMA or bzip2: refused by the header, before zipfile would
            # ask for a password or decompress with a library of its own.
            check_entry(archive, info)
            if info.file_size > limit:
                raise UserError(f"{info.file_size} bytes, over the limit of {limit}", file=where)
            with zf.open(info) as member:
                content = member.read(limit + 1)  # whatever it declared
    except READ_ERRORS as exc:  # zlib.error and the rest zipfile does not wrap
        raise UserError(f"not a readable zip: {exc}", file=archive) from None
    if len(content) > limit:
        raise UserError(f"over the limit of {limit} bytes", file=where)
    return content


def parse_pr_file(data: bytes, *, file: Path) -> PullRequestRef:
    """`pr.json`'s claim, schema-checked: exactly the three keys, each of its type."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not valid JSON: {exc}", file=file) from None
    value = json_input.parse(text, file=file)
    if not isinstance(value, dict):
        raise UserError("not a JSON object", file=file)
    if set(value) != _PR_KEYS:
        extra, missing = sorted(set(value) - _PR_KEYS), sorted(_PR_KEYS - set(value))
        wrong = f"unexpected {extra}" if extra else f"missing {missing}"
        raise UserError(f"expected exactly the keys {sorted(_PR_KEYS)}: {wrong}", file=file)
    if value["version"] != PR_FILE_VERSION:
        raise UserError(f"unsupported version {value['version']!r}", file=file, field="version")
    number = value["pr_number"]
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 2**31:
        raise UserError("not a positive integer", file=file, field="pr_number")
    sha = value["head_sha"]
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise UserError("not a commit SHA (40 or 64 lowercase hex)", file=file, field="head_sha")
    return PullRequestRef(number, sha)


def workflow_run_from_event(event_name: str | None, payload: Mapping[str, object]) -> WorkflowRun:
    """The `workflow_run` facts, or a `UserError` when this is not such an event."""
    if event_name != "workflow_run":
        raise UserError(
            f"--from-artifact runs on a workflow_run event, not {event_name or 'none'!r}",
            hint="use it in the workflow triggered by `on: workflow_run` (docs/github.md)",
        )
    run = payload.get("workflow_run")
    if not isinstance(run, Mapping):
        raise UserError("the workflow_run payload has no `workflow_run` object")
    run_id, event, head_sha = run.get("id"), run.get("event"), run.get("head_sha")
    if isinstance(run_id, bool) or not isinstance(run_id, int):
        raise UserError("the workflow_run payload has no run id")
    if not isinstance(head_sha, str) or not _SHA.fullmatch(head_sha):
        raise UserError("the workflow_run payload has no head_sha")
    repo = run.get("head_repository")
    full_name = repo.get("full_name") if isinstance(repo, Mapping) else None
    numbers: list[int] = []
    listed = run.get("pull_requests")
    for item in listed if isinstance(listed, list) else []:
        number = item.get("number") if isinstance(item, Mapping) else None
        if isinstance(number, int) and not isinstance(number, bool):
            numbers.append(number)
    return WorkflowRun(
        run_id=run_id,
        event=event if isinstance(event, str) else "",
        head_sha=head_sha,
        head_repository=full_name if isinstance(full_name, str) else None,
        pull_requests=tuple(numbers),
    )


def check_claim(claim: PullRequestRef, run: WorkflowRun) -> None:
    """The artifact's claim against what GitHub says the triggering run was about."""
    if run.event != "pull_request":
        raise UserError(
            f"the triggering run was a {run.event or 'unknown'!r} event, not a pull_request: "
            "there is no pull request to comment on"
        )
    if claim.head_sha != run.head_sha:
        raise UserError(
            f"{PR_FILE} names commit {claim.head_sha[:12]}, but the run that uploaded it "
            f"evaluated {run.head_sha[:12]} (workflow_run.head_sha): tampered or mixed up",
            field="head_sha",
        )
    if run.pull_requests and claim.number not in run.pull_requests:
        listed = ", ".join(f"#{n}" for n in run.pull_requests)
        raise UserError(
            f"{PR_FILE} names #{claim.number}, but the run belongs to {listed} "
            "(workflow_run.pull_requests): tampered",
            field="pr_number",
        )
