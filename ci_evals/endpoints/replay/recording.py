"""Reading a recording (`model-exchanges.jsonl`, what `run --record` writes).

`replay:PATH` names a run folder (or a promoted one, `recordings/NAME/`)
holding `model-exchanges.jsonl`, or the file itself. Each line is one
exchange as the forwarding proxy or the stub model wrote it; replay reads its
`path`, `request_body`, `status`, `response_headers` and `response_body`.
Exchanges that never reached a model (refused: no token, no route, a bad
body) are skipped. A line that is not such an exchange is one error naming
`file:line`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_evals.endpoints.replay.key import digest, request_key, run_tmp_folders
from ci_evals.errors import UserError

RECORD_FILE = "model-exchanges.jsonl"  # as `run --record` names it (run.plan)
# The proxy's outcomes for requests it answered itself, before any model saw them.
_NEVER_SENT = frozenset({"refused_auth", "not_found", "bad_request"})
_ROUTES = frozenset({"/v1/messages", "/v1/messages/count_tokens"})


@dataclass(frozen=True)
class Exchange:
    """One recorded exchange, ready to be served again."""

    line: int  # its line in the recording (1-based): the position a report names
    key: dict[str, Any] = field(repr=False)
    digest: str
    status: int  # 0: the connection ended with no response
    content_type: str
    body: bytes = field(repr=False)
    folders: frozenset[str] = frozenset()  # the recorded run's temp folders it names

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith("text/event-stream")


@dataclass(frozen=True)
class Recording:
    path: Path
    exchanges: tuple[Exchange, ...]


def recording_file(value: Path) -> Path:
    """The recording `replay:VALUE` names: VALUE/model-exchanges.jsonl, or VALUE."""
    return value / RECORD_FILE if value.is_dir() else value


def load_recording(value: Path) -> Recording:
    path = recording_file(value)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UserError(
            f"cannot read the recording: {reason}",
            file=path,
            field="--model",
            hint="replay:RUN_DIR names a run made with --record, or its model-exchanges.jsonl",
        ) from None
    exchanges = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        exchange = _exchange(path, number, line)
        if exchange is not None:
            exchanges.append(exchange)
    if not exchanges:
        raise UserError(
            "the recording holds no model exchange", file=path, hint="record a run with --record"
        )
    return Recording(path, tuple(exchanges))


def _exchange(path: Path, number: int, line: str) -> Exchange | None:
    def bad(what: str) -> UserError:
        return UserError(
            f"not a recorded exchange: {what}",
            file=path,
            line=number,
            hint="a line as `run --record` writes it",
        )

    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise bad(f"invalid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise bad("not a JSON object")
    route = record.get("path")
    if not isinstance(route, str):
        raise bad("no `path`")
    if record.get("outcome") in _NEVER_SENT or route.split("?", 1)[0] not in _ROUTES:
        return None
    body, status, headers, response = (
        record.get(name) for name in ("request_body", "status", "response_headers", "response_body")
    )
    if not isinstance(body, dict):
        raise bad("`request_body` is not a JSON object")
    if not isinstance(status, int) or isinstance(status, bool):
        raise bad("`status` is not a number")
    if not isinstance(headers, dict) or not isinstance(response, str):
        raise bad("no `response_headers` object or `response_body` text")
    content_type = {str(k).lower(): v for k, v in headers.items()}.get("content-type")
    key = request_key(route, body)
    return Exchange(
        line=number,
        key=key,
        digest=digest(key),
        status=status,
        content_type=content_type if isinstance(content_type, str) else "application/json",
        body=response.encode("utf-8"),
        folders=frozenset(run_tmp_folders(body)),
    )
