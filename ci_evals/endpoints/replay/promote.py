"""A recording made fit to commit (`ci-evals record promote RUN_DIR NAME`).

A run folder is not committed; a recording promoted into the repository
(`recordings/NAME/`) is, and may be public. So the copy keeps what replay
reads and what a reader of the recording needs, and drops what identifies the
machine, the account or the session and never changes a replayed answer:
each exchange's request headers (the CLI's session id, user agent, beta
flags: the key ignores every header) and the request body's
`metadata.user_id` (on the real API an account and session identifier; the
key ignores it too). The recording is read as replay reads it first (a bad
line is one error naming `file:line`, and nothing is written), the copy is
read back the same way and must replay the same exchanges, and a folder that
already holds a recording is never overwritten. `results.json` comes along
when the run has one: replay takes the recorded model from it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci_evals.endpoints.replay.recording import RECORD_FILE, load_recording, recording_file
from ci_evals.errors import UserError
from ci_evals.fs.atomic import write_atomic

RESULTS_FILE = "results.json"
# What is removed from every exchange, and from its request body's metadata.
DROPPED = ("request_headers",)
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
        for line in source.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    target.mkdir(parents=True, exist_ok=True)
    write_atomic(target / RECORD_FILE, "".join(line + "\n" for line in lines).encode())
    results = source.parent / RESULTS_FILE  # the run's, beside its recording
    if results.is_file():
        shutil.copyfile(results, target / RESULTS_FILE)
    copy = load_recording(target)
    if [e.digest for e in copy.exchanges] != [e.digest for e in recording.exchanges]:
        shutil.rmtree(target, ignore_errors=True)  # a bug of ours: leave nothing half-made
        raise UserError(f"the copy of {source} would not replay as the original does")
    return Promoted(target, len(copy.exchanges), results.is_file())


def _stripped(exchange: Any) -> Any:
    if not isinstance(exchange, dict):
        return exchange  # load_recording refused what it cannot serve; keep the rest as is
    exchange = {k: v for k, v in exchange.items() if k not in DROPPED}
    body = exchange.get("request_body")
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        metadata = {k: v for k, v in body["metadata"].items() if k not in DROPPED_METADATA}
        body = {k: v for k, v in body.items() if k != "metadata"}
        if metadata:  # as the key does: an emptied metadata is no metadata
            body["metadata"] = metadata
        exchange["request_body"] = body
    return exchange
