"""Reading a recording (`model-exchanges.jsonl`, what `run --record` writes).

`replay:PATH` names a run folder (or a promoted one, `recordings/NAME/`)
holding `model-exchanges.jsonl`, or the file itself. Each line is one
exchange as the forwarding proxy or the stub model wrote it; replay reads its
`path`, `request_body`, `status`, `response_headers` and `response_body`.
Exchanges that never reached a model (refused: no token, no route, a bad
body) are skipped. A line that is not such an exchange is one error naming
`file:line`.

A recording is committed by a pull request, so it is read as hostile: a
regular file only, not through a link, at most `MAX_FILE_BYTES` (a FIFO,
`/dev/zero` or a link to either is refused before a byte is read), each line
at most `MAX_LINE_BYTES`, parsed by `fs.json_input` (no number, nesting or
lone surrogate that crashes a later step). An exchange `run --record` cut
(`exchange_log`: over its size) is never served: the request it was for
diverges, and the divergence names the cut.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from ci_evals.endpoints.exchange_log import (
    MAX_EXCHANGE_BYTES,
    MAX_RECORDING_BYTES,
    TRUNCATED,
    WHOLE,
)
from ci_evals.endpoints.ledger import MAX_DEPTH as REQUEST_DEPTH
from ci_evals.endpoints.local_http import MAX_JSON_VALUES, json_values
from ci_evals.endpoints.replay.key import key_text, request_key, run_tmp_folders
from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.results import RESULTS_FILE, model_id_problem
from ci_evals.results.top_fields import read_top_fields

RECORD_FILE = "model-exchanges.jsonl"  # as `run --record` names it (run.run_command)
# The proxy's outcomes for requests it answered itself, before any model saw them.
_NEVER_SENT = frozenset({"refused_auth", "not_found", "bad_request"})
_ROUTES = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
# What `run --record` writes at most (`exchange_log`), and a little room: a marker line.
MAX_FILE_BYTES = MAX_RECORDING_BYTES + 64 * 1024
MAX_LINE_BYTES = MAX_EXCHANGE_BYTES
# A line nests its request body one level down; the proxy forwards none deeper.
MAX_DEPTH = REQUEST_DEPTH + 2
_HINT = "a line as `run --record` writes it"


@dataclass(frozen=True)
class Exchange:
    """One recorded exchange, ready to be served again."""

    line: int  # its line in the recording (1-based): the position a report names
    # Its normalised key as compact JSON (what `digest` hashes): bytes, about the size
    # of the request, where the key's objects would be several times that; read back
    # only to describe a divergence.
    key_json: bytes = field(repr=False)
    digest: str
    status: int  # 0: the connection ended with no response
    content_type: str
    body: bytes = field(repr=False)
    folders: frozenset[str] = frozenset()  # the recorded run's temp folders it names

    @property
    def key(self) -> dict[str, Any]:
        key: dict[str, Any] = json.loads(self.key_json)
        return key

    @property
    def streamed(self) -> bool:
        return self.content_type.startswith("text/event-stream")


@dataclass(frozen=True)
class Recording:
    path: Path
    exchanges: tuple[Exchange, ...]
    cut: tuple[int, ...] = ()  # lines of exchanges `run --record` cut (never served)
    ends_cut: bool = False  # the recording itself was cut: later exchanges are missing

    def cut_note(self) -> str:
        """What a divergence adds when the recording lacks what it cut; '' if nothing."""
        notes = []
        if self.cut:
            lines = ", ".join(str(n) for n in self.cut[:5]) + (", ..." if len(self.cut) > 5 else "")
            notes.append(f"{len(self.cut)} exchange(s) cut at record time (line {lines})")
        if self.ends_cut:
            notes.append("the recording was cut at its size limit")
        return f" ({'; '.join(notes)}: they are never served)" if notes else ""


@dataclass(frozen=True)
class RecordedRun:
    """What replay takes from the recorded run's `results.json`."""

    model: str | None = None  # the model it asked for (`--model NAME`); None: the suite's
    # What answered it: its endpoint's kind, `stub` or `anthropic`; None: unknown (no
    # results.json, or one naming no endpoint or another kind), which every report of
    # the replay says: never a model's verdict.
    origin: Literal["stub", "anthropic"] | None = None
    recorded_on: date | None = None  # the day the recorded run started; None: not said


def recorded_run(folder: Path) -> RecordedRun:
    """The `results.json` beside a recording, read as the recording is (hostile:
    regular, capped, no link); none there, or no known endpoint in it: origin
    unknown. A model or date that is there must be one: else one error naming
    the field (the model is asked for again and shown in every report)."""
    path = folder / RESULTS_FILE
    fields = read_top_fields(path, what="recorded run's results")
    if fields is None:
        return RecordedRun()
    endpoint = fields.get("model_endpoint")
    kind = endpoint.split(":", 1)[0] if isinstance(endpoint, str) else None
    return RecordedRun(
        _model(path, fields.get("model")),
        "stub" if kind == "stub" else "anthropic" if kind == "anthropic" else None,
        _day(path, fields.get("started_at")),
    )


