"""The forwarding proxy against real HTTP servers on 127.0.0.1 standing in for the API.

`Upstream` is a small ThreadingHTTPServer serving a scripted list of
responses and recording what it received; the slow test runs the real
Claude Code CLI through the proxy to the project's stub model.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ci_evals.endpoints.ledger import (
    IMAGE_TOKENS,
    MAX_INPUT_TOKENS,
    OVERHEAD_TOKENS,
    Ledger,
    Unpriceable,
    worst_case,
)
from ci_evals.endpoints.pricing import Price, PricedUsage, Pricing, model_key
from ci_evals.endpoints.proxy import ForwardingProxy, ProxySettings, SSEUsage
from ci_evals.endpoints.stub_model import StubServer, loads_script
from tests.stub_helpers import run_query

REAL_KEY = "sk-ant-REAL-key-0123456789"
MODEL = "claude-sonnet-4-5-20250929"
SONNET = Pricing().price("claude-sonnet-4-5")

# -- a stand-in for the API ------------------------------------------------------------


Responder = Callable[["_UpstreamHandler"], None]


class Upstream:
    """Serves `responses` in order (the last one repeats); records every request."""

    def __init__(self, *responses: Responder) -> None:
        self.responses = list(responses)
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd = _UpstreamServer(("127.0.0.1", 0), _UpstreamHandler, self)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Upstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.thread.join()
        self.httpd.server_close()

    def next_response(self) -> Responder:
        with self.lock:
            index = min(len(self.received) - 1, len(self.responses) - 1)
            return self.responses[index]


class _UpstreamServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: Any, handler: Any, upstream: Upstream) -> None:
        self.upstream = upstream
        super().__init__(address, handler)


class _UpstreamHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _UpstreamServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        upstream = self.server.upstream
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with upstream.lock:
            upstream.received.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": json.loads(body) if body else None,
                    "time": time.monotonic(),
                }
            )
            upstream.in_flight += 1
            upstream.max_in_flight = max(upstream.max_in_flight, upstream.in_flight)
        try:
            upstream.next_response()(self)
        finally:
            with upstream.lock:
                upstream.in_flight -= 1

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def sse_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def sse_events(
    usage: dict[str, int], output_tokens: int, text: str = "hello", model: str = MODEL
) -> list[bytes]:
    start_usage = {**usage, "output_tokens": 1}
    return [
        sse_event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "usage": start_usage,
                },
            },
        ),
        sse_event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        ),
        sse_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        sse_event("message_stop", {"type": "message_stop"}),
    ]


def sse(
    usage: dict[str, int] | None = None,
    output_tokens: int = 10,
    *,
    gate: threading.Event | None = None,
    content_length: bool = False,
) -> Responder:
    """A streamed message; with `gate`, everything after message_start waits for it."""
    events = sse_events(usage or {"input_tokens": 100}, output_tokens)

    def respond(handler: _UpstreamHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("request-id", "req_upstream")
        if content_length:
            handler.send_header("Content-Length", str(sum(len(e) for e in events)))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for i, data in enumerate(events):
            if i == 1 and gate is not None:
                assert gate.wait(10), "the client never saw the first event"
            if content_length:
                handler.wfile.write(data)
                handler.wfile.flush()
            else:
                handler.chunk(data)
        if not content_length:
            handler.chunk(b"")

    return respond


def error(status: int, kind: str, headers: dict[str, str] | None = None) -> Responder:
    def respond(handler: _UpstreamHandler) -> None:
        body = json.dumps({"type": "error", "error": {"type": kind, "message": f"up {status}"}})
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body.encode())

    return respond


def json_message(usage: dict[str, int]) -> Responder:
    def respond(handler: _UpstreamHandler) -> None:
        body = json.dumps({"type": "message", "model": MODEL, "content": [], "usage": usage})
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body.encode())

    return respond


def slow(seconds: float, then: Responder) -> Responder:
    def respond(handler: _UpstreamHandler) -> None:
        time.sleep(seconds)
        then(handler)

    return respond


# -- a client like the CLI -----------------------------------------------------------------

REQUEST = {"model": MODEL, "max_tokens": 100, "stream": True, "messages": []}


def post(
    proxy: ForwardingProxy,
    headers: dict[str, str] | None = None,
    path: str = "/v1/messages?beta=true",
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        auth = {"x-api-key": proxy.token} if headers is None else headers
        conn.request(
            "POST",
            path,
            body=json.dumps(body or REQUEST),
            headers={"content-type": "application/json", **auth},
        )
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@contextlib.contextmanager
def proxy_for(upstream: Upstream, **settings: Any) -> Iterator[ForwardingProxy]:
    prices = settings.pop("prices", None)
    options: dict[str, Any] = {"api_key": REAL_KEY, **settings}
    with ForwardingProxy(ProxySettings(upstream=upstream.url, **options), prices=prices) as proxy:
        yield proxy


# -- forwarding ------------------------------------------------------------------------------


def test_forwards_with_the_real_key_and_streams_the_body_unchanged() -> None:
    usage = {"input_tokens": 1000, "cache_read_input_tokens": 2000}
    with Upstream(sse(usage, 50)) as up, proxy_for(up) as proxy:
        status, headers, body = post(proxy, {"x-api-key": proxy.token, "anthropic-beta": "x"})
        assert status == 200
        assert body == b"".join(sse_events({"input_tokens": 1000}, 50)).replace(
            b'"input_tokens": 1000', b'"input_tokens": 1000, "cache_read_input_tokens": 2000'
        )
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["request-id"] == "req_upstream"
        (got,) = up.received
        assert got["path"] == "/v1/messages?beta=true"
        assert got["headers"]["x-api-key"] == REAL_KEY
        assert "authorization" not in got["headers"]
        assert proxy.token not in json.dumps(got["headers"])
        assert got["headers"]["host"] == up.url.removeprefix("http://")
        assert got["headers"]["anthropic-beta"] == "x"
        assert got["headers"]["accept-encoding"] == "identity"
        assert got["body"] == REQUEST
        assert proxy.usage == PricedUsage(
            input_tokens=1000, output_tokens=50, cache_read_input_tokens=2000
        )
        expected = (1000 * SONNET.input + 50 * SONNET.output + 2000 * SONNET.cache_read) / 1e6
        assert proxy.spent_usd == pytest.approx(expected)
        assert proxy.requests == 1
        assert not proxy.budget_exhausted


def test_auth_token_goes_upstream_as_bearer_and_the_cli_may_send_bearer() -> None:
    with Upstream(sse()) as up:
        settings = ProxySettings(upstream=up.url, auth_token="real-oauth-token")
        with ForwardingProxy(settings) as proxy:
            status, _, _ = post(proxy, {"Authorization": f"Bearer {proxy.token}"})
            assert status == 200
            assert up.received[0]["headers"]["authorization"] == "Bearer real-oauth-token"
            assert "x-api-key" not in up.received[0]["headers"]


def test_content_length_upstream_and_json_usage() -> None:
    usage = {"input_tokens": 7, "output_tokens": 3}
    with Upstream(sse(content_length=True), json_message(usage)) as up, proxy_for(up) as proxy:
        status, headers, body = post(proxy)
        assert status == 200
        assert body.endswith(b'{"type": "message_stop"}\n\n')
        assert headers["content-length"] == str(len(body))
        status, _, body = post(proxy, body={**REQUEST, "stream": False})
        assert status == 200
        assert json.loads(body)["usage"] == usage
        assert proxy.usage == PricedUsage(input_tokens=107, output_tokens=13)


def test_the_client_gets_the_first_event_before_upstream_sends_the_rest() -> None:
    gate = threading.Event()
    with Upstream(sse(gate=gate)) as up, proxy_for(up) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.request("POST", "/v1/messages", json.dumps(REQUEST), {"x-api-key": proxy.token})
        response = conn.getresponse()
        first = b""
        while not first.endswith(b"\n\n"):
            first += response.read1(1)  # would time out if the proxy buffered the body
        assert first.startswith(b"event: message_start\n")
        gate.set()
        rest = response.read()
        assert rest.endswith(b"event: message_stop\n" + b'data: {"type": "message_stop"}\n\n')
        conn.close()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-api-key": "wrong"},
        {"Authorization": "Bearer wrong"},
        {"x-api-key": REAL_KEY},  # the real key is not the token either
    ],
)
def test_a_request_without_the_token_is_refused_and_never_forwarded(
    headers: dict[str, str],
) -> None:
    with Upstream(sse()) as up, proxy_for(up) as proxy:
        status, _, body = post(proxy, headers)
        assert status == 401
        assert json.loads(body)["type"] == "error"
        assert json.loads(body)["error"]["type"] == "authentication_error"
        assert up.received == []
        assert proxy.requests == 0


def test_only_the_messages_api_is_forwarded() -> None:
    with Upstream(sse()) as up, proxy_for(up) as proxy:
        status, _, body = post(proxy, path="/v1/complete")
        assert status == 404
        assert json.loads(body)["error"]["type"] == "not_found_error"
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.request("HEAD", "/api/hello")
        assert conn.getresponse().status == 200  # the CLI's probe, answered here
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
        conn.request("GET", "/v1/models", headers={"x-api-key": proxy.token})
        assert conn.getresponse().status == 404
        conn.close()
        assert up.received == []


def test_count_tokens_is_forwarded_and_not_budgeted() -> None:
    with Upstream(json_message({"input_tokens": 0})) as up, proxy_for(up, budget_usd=0) as proxy:
        status, _, _ = post(proxy, path="/v1/messages/count_tokens")
        assert status == 200
        assert up.received[0]["path"] == "/v1/messages/count_tokens"


# -- retries, errors, concurrency -------------------------------------------------------------


def test_429_with_retry_after_is_waited_out_then_retried(tmp_path: Path) -> None:
    responses = (error(429, "rate_limit_error", {"retry-after": "1"}), sse())
    record = tmp_path / "exchanges.jsonl"
    with Upstream(*responses) as up, proxy_for(up, record_path=record) as proxy:
        status, _, _ = post(proxy)
        assert status == 200
        assert len(up.received) == 2
        # The retry left after the server's second (a lower bound: load only adds time)...
        assert up.received[1]["time"] - up.received[0]["time"] >= 1.0
        assert proxy.requests == 1
    # ...and the wait chosen was that second, no backoff on top: the exchange log says.
    [line] = [json.loads(text) for text in record.read_text().splitlines()]
    assert [(a["status"], a.get("wait")) for a in line["attempts"]] == [(429, 1.0), (200, None)]


def test_529_past_max_retries_is_passed_through_unchanged() -> None:
    upstream = Upstream(error(529, "overloaded_error"))
    with upstream as up, proxy_for(up, max_retries=2, retry_base_s=0.01) as proxy:
        status, _, body = post(proxy)
        assert status == 529
        assert json.loads(body) == {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "up 529"},
        }
        assert len(up.received) == 3


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_is_retried_by_the_proxy_like_a_529(status: int) -> None:
    # The proxy is the one layer that retries (`endpoints.faults`): the CLI does not.
    responses = (error(status, "api_error"), sse())
    with Upstream(*responses) as up, proxy_for(up, retry_base_s=0.01) as proxy:
        assert post(proxy)[0] == 200
        assert len(up.received) == 2


def test_an_unreachable_upstream_is_a_502() -> None:
    # Bound, never listening, held for the whole test: a connection is refused, and
    # no other process on a busy machine can take the port meanwhile.
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
        settings = ProxySettings(
            upstream=f"http://127.0.0.1:{port}", api_key=REAL_KEY, max_retries=2, retry_base_s=0.01
        )
        _refused_through(settings)


def _refused_through(settings: ProxySettings) -> None:
    with ForwardingProxy(settings) as proxy:
        status, _, body = post(proxy)
        assert status == 502
        assert json.loads(body)["error"]["type"] == "api_error"
        # Refused: it never left, so it was tried again (3 tries), and never charged.
        # The handler tells the last try's fault after its reply reached us: wait for it
        # (a busy machine read the second try's, "(2 tries)").
        wait_until(lambda: "(3 tries)" in getattr(proxy.faults.last("", 0.0), "text", ""))
        fault = proxy.faults.last("", 0.0)
        assert fault is not None and "not reached" in fault.text
        assert proxy.spent_usd == 0.0


def test_concurrent_upstream_requests_are_limited() -> None:
    with Upstream(slow(0.3, sse())) as up, proxy_for(up, max_concurrency=2) as proxy:
        threads = [threading.Thread(target=post, args=(proxy,)) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(up.received) == 5
        assert up.max_in_flight == 2


# -- budget ------------------------------------------------------------------------------------


TEST_PRICES = Pricing({"claude-test": Price(input=10.0, output=10.0, cache_write=0, cache_read=0)})
TEST_REQUEST = {**REQUEST, "model": "claude-test"}


def reservation(body: dict[str, Any]) -> float:
    """What the proxy reserves for `body` (as `post` sends it)."""
    return worst_case(json.dumps(body).encode(), TEST_PRICES).cost_usd


def test_the_worst_case_bounds_input_by_bytes_and_output_by_max_tokens() -> None:
    body = json.dumps(TEST_REQUEST).encode()
    worst = worst_case(body, TEST_PRICES)
    assert worst.max_tokens == 100
    assert worst.input_tokens == len(body) + OVERHEAD_TOKENS
    # Input at the dearest input rate (a 1-hour cache write: 2 x $10), output at $10.
    assert worst.cost_usd == pytest.approx((worst.input_tokens * 20.0 + 100 * 10.0) / 1e6)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    pdf = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    with_image = {**TEST_REQUEST, "messages": [{"role": "user", "content": [image]}]}
    assert worst_case(json.dumps(with_image).encode(), TEST_PRICES).input_tokens == (
        len(json.dumps(with_image)) + OVERHEAD_TOKENS + IMAGE_TOKENS
    )
    for unbounded in (
        {**TEST_REQUEST, "messages": [{"role": "user", "content": [pdf]}]},
        {**TEST_REQUEST, "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
    ):
        assert worst_case(json.dumps(unbounded).encode(), TEST_PRICES).input_tokens == (
            MAX_INPUT_TOKENS
        )
    for bad in (b"not json", b"[]", json.dumps({**TEST_REQUEST, "max_tokens": None}).encode()):
        with pytest.raises(Unpriceable):
            worst_case(bad, TEST_PRICES)


def test_the_budget_refuses_a_request_that_might_not_fit_then_all_once_spent() -> None:
    # Each response: 100 input + 100 output tokens at $10/MTok = $0.002.
    worst = reservation(TEST_REQUEST)
    budget = worst + 0.002  # room for two responses, but the worst case of one only
    response = sse({"input_tokens": 100}, 100)
    settings = {"budget_usd": budget, "prices": TEST_PRICES}
    with Upstream(response) as up, proxy_for(up, **settings) as proxy:
        assert post(proxy, body=TEST_REQUEST)[0] == 200
        assert post(proxy, body=TEST_REQUEST)[0] == 200
        assert proxy.spent_usd == pytest.approx(0.004)
        assert not proxy.budget_exhausted
        status, _, body = post(proxy, body=TEST_REQUEST)
        assert status == 402
        refusal = json.loads(body)
        assert refusal["type"] == "error"
        assert refusal["error"]["type"] == "billing_error"
        left = f"${budget - 0.004:.4f}".rstrip("0")
        assert refusal["error"]["message"].startswith(
            f"ci-evals: this run's budget of ${budget:.4f}".rstrip("0")
        )
        assert f"has {left} left, less than this request could cost" in refusal["error"]["message"]
        assert len(up.received) == 2
        assert proxy.budget_refusals == 1
    with Upstream(response) as up, proxy_for(up, budget_usd=0.0, prices=TEST_PRICES) as proxy:
        status, _, body = post(proxy, body=TEST_REQUEST)
        assert status == 402
        assert "budget of $0 is spent ($0)" in json.loads(body)["error"]["message"]
        assert up.received == []


def test_a_request_without_max_tokens_is_refused_under_a_budget() -> None:
    body = {k: v for k, v in TEST_REQUEST.items() if k != "max_tokens"}
    with Upstream(sse()) as up, proxy_for(up, budget_usd=1.0, prices=TEST_PRICES) as proxy:
        status, _, answer = post(proxy, body=body)
        assert status == 400
        assert json.loads(answer)["error"]["type"] == "invalid_request_error"
        assert "max_tokens" in json.loads(answer)["error"]["message"]
        assert up.received == []
    with Upstream(sse()) as up, proxy_for(up) as proxy:  # no budget: the API judges it
        assert post(proxy, body=body)[0] == 200


def test_concurrent_requests_cannot_spend_past_the_budget() -> None:
    # The attack: many parallel requests, each nearly its worst case,
    # all sent while nothing has settled yet. Upstream holds every response
    # until all 12 arrived (they would, were the budget checked only against
    # what has settled) or 2 s passed.
    n, output = 12, 4000
    body = {**TEST_REQUEST, "max_tokens": output}
    worst = reservation(body)
    budget = 3.5 * worst
    all_arrived = threading.Event()

    def held(handler: _UpstreamHandler) -> None:
        if len(handler.server.upstream.received) >= n:
            all_arrived.set()
        all_arrived.wait(2.0)
        sse({"input_tokens": 500}, output)(handler)

    statuses: list[int] = []
    settings = {"budget_usd": budget, "prices": TEST_PRICES, "max_concurrency": n}
    with Upstream(held) as up, proxy_for(up, **settings) as proxy:
        threads = [
            threading.Thread(target=lambda: statuses.append(post(proxy, body=body)[0]))
            for _ in range(n)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        metered = proxy.metered()
    each = (500 * 10.0 + output * 10.0) / 1e6
    forwarded = len(up.received)
    assert sorted(set(statuses)) == [200, 402]
    assert statuses.count(200) == forwarded == metered.requests
    assert statuses.count(402) == n - forwarded == metered.refused
    assert metered.cost_usd == pytest.approx(forwarded * each)
    assert metered.cost_usd <= budget + worst
    assert metered.usage == PricedUsage(
        input_tokens=500 * forwarded, output_tokens=output * forwarded
    )


def test_a_request_that_fits_once_others_settle_waits_for_them() -> None:
    # Room for one worst case at a time; each response costs far less. The
    # second request waits for the first to settle instead of being refused.
    worst = reservation(TEST_REQUEST)
    settings = {"budget_usd": 1.5 * worst, "prices": TEST_PRICES, "max_concurrency": 2}
    statuses: list[int] = []
    with Upstream(slow(0.3, sse({"input_tokens": 1}, 1))) as up, proxy_for(up, **settings) as proxy:
        threads = [
            threading.Thread(target=lambda: statuses.append(post(proxy, body=TEST_REQUEST)[0]))
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == [200, 200]
    assert up.max_in_flight == 1  # never both reserved at once


def cut_after(events: int, text: str = "hello") -> Responder:
    """A 200 stream that ends after its first `events` events, before message_stop."""

    def cut(handler: _UpstreamHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for data in sse_events({"input_tokens": 100}, 100, text=text)[:events]:
            handler.chunk(data)
        handler.close_connection = True

    return cut


def settled(proxy: ForwardingProxy) -> None:
    """Wait for the handler to settle (after its reply reached us)."""
    deadline = time.monotonic() + 5
    while proxy.metered().requests and not proxy.spent_usd and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize(("text", "output"), [(80, 80), (2000, 100)])
def test_a_stream_cut_short_is_charged_what_it_proved_not_its_reservation(
    text: int, output: int
) -> None:
    # message_start said 100 input tokens and 1 output; then `text` bytes of
    # content arrived (as many tokens at most, and no more than max_tokens 100);
    # no message_delta, no message_stop.
    cut = cut_after(3, text="x" * text)
    with Upstream(cut) as up, proxy_for(up, budget_usd=1.0, prices=TEST_PRICES) as proxy:
        with contextlib.suppress(http.client.HTTPException, OSError):
            post(proxy, body=TEST_REQUEST)
        settled(proxy)
        assert proxy.spent_usd == pytest.approx((100 + output) * 10 / 1e6)
        assert proxy.spent_usd < reservation(TEST_REQUEST) / 10
        assert proxy.usage.input_tokens == 100 and proxy.usage.output_tokens == output
        assert proxy.metered().unknown == 0


def input_bound(body: dict[str, Any]) -> float:
    """The input's part of what the proxy reserves for `body`."""
    return worst_case(json.dumps(body).encode(), TEST_PRICES).input_cost_usd


