"""A recording made fit to commit (`ci-evals record promote RUN_DIR NAME`).

A run folder is not committed; a recording promoted into the repository
(`recordings/NAME/`) is, and may be public. So the copy keeps only what replay
reads — an allow-list, so a field a later version records is left out until
someone decides it belongs — and nothing that identifies the machine, the
account or the session: of each exchange its path, outcome, status, response
`content-type`, request body less `metadata.user_id`, and response body; of the
run's `results.json` the model, the kind of endpoint and the day it started.

The recording is read as replay reads it first (a bad line is one error naming
`file:line`, and nothing is written), the copy is read back the same way and
must replay the same exchanges, and a folder that already holds a recording is
never overwritten. What is kept and dropped, field by field: docs/replay.md
(*Promoting a recording*).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci_evals.endpoints.exchange_log import TRUNCATED
from ci_evals.endpoints.replay.recording import (
    MAX_FILE_BYTES,
    RECORD_FILE,
    load_recording,
    recorded_run,
    recording_file,
)
from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.atomic import write_atomic
from ci_evals.results import RESULTS_FILE
from ci_evals.results.top_fields import write_top_fields

# What is kept of every exchange, of its response headers and of its request's metadata.
KEPT = ("path", "outcome", "status", "response_headers", "request_body", "response_body")
KEPT_RESPONSE_HEADERS = ("content-type",)
DROPPED_METADATA = ("user_id",)


@dataclass(frozen=True)
class Promoted:
    folder: Path
    exchanges: int  # the exchanges replay serves from it
    with_results: bool


def promote(run_dir: Path, target: Path) -> Promoted:
    """Copy the recording of `run_dir` (a run folder or its model-exchanges.jsonl)
    into the new folder `target`, stripped as the module says."""
    recording = load_recording(run_dir)  # refuses a bad line before anything is written
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UserError(
            f"{target} already exists and is not an empty folder",
            field="NAME",
            hint="choose another name, or remove the old recording first",
        )
    source = recording_file(run_dir)
    lines = [
        json.dumps(_stripped(json.loads(line)), ensure_ascii=False)
        for line in json_input.read_file(source, MAX_FILE_BYTES, what="recording")
        .decode("utf-8")
        .split("\n")  # as replay splits it: a U+2028 inside a string is no line end
        if line.strip()
    ]
    recorded = recorded_run(source.parent)  # the run's, beside its recording; checked first
    with_results = (source.parent / RESULTS_FILE).is_file()
    target.mkdir(parents=True, exist_ok=True)
    write_atomic(target / RECORD_FILE, "".join(line + "\n" for line in lines).encode())
    if with_results:
        kept = {
            "model": recorded.model,
            "model_endpoint": recorded.origin,
            # The day only, which the replay's reports name: not when someone worked.
            "started_at": recorded.recorded_on and recorded.recorded_on.isoformat(),
        }
        write_top_fields(target / RESULTS_FILE, kept)
    copy = load_recording(target)
    if [e.digest for e in copy.exchanges] != [e.digest for e in recording.exchanges]:
        shutil.rmtree(target, ignore_errors=True)  # a bug of ours: leave nothing half-made
        raise UserError(f"the copy of {source} would not replay as the original does")
    return Promoted(target, len(copy.exchanges), with_results)


def _stripped(exchange: Any) -> Any:
    if not isinstance(exchange, dict):
        return exchange  # load_recording refused what it cannot serve; keep the rest as is
    if exchange.get(TRUNCATED) is not None:
        return {k: exchange.get(k) for k in ("path", "outcome", "status", TRUNCATED, "limit")
                if k in exchange}  # fmt: skip
    kept = {k: exchange[k] for k in KEPT if k in exchange}
    headers = kept.get("response_headers")
    if isinstance(headers, dict):
        kept["response_headers"] = {
            k.lower(): v for k, v in headers.items() if k.lower() in KEPT_RESPONSE_HEADERS
        }
    body = kept.get("request_body")
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        metadata = {k: v for k, v in body["metadata"].items() if k not in DROPPED_METADATA}
        body = {k: v for k, v in body.items() if k != "metadata"}
        if metadata:  # as the key does: an emptied metadata is no metadata
            body["metadata"] = metadata
        kept["request_body"] = body
    return kept