def _model(path: Path, value: object) -> str | None:
    if value is None:
        return None
    problem = model_id_problem(value) if isinstance(value, str) else "not text"
    if problem:
        raise UserError(
            f"the recorded model is {problem}",
            file=path,
            field="model",
            hint="a model id as --model takes it, or null; record the run again",
        )
    assert isinstance(value, str)
    return value


def _day(path: Path, value: object) -> date | None:
    """The day of `started_at`: an ISO 8601 date or time (`record promote` keeps the date)."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) <= 64:
        for parse in (date.fromisoformat, datetime.fromisoformat):
            try:
                parsed = parse(value)
            except ValueError:
                continue
            return parsed.date() if isinstance(parsed, datetime) else parsed
    raise UserError(
        "the recorded run's start is not an ISO 8601 date or time",
        file=path,
        field="started_at",
        hint="YYYY-MM-DD, or null; record the run again",
    )


def recording_file(value: Path) -> Path:
    """The recording `replay:VALUE` names: VALUE/model-exchanges.jsonl, or VALUE."""
    return value / RECORD_FILE if value.is_dir() else value


def load_recording(value: Path) -> Recording:
    path = recording_file(value)
    hint = "replay:RUN_DIR names a run made with --record, or its model-exchanges.jsonl"
    try:
        data = json_input.read_file(path, MAX_FILE_BYTES, what="recording")
    except UserError as exc:
        raise UserError(exc.message, file=path, field="--model", hint=hint) from None
    exchanges: list[Exchange] = []
    cut: list[int] = []
    ends_cut = False
    for number, raw in enumerate(_lines(data), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError("cannot read the recording: not UTF-8 text", file=path) from None
        if not line.strip():
            continue
        if ends_cut:
            raise _bad(path, number, "a line after the mark that the recording was cut")
        exchange = _exchange(path, number, line)
        if exchange == WHOLE:
            ends_cut = True
        elif exchange == TRUNCATED:
            cut.append(number)
        elif isinstance(exchange, Exchange):
            exchanges.append(exchange)
    if not exchanges:
        raise UserError(
            "the recording holds no model exchange", file=path, hint="record a run with --record"
        )
    return Recording(path, tuple(exchanges), tuple(cut), ends_cut)


def _lines(data: bytes) -> Iterator[bytes]:
    """Each line of `data`, one at a time: a copy of one line, never of them all."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        yield data[start:end].removesuffix(b"\r")
        start = end + 1


def _bad(path: Path, number: int, what: str) -> UserError:
    return UserError(f"not a recorded exchange: {what}", file=path, line=number, hint=_HINT)


def _exchange(path: Path, number: int, line: str) -> Exchange | str | None:
    """The exchange on this line; `TRUNCATED` or `WHOLE` for a cut's mark; None: skipped."""

    def bad(what: str) -> UserError:
        return _bad(path, number, what)

    if len(line) > MAX_LINE_BYTES:
        raise bad(f"longer than {MAX_LINE_BYTES} bytes, which `run --record` never writes")
    if json_values(line.encode("utf-8")) > MAX_JSON_VALUES:  # before the parse builds them
        raise bad(f"more than {MAX_JSON_VALUES} JSON values, which no request holds")
    try:
        record = json_input.parse(line, file=path, max_depth=MAX_DEPTH, text_only=True)
    except UserError as exc:
        raise bad(f"invalid JSON ({exc.message})") from None
    if not isinstance(record, dict):
        raise bad("not a JSON object")
    mark = record.get(TRUNCATED)
    if mark == WHOLE:
        return WHOLE
    if mark is not None:
        return TRUNCATED  # what it was for never matches: fail closed
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
    if not isinstance(status, int) or isinstance(status, bool) or not _status_ok(status):
        raise bad("`status` is not an HTTP status (100-599, or 0 for no response)")
    if not isinstance(headers, dict) or not isinstance(response, str):
        raise bad("no `response_headers` object or `response_body` text")
    content_type = {str(k).lower(): v for k, v in headers.items()}.get("content-type")
    if isinstance(content_type, str) and not content_type.isprintable():
        raise bad("`content-type` is not one printable line")  # it is sent as a header
    key = key_text(request_key(route, body))
    return Exchange(
        line=number,
        key_json=key,
        digest=hashlib.sha256(key).hexdigest(),
        status=status,
        content_type=content_type if isinstance(content_type, str) else "application/json",
        body=response.encode("utf-8"),
        folders=frozenset(run_tmp_folders(body)),
    )


def _status_ok(status: int) -> bool:
    return status == 0 or 100 <= status <= 599