def test_a_stream_cut_before_it_said_anything_is_charged_its_input_bound_only() -> None:
    # Before: its whole reservation, max_tokens of output that never arrived.
    with Upstream(cut_after(0)) as up, proxy_for(up, budget_usd=1.0, prices=TEST_PRICES) as proxy:
        with contextlib.suppress(http.client.HTTPException, OSError):
            post(proxy, body=TEST_REQUEST)
        settled(proxy)
        assert proxy.spent_usd == pytest.approx(input_bound(TEST_REQUEST))
        assert proxy.spent_usd < reservation(TEST_REQUEST)
        metered = proxy.metered()
        assert (metered.input_only, metered.unknown) == (1, 0)  # the ledger says how


# -- budget: every exit settles, every body read one way ------------------------------------


def hang_up(handler: _UpstreamHandler) -> None:
    """Upstream read the whole request (and may bill it), then drops the connection."""
    handler.close_connection = True


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("unanswered", ["closed", "timed_out"])
def test_a_request_sent_but_never_answered_is_charged_what_it_proved(
    unanswered: str, stream: bool
) -> None:
    # A stream delivers output as it is made: none arrived, none is charged, only
    # its input's bound (before: the whole reservation). A whole message may have
    # been made and lost: its reservation, the only bound.
    released = threading.Event()
    silent = [hang_up, lambda handler: released.wait(10)][unanswered == "timed_out"]
    settings = {"budget_usd": 1.0, "prices": TEST_PRICES, "upstream_timeout_s": 0.5}
    request = {**TEST_REQUEST, "stream": stream}
    try:
        with Upstream(silent) as up, proxy_for(up, **settings) as proxy:
            status, _, body = post(proxy, body=request)
            assert status == 502
            assert json.loads(body)["error"]["type"] == "api_error"
            assert len(up.received) == 1  # it got there: it may be billed
            # The handler settles after its reply reached us (its `finally`): wait for it.
            deadline = time.monotonic() + 10
            while proxy.spent_usd == 0.0 and time.monotonic() < deadline:
                time.sleep(0.01)
            metered = proxy.metered()
            if stream:
                assert proxy.spent_usd == pytest.approx(input_bound(request))
                assert (metered.input_only, metered.unknown) == (1, 0)
            else:
                assert proxy.spent_usd == pytest.approx(reservation(request))
                assert (metered.input_only, metered.unknown) == (0, 1)
    finally:
        released.set()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_response_too_deep_for_json_is_relayed_charged_and_recorded(tmp_path: Path) -> None:
    # The model may nest a tool input deeper than json.loads can go (RecursionError,
    # not ValueError): its usage is unreadable, so it is charged its reservation,
    # and the next request is judged at once instead of waiting on a lost reservation.
    answer = (
        '{"type": "message", "model": "claude-test", "content": [{"type": "tool_use", '
        f'"id": "t", "name": "x", "input": {{"a": {nested(5000)}}}}}], '
        '"usage": {"input_tokens": 10, "output_tokens": 10}}'
    ).encode()

    def deep(handler: _UpstreamHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(answer)))
        handler.end_headers()
        handler.wfile.write(answer)

    request = {**TEST_REQUEST, "stream": False}
    worst = reservation(request)
    record = tmp_path / "exchanges.jsonl"
    settings = {"budget_usd": 1.5 * worst, "prices": TEST_PRICES, "record_path": record}
    with Upstream(deep) as up, proxy_for(up, **settings) as proxy:
        status, _, body = post(proxy, body=request)
        assert (status, body) == (200, answer)
        # The handler settles after its reply reached us (its `finally`): wait for it.
        wait_until(lambda: proxy.spent_usd == pytest.approx(worst))
        assert post(proxy, body=request)[0] == 402  # not left waiting
        assert len(up.received) == 1
    # Each exchange is logged as its handler finishes: the first one's line may
    # come after the refusal's, so the order is not what is checked.
    statuses = sorted(json.loads(line)["status"] for line in record.read_text().splitlines())
    assert statuses == [200, 402]


