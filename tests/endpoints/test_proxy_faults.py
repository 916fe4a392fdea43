"""The proxy under the API's faults: each told to the caller it hit, one retry layer,
and no answer kept whole.

A real HTTP server stands in for the API (`test_proxy.Upstream`), injecting each
fault; callers are told apart by the token their `new_caller()` gave them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from ci_evals.endpoints.proxy import ForwardingProxy
from tests.endpoints.test_proxy import (
    TEST_PRICES,
    TEST_REQUEST,
    Upstream,
    _UpstreamHandler,
    cut_after,
    error,
    hang_up,
    post,
    proxy_for,
    sse,
    sse_event,
)


def post_as(proxy: ForwardingProxy, env: dict[str, str] | object) -> int:
    assert isinstance(env, dict) or hasattr(env, "get")
    token = env["ANTHROPIC_API_KEY"]  # type: ignore[index]
    with contextlib.suppress(http.client.HTTPException, OSError):
        return post(proxy, headers={"x-api-key": token}, body=TEST_REQUEST)[0]
    return 0


def wait_for(condition: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_a_cut_stream_is_the_fault_of_the_caller_it_hit_and_worth_a_stage_retry() -> None:
    with Upstream(cut_after(3), sse()) as up, proxy_for(up, prices=TEST_PRICES) as proxy:
        first, second = proxy.new_caller(), proxy.new_caller()
        assert first.env["ANTHROPIC_API_KEY"] != second.env["ANTHROPIC_API_KEY"]
        # The CLI is told not to retry: the proxy owns the policy.
        assert first.env["CLAUDE_CODE_MAX_RETRIES"] == "0"
        began = time.monotonic()
        post_as(proxy, first.env)
        wait_for(lambda: first.fault(began) is not None)
        fault = first.fault(began)
        assert fault is not None and fault.retry_stage
        assert "stream was cut before message_stop" in fault.text
        assert second.fault(0.0) is None  # told to the stage it hit, nobody else
        assert first.fault(time.monotonic()) is None  # only faults since a time
        # The caller's next request succeeds: it has no fault any more.
        assert post_as(proxy, first.env) == 200
        wait_for(lambda: first.fault(began) is None)
        assert first.fault(began) is None


def test_a_request_being_retried_is_already_a_fault_and_a_529_is_not_retried_twice() -> None:
    overloaded = error(529, "overloaded_error", {"retry-after": "1"})
    with Upstream(overloaded) as up, proxy_for(up, max_retries=2) as proxy:
        caller = proxy.new_caller()
        began = time.monotonic()
        answered: list[int] = []
        thread = threading.Thread(target=lambda: answered.append(post_as(proxy, caller.env)))
        thread.start()
        # While the proxy waits out retry-after, the stage's time may run out: it
        # must already see the endpoint failing it (not read as slowness).
        wait_for(lambda: len(up.received) == 1)
        wait_for(lambda: caller.fault(began) is not None, 0.9)
        fault = caller.fault(began)
        assert fault is not None and "HTTP 529 overloaded_error: up 529" in fault.text
        thread.join()
        assert answered == [529] and len(up.received) == 3
        fault = caller.fault(began)
        assert fault is not None and "(3 tries)" in fault.text
        assert not fault.retry_stage  # retried here as far as the policy goes


def test_an_error_event_mid_stream_is_a_fault() -> None:
    def overloaded_mid_stream(handler: _UpstreamHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        handler.chunk(sse_event("error", payload))
        handler.chunk(b"")

    with Upstream(overloaded_mid_stream) as up, proxy_for(up) as proxy:
        caller = proxy.new_caller()
        post_as(proxy, caller.env)
        wait_for(lambda: caller.fault(0.0) is not None)
        fault = caller.fault(0.0)
        assert fault is not None and "overloaded_error: Overloaded" in fault.text


def huge(kind: str, size: int) -> object:
    """A 200 of `size` bytes: a stream of text deltas, or one JSON message."""

    def respond(handler: _UpstreamHandler) -> None:
        handler.send_response(200)
        if kind == "stream":
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            delta = {"type": "content_block_delta", "index": 0}
            piece = sse_event(
                "content_block_delta",
                {**delta, "delta": {"type": "text_delta", "text": "x" * 65000}},
            )
            for _ in range(size // len(piece)):
                handler.chunk(piece)
            handler.chunk(sse_event("message_stop", {"type": "message_stop"}))
            handler.chunk(b"")
        else:  # written in pieces: the stand-in holds none of it whole either
            head = b'{"type": "message", "content": [{"type": "text", "text": "'
            tail = b'"}]}'
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(head) + size + len(tail)))
            handler.end_headers()
            handler.wfile.write(head)
            piece = b"x" * (1 << 20)
            for _ in range(size // len(piece)):
                handler.wfile.write(piece)
            handler.wfile.write(tail)

    return respond


@pytest.mark.parametrize("kind", ["stream", "json"])
def test_a_huge_answer_is_relayed_whole_and_never_held_whole(kind: str) -> None:
    size = 96 << 20
    with Upstream(huge(kind, size)) as up, proxy_for(up) as proxy:  # type: ignore[arg-type]
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=60)
        tracemalloc.start()
        try:
            headers = {"x-api-key": proxy.token, "content-type": "application/json"}
            conn.request("POST", "/v1/messages", body=json.dumps(TEST_REQUEST), headers=headers)
            response = conn.getresponse()
            got = 0
            while data := response.read(1 << 20):
                got += len(data)
            wait_for(lambda: proxy.metered().cost_usd > 0 or proxy.metered().usage.output_tokens)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            conn.close()
        assert got >= size * 0.95
        # What the proxy kept of it: the JSON cap (8 MiB) at most, and far less
        # for a stream (it is parsed as it passes); before, all 96 MiB and more.
        assert peak < (16 << 20 if kind == "json" else 8 << 20), peak


def test_the_recording_says_how_each_exchange_was_charged(tmp_path: Path) -> None:
    record = tmp_path / "exchanges.jsonl"
    responses = (cut_after(3), cut_after(0), hang_up, hang_up, sse())
    streams = (True, True, True, False, True)
    settings = {"record_path": record, "prices": TEST_PRICES, "budget_usd": 1.0}
    with Upstream(*responses) as up, proxy_for(up, **settings) as proxy:
        for n, stream in enumerate(streams, 1):
            with contextlib.suppress(http.client.HTTPException, OSError):
                post(proxy, body={**TEST_REQUEST, "stream": stream})
            wait_for(lambda n=n: len(record.read_text().splitlines()) == n)  # type: ignore[misc]
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["charged"] for line in lines] == [
        "received",  # cut after message_start: its input and the output that came
        "input",  # cut before message_start: no output came, its input's bound
        "input",  # a stream whose connection was lost after the request left
        "reservation",  # a whole message lost: nothing known
        "usage",
    ]


def test_a_connection_lost_after_the_request_left_is_named_and_worth_a_stage_retry() -> None:
    # Before: "upstream unreachable", as if the request had never left.
    with Upstream(hang_up) as up, proxy_for(up, prices=TEST_PRICES) as proxy:
        caller = proxy.new_caller()
        assert post_as(proxy, caller.env) == 502
        wait_for(lambda: caller.fault(0.0) is not None)
        fault = caller.fault(0.0)
        assert fault is not None and fault.retry_stage  # the proxy cannot retry it: billed?
        assert "the model API gave no answer: the connection was lost after the request left" in (
            fault.text
        )
        assert "unreachable" not in fault.text
