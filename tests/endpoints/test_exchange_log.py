"""What `run --record` keeps is capped (`exchange_log`), and a cut never replays as a match."""

from __future__ import annotations

import json
from pathlib import Path

from ci_evals.endpoints.exchange_log import MAX_EXCHANGE_BYTES, TRUNCATED, ExchangeLog
from ci_evals.endpoints.replay.recording import load_recording
from ci_evals.endpoints.replay.server import Divergence, ReplayServer
from tests.endpoints.test_proxy import Upstream, post_raw, proxy_for, sse


def exchange(prompt: str, answer: str = "{}") -> dict:
    return {
        "time": "t", "method": "POST", "path": "/v1/messages", "outcome": "forwarded",
        "request_body": {"model": "m", "messages": [{"role": "user", "content": prompt}]},
        "status": 200, "response_headers": {"content-type": "application/json"},
        "response_body": answer,
    }  # fmt: skip


def test_junk_the_proxy_refused_is_kept_as_a_mark_not_in_full(tmp_path: Path) -> None:
    """A sandboxed program sent the proxy requests of junk: each was written whole
    (480 MiB from a stage limited to 1 MiB of output)."""
    record = tmp_path / "model-exchanges.jsonl"
    with Upstream(sse()) as up, proxy_for(up, record_path=record) as proxy:
        for _ in range(2):
            status, _ = post_raw(proxy, "/v1/messages", b"x" * (MAX_EXCHANGE_BYTES + 1))
            assert status == 400
    assert record.stat().st_size < 2048
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["outcome"] for line in lines] == ["bad_request", "bad_request"]
    assert all(line[TRUNCATED]["limit"] == MAX_EXCHANGE_BYTES for line in lines)
    assert all("request_body" not in line for line in lines)


def test_a_cut_exchange_is_never_served_and_the_divergence_says_so(tmp_path: Path) -> None:
    path = tmp_path / "model-exchanges.jsonl"
    log = ExchangeLog(path, exchange_limit=1024, limit=4096)
    log.open()
    log.write(exchange("short"))
    log.write(exchange("long " * 400))  # over its limit: a mark
    for n in range(10):  # past the file's limit: the last line says so, then nothing
        log.write(exchange(f"more {n} " + "." * 500))
    log.close()
    assert path.stat().st_size < 4096 + 200
    recording = load_recording(tmp_path)
    assert recording.cut == (2,) and recording.ends_cut
    assert len(recording.exchanges) < 10
    with ReplayServer(recording) as server:
        served = server.answer("/v1/messages", exchange("short")["request_body"], "c1")
        assert not isinstance(served, Divergence)
        missed = server.answer("/v1/messages", exchange("long " * 400)["request_body"], "c1")
        assert isinstance(missed, Divergence)
        assert "1 exchange(s) cut at record time (line 2)" in missed.text
        assert "the recording was cut at its size limit" in missed.text