def post_raw(proxy: ForwardingProxy, path: str, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"x-api-key": proxy.token})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "body",
    [
        '{"model": "claude-test", "max_tokens": 100, "messages": ' + nested(5000) + "}",
        '{"model": "claude-test", "max_tokens": 100, "messages": ' + nested(300) + "}",
        # The budget would read max_tokens 1; the API might honour 64000.
        '{"model": "claude-test", "max_tokens": 64000, "messages": [], "max_tokens": 1}',
        '{"model": "claude-test", "max_tokens": 9, "messages": [{"role": "user", '
        '"content": [{"type": "image", "source": {"type": "base64", "type": "url"}}]}]}',
    ],
    ids=["too-deep-for-json", "deeper-than-the-limit", "max_tokens-twice", "nested-key-twice"],
)
def test_a_body_the_budget_could_misread_is_refused_on_every_route(
    body: str, tmp_path: Path
) -> None:
    record = tmp_path / "exchanges.jsonl"
    settings = {"budget_usd": 1.0, "prices": TEST_PRICES, "record_path": record}
    with Upstream(sse()) as up, proxy_for(up, **settings) as proxy:
        for path in ("/v1/messages/count_tokens", "/v1/messages"):
            status, answer = post_raw(proxy, path, body.encode())
            assert status == 400
            assert json.loads(answer)["error"]["type"] == "invalid_request_error"
        assert up.received == []
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["outcome"] for line in lines] == ["bad_request", "bad_request"]


def chunked_post(proxy: ForwardingProxy, framed: bytes) -> bytes:
    """What the proxy answers a chunked POST whose body is framed as `framed`."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: "
            + proxy.token.encode()
            + b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            + framed
        )
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


@pytest.mark.parametrize(
    "size_line",
    [b"-1", b"+%x", b"0_%x", b"0x%x", b" %x", b"%x;name=value", b"0" * 2000 + b"%x"],
    ids=["negative", "signed", "underscore", "0x", "space", "extension", "overlong"],
)
def test_a_chunk_size_that_is_not_plain_hex_is_refused(size_line: bytes) -> None:
    # Each was read by int(line, 16) as a size: -1 then read the body to EOF, past
    # the size limit (the body here is exactly what follows it).
    body = json.dumps(TEST_REQUEST).encode()
    end = b"" if size_line == b"-1" else b"\r\n0\r\n\r\n"
    framed = (size_line % len(body) if b"%" in size_line else size_line) + b"\r\n" + body + end
    with Upstream(sse()) as up, proxy_for(up, budget_usd=1.0, prices=TEST_PRICES) as proxy:
        answer = chunked_post(proxy, framed)
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]
        assert b"invalid chunk size line" in answer
        assert up.received == []
        head, tail = body[:7], body[7:]  # plain hex, either case, still works
        chunks = b"%x\r\n%s\r\n%X\r\n%s\r\n0\r\n\r\n" % (len(head), head, len(tail), tail)
        assert chunked_post(proxy, chunks).startswith(b"HTTP/1.1 200 ")
        assert up.received[0]["body"] == TEST_REQUEST


def test_a_source_is_read_only_on_image_and_document_blocks() -> None:
    # A tool parameter or a tool call's argument named "source" is text in the body.
    schema = {"type": "object", "properties": {"source": {"type": "string"}}}
    tool = {"name": "copy_file", "description": "copy", "input_schema": schema}
    call = {"type": "tool_use", "id": "t", "name": "copy_file", "input": {"source": {"p": 1}}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    pdf = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    plain = {"type": "document", "source": {"type": "content", "content": [image]}}

    def bound(**parts: Any) -> int:
        body = json.dumps({**TEST_REQUEST, **parts}).encode()
        return worst_case(body, TEST_PRICES).input_tokens - len(body) - OVERHEAD_TOKENS

    def said(*content: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": list(content)}]

    assert bound(tools=[tool]) == 0
    assert bound(messages=[{"role": "assistant", "content": [call]}]) == 0
    result = {"type": "tool_result", "tool_use_id": "t", "content": [image, plain]}
    assert bound(messages=said(result)) == 2 * IMAGE_TOKENS
    assert bound(messages=said({**result, "content": [pdf]})) > MAX_INPUT_TOKENS // 2
    with Upstream(sse()) as up, proxy_for(up, budget_usd=5.0) as proxy:
        body = {**REQUEST, "max_tokens": 8000, "tools": [tool]}
        assert post(proxy, body=body)[0] == 200  # not a whole context window reserved


def test_float_residue_never_keeps_a_request_waiting_with_nothing_in_flight() -> None:
    # 0.41 + 0.12 - 0.41 - 0.12 is 5.6e-17, not 0: the last cent of the budget
    # then seemed taken, and a request that fits would wait for no one.
    ledger, stopping = Ledger(0.89), threading.Event()
    assert ledger.admit(0.41, stopping) is None
    assert ledger.admit(0.12, stopping) is None
    ledger.settle(0.41, 0.0, None)
    ledger.settle(0.12, 0.0, None)
    decided: list[str | None] = []
    waiter = threading.Thread(target=lambda: decided.append(ledger.admit(0.89, stopping)))
    waiter.start()
    waiter.join(10)
    stopping.set()
    waiter.join()
    assert decided == [None]


def test_a_request_asking_for_1m_context_is_reserved_and_charged_the_premium() -> None:
    # Above 200K input tokens with the 1M beta the API bills input x2, output x1.5.
    beta = {"anthropic-beta": "interleaved-thinking-2025-05-14, context-1m-2025-08-07"}
    pdf = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    unbounded = {**TEST_REQUEST, "messages": [{"role": "user", "content": [pdf]}]}
    plain = reservation(unbounded)
    assert plain == pytest.approx((MAX_INPUT_TOKENS * 20.0 + 100 * 10.0) / 1e6)
    body = json.dumps(unbounded).encode()
    premium = worst_case(body, TEST_PRICES, long_context=True).cost_usd
    assert premium == pytest.approx((MAX_INPUT_TOKENS * 40.0 + 100 * 15.0) / 1e6)
    assert worst_case(json.dumps(TEST_REQUEST).encode(), TEST_PRICES, True).cost_usd == (
        reservation(TEST_REQUEST)  # a bound under 200K: no premium possible
    )
    long = sse({"input_tokens": 150_000, "cache_read_input_tokens": 60_000}, 100)
    settings = {"budget_usd": (plain + premium) / 2, "prices": TEST_PRICES}
    with Upstream(long) as up, proxy_for(up, **settings) as proxy:
        assert post(proxy, {"x-api-key": proxy.token, **beta}, body=unbounded)[0] == 402
        assert post(proxy, body=TEST_REQUEST)[0] == 200  # no beta: the usual prices
        usual = (150_000 * 10.0 + 100 * 10.0) / 1e6  # cache reads cost 0 at TEST_PRICES
        assert proxy.spent_usd == pytest.approx(usual)
        # 210K input in all (the cache reads count): the premium.
        assert post(proxy, {"x-api-key": proxy.token, **beta}, body=TEST_REQUEST)[0] == 200
        assert proxy.spent_usd == pytest.approx(usual + (150_000 * 20.0 + 100 * 15.0) / 1e6)


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_client_that_hangs_up_while_waiting_for_the_budget_is_never_forwarded() -> None:
    worst = reservation(TEST_REQUEST)
    released = threading.Event()

    def held(handler: _UpstreamHandler) -> None:
        released.wait(10)
        sse({"input_tokens": 1}, 1)(handler)

    settings = {"budget_usd": 1.5 * worst, "prices": TEST_PRICES}
    with Upstream(held) as up, proxy_for(up, **settings) as proxy:
        first = threading.Thread(target=post, args=(proxy,), kwargs={"body": TEST_REQUEST})
        first.start()
        wait_until(lambda: len(up.received) == 1)
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("POST", "/v1/messages", json.dumps(TEST_REQUEST), {"x-api-key": proxy.token})
        wait_until(lambda: proxy.ledger.waiting == 1)  # it fits once the first settles
        conn.close()
        wait_until(lambda: proxy.ledger.waiting == 0)
        released.set()
        first.join()
        assert post(proxy, body=TEST_REQUEST)[0] == 200
        assert len(up.received) == 2  # the first and the last, not the one given up
        assert proxy.requests == 2


# -- recording, secrets, lifecycle --------------------------------------------------------------


def test_the_recording_has_every_exchange_and_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    record = tmp_path / "exchanges.jsonl"
    responses = (error(429, "rate_limit_error", {"retry-after": "0"}), sse())
    with Upstream(*responses) as up, proxy_for(up, record_path=record) as proxy:
        token = proxy.token
        assert post(proxy)[0] == 200
        assert post(proxy, {"Authorization": f"Bearer {token}x"})[0] == 401
        assert REAL_KEY not in repr(proxy.settings)
    text = record.read_text()
    for secret in (REAL_KEY, token):
        assert secret not in text
        assert secret not in caplog.text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["status"] for line in lines] == [200, 401]
    forwarded = lines[0]
    assert forwarded["method"] == "POST"
    assert forwarded["path"] == "/v1/messages?beta=true"
    assert "x-api-key" not in forwarded["request_headers"]
    assert forwarded["request_body"] == REQUEST
    assert [a["status"] for a in forwarded["attempts"]] == [429, 200]
    assert forwarded["response_body"].startswith("event: message_start\n")
    assert forwarded["usage"]["input_tokens"] == 100
    assert forwarded["cost_usd"] > 0
    assert forwarded["model"] == MODEL
    assert lines[1]["outcome"] == "refused_auth"
    assert "authorization" not in lines[1]["request_headers"]


def test_stop_leaves_no_thread_and_closes_the_port() -> None:
    gate = threading.Event()
    before = set(threading.enumerate())
    with Upstream(sse(), sse(gate=gate)) as up:
        proxy = ForwardingProxy(ProxySettings(upstream=up.url, api_key=REAL_KEY))
        proxy.start()
        port = proxy.port
        idle = http.client.HTTPConnection("127.0.0.1", port, timeout=5)  # kept alive
        idle.request("POST", "/v1/messages", json.dumps(REQUEST), {"x-api-key": proxy.token})
        idle.getresponse().read()
        stuck = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        stuck.request("POST", "/v1/messages", json.dumps(REQUEST), {"x-api-key": proxy.token})
        stuck.getresponse()  # headers arrived; upstream now waits on the gate
        # Waiting on the stuck upstream would take its 600 s read timeout: stop()
        # returning at all, with the gate still shut, is the order that matters.
        proxy.stop()
        assert not gate.is_set()
        proxy.stop()  # idempotent
        gate.set()
        assert not [t for t in threading.enumerate() if t.name.startswith("model-proxy")]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        idle.close()
        stuck.close()
    time.sleep(0.1)  # the stand-in's own daemon handler threads finish
    assert set(threading.enumerate()) <= before


# -- pieces ---------------------------------------------------------------------------------------


def test_sse_usage_reads_events_split_anywhere() -> None:
    stream = b"".join(sse_events({"input_tokens": 5, "cache_creation_input_tokens": 9}, 42))
    stream = stream.replace(b"\n", b"\r\n")
    parser = SSEUsage()
    for i in range(0, len(stream), 7):
        parser.feed(stream[i : i + 7])
    assert parser.model == MODEL
    assert parser.usage == PricedUsage(
        input_tokens=5, output_tokens=42, cache_creation_input_tokens=9
    )


def test_model_keys_drop_dates_and_provider_decorations() -> None:
    assert model_key("claude-sonnet-4-5-20250929") == "claude-sonnet-4-5"
    assert model_key("us.anthropic.claude-sonnet-4-5-20250929-v1:0") == "claude-sonnet-4-5"
    assert model_key("claude-sonnet-4-5@20250929") == "claude-sonnet-4-5"
    assert model_key("claude-opus-4-0") == "claude-opus-4"
    assert model_key("claude-opus-4-20250514") == "claude-opus-4"
    assert model_key("claude-3-5-haiku-latest") == "claude-3-5-haiku"


def test_unknown_models_cost_the_ceiling() -> None:
    pricing = Pricing()
    assert "claude-opus-9" not in pricing.prices
    assert pricing.price("claude-opus-9") == pricing.ceiling
    assert pricing.price(None) == pricing.ceiling
    assert pricing.ceiling.output == max(p.output for p in pricing.prices.values())
    # A table of its own is looked up by the same keys: a dated id finds its model.
    custom = Pricing({"claude-opus-9": Price(1.0, 2.0, 1.25, 0.1)})
    assert custom.price("claude-opus-9-20270101") == Price(1.0, 2.0, 1.25, 0.1)


def test_one_hour_cache_writes_cost_twice_the_input_price() -> None:
    pricing = Pricing({"m": Price(input=1.0, output=0, cache_write=1.25, cache_read=0)})
    usage = PricedUsage().updated(
        {
            "cache_creation_input_tokens": 3_000_000,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 1_000_000,
                "ephemeral_1h_input_tokens": 2_000_000,
            },
        }
    )
    assert pricing.cost("m", usage) == pytest.approx(1.25 + 4.0)


# -- the real CLI --------------------------------------------------------------------------------


class Tee:
    """A TCP relay to `target` that keeps every byte the proxy sent upstream."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.sent = bytearray()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads: list[threading.Thread] = []
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target)
                for a, b, keep in ((client, server, True), (server, client, False)):
                    t = threading.Thread(target=self._pump, args=(a, b, keep), daemon=True)
                    t.start()
                    self.threads.append(t)

    def _pump(self, source: socket.socket, sink: socket.socket, keep: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if keep:
                    self.sent += data
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


@pytest.mark.slow
def test_the_real_cli_through_the_proxy_to_the_stub(tmp_path: Path) -> None:
    script = loads_script(
        "rules:\n  - repeat_last: true\n    turns:\n"
        "      - text: through the proxy\n"
        "        usage: {input_tokens: 300000, output_tokens: 100}\n"
    )
    record = tmp_path / "exchanges.jsonl"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # The CLI's first request (~60 KB, max_tokens 32000) reserves ~$0.85 of $0.9.
    # Its turn at Sonnet 4.5 prices: 300,000 x $3 + 100 x $15 per MTok = $0.9015.
    with StubServer(script) as stub:
        tee = Tee(("127.0.0.1", stub.port))
        settings = ProxySettings(
            upstream=f"http://127.0.0.1:{tee.port}",
            api_key=REAL_KEY,
            budget_usd=0.9,
            record_path=record,
        )
        with ForwardingProxy(settings) as proxy:
            env = {
                **proxy.cli_env(),
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "CLAUDE_CODE_MAX_RETRIES": "0",
            }
            first = run_query(
                stub, "hello", cwd, tmp_path / "a", env=env, model="claude-sonnet-4-5"
            )
            assert first.error is None, first.stderr[-10:]
            assert first.texts() == ["through the proxy"]
            assert proxy.spent_usd == pytest.approx(0.9015)
            assert proxy.budget_exhausted
            second = run_query(
                stub, "again", cwd, tmp_path / "b", env=env, model="claude-sonnet-4-5"
            )
            token = proxy.token
        tee.close()
        forwarded = [r for r in stub.requests if r.path.startswith("/v1/messages")]
    # The stub got the real key, never the token; the CLI never saw the key.
    assert b"x-api-key: " + REAL_KEY.encode() in tee.sent
    assert token.encode() not in tee.sent
    assert len(forwarded) == 1
    refusal = (
        "API Error: 402 ci-evals: this run's budget of $0.9 is spent ($0.9015); "
        "no further model requests are forwarded"
    )
    result = second.result
    assert result.is_error
    assert result.result == refusal
    assert second.texts() == [refusal]
    assert refusal in str(second.error)
    text = record.read_text()
    assert REAL_KEY not in text
    assert token not in text
