"""The run's hard budget as the forwarding proxy keeps it: reserve, then settle.

A Messages request is forwarded only once its worst case (`worst_case`: its
`max_tokens` of output plus an upper bound on its input, at the model's dearest
rates) fits (`Ledger.admit`): refused (402) when it could not fit even if every
request in flight cost nothing, admitted when the spend plus every reservation
plus its own fits, else it waits for requests in flight to settle. Settled
(`Ledger.settle`) when its response ends, it is charged what it proved it used;
`Metered.input_only` and `Metered.unknown` count the exchanges charged their input
bound or their whole reservation. So the spend stays within the budget unless a
response reports more than its reservation: the tests hold it to the budget plus
one reservation. A body is read once, by `loads_request`, and refused if the
budget could misread it (a key twice, nested past `MAX_DEPTH`).

The rules in full, the input bound and every way an exchange is charged:
docs/run.md#budget.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ci_evals.endpoints.pricing import LONG_CONTEXT_TOKENS, PER_TOKEN, PricedUsage, Pricing

# The largest context window a model has (the 1M-token beta): no request can
# be charged for more input than this.
MAX_INPUT_TOKENS = 1_000_000
# What the API adds to a request's own text (the tool-use system prompt is ~350).
OVERHEAD_TOKENS = 2_048
# An image is resized to at most ~1.15 megapixels (~1,600 tokens); kept well above.
IMAGE_TOKENS = 5_000
_UNBOUNDED_TOOLS = ("web_search", "web_fetch", "code_execution", "mcp", "computer")
# Deeper than any real request (tool schemas nest a few dozen levels); bounds
# every walk of the body and keeps json below the interpreter's recursion limit.
MAX_DEPTH = 256
# Content blocks whose `source` may hold (or point at) what the model reads.
_SOURCE_BLOCKS = frozenset({"image", "document"})


@dataclass(frozen=True)
class WorstCase:
    """What one Messages request can cost at most."""

    cost_usd: float
    model: str | None
    max_tokens: int
    input_tokens: int  # the upper bound used
    input_cost_usd: float  # of `cost_usd`, the input's part: all a stream with no output cost

    def describe(self) -> str:
        model = self.model or "an unknown model"
        return (
            f"max_tokens {self.max_tokens} and up to {self.input_tokens:,} input tokens "
            f"at {model}'s prices"
        )


class Unpriceable(ValueError):
    """The request does not say how much it can cost (no usable `max_tokens`)."""


class BadRequest(Unpriceable):
    """The body is not one JSON object the budget can read unambiguously."""


def loads_request(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object; `BadRequest` if it is not JSON, not an object, has a
    key twice in one object, or is nested deeper than `MAX_DEPTH`."""
    try:
        request = json.loads(body, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise BadRequest(f"the request body has the key {exc} twice in one object") from None
    except RecursionError:
        raise BadRequest(f"the request body is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise BadRequest("the request body is not JSON") from None
    if not isinstance(request, dict):
        raise BadRequest("the request body is not a JSON object")
    if _depth(request) > MAX_DEPTH:
        raise BadRequest(f"the request body is nested deeper than {MAX_DEPTH} levels")
    return request


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(json.dumps(key))
        result[key] = value
    return result


def _depth(value: object) -> int:
    """How deeply `value` nests lists and objects (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def worst_case(body: bytes, prices: Pricing, long_context: bool = False) -> WorstCase:
    """The most `body` (a Messages request) can cost; `Unpriceable` (or its
    `BadRequest`) if it cannot be bounded."""
    request = loads_request(body)
    max_tokens = request.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise Unpriceable("the request has no positive integer max_tokens")
    model = request.get("model") if isinstance(request.get("model"), str) else None
    input_tokens = min(MAX_INPUT_TOKENS, len(body) + OVERHEAD_TOKENS + _extra_input(request))
    price = prices.price(model)
    if long_context and input_tokens > LONG_CONTEXT_TOKENS:
        price = price.long_context()
    input_rate = max(price.input, price.cache_write, price.cache_write_1h, price.cache_read)
    input_cost = PER_TOKEN * input_tokens * input_rate
    cost = input_cost + PER_TOKEN * max_tokens * price.output
    return WorstCase(cost, model, max_tokens, input_tokens, input_cost)


def _extra_input(request: dict[str, Any]) -> int:
    """Input tokens the body's bytes do not bound (see the module doc)."""
    if request.get("mcp_servers"):
        return MAX_INPUT_TOKENS
    tools = request.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if isinstance(kind, str) and kind.startswith(_UNBOUNDED_TOOLS):
            return MAX_INPUT_TOKENS
    extra = 0
    for source in _sources(request):
        kind, media = source.get("type"), source.get("media_type")
        if kind == "text":
            continue  # its text is in the body
        if kind == "base64" and isinstance(media, str) and media.startswith("image/"):
            extra += IMAGE_TOKENS
        else:
            return MAX_INPUT_TOKENS  # a PDF, a URL, a file id: its size is not in the body
    return extra


def _sources(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The `source` of every image and document block in the messages, also those in
    a tool result's content or a content document; never a tool's schema or input."""
    messages = request.get("messages")
    listed = messages if isinstance(messages, list) else []
    stack: list[object] = [m.get("content") for m in listed if isinstance(m, dict)]
    while stack:
        blocks = stack.pop()
        for block in blocks if isinstance(blocks, list) else []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                stack.append(block.get("content"))
            elif kind in _SOURCE_BLOCKS and isinstance(block.get("source"), dict):
                source = block["source"]
                if source.get("type") == "content":  # a document made of blocks
                    stack.append(source.get("content"))
                else:
                    yield source


@dataclass(frozen=True)
class Metered:
    """Everything the endpoint forwarded so far, as it charged it."""

    requests: int = 0  # Messages requests forwarded (count_tokens too)
    refused: int = 0  # Messages requests refused for the budget
    cost_usd: float = 0.0  # settled: usage at our prices, or a reservation (module doc)
    usage: PricedUsage = field(default_factory=PricedUsage)
    unknown: int = 0  # of them, charged their reservation: their cost was never said
    input_only: int = 0  # of them, streams that brought no output: charged their input's bound


# How an exchange was charged: the usage it reported; what a cut stream proved
# (`received`); its input's bound, no output (`input`); its whole reservation.
Charge = Literal["usage", "received", "input", "reservation"]


class Stopped(Exception):
    """The proxy is stopping: a request waiting for the budget gives up."""


class Ledger:
    """The budget's bookkeeping, shared by every request thread of one proxy."""

    def __init__(self, budget_usd: float | None) -> None:
        self.budget_usd = budget_usd
        self._changed = threading.Condition()
        self._spent = 0.0
        self._reserved = 0.0
        self._in_flight = 0  # admitted, not yet settled: at 0, `_reserved` is exactly 0
        self._waiting = 0  # in `admit`, waiting for requests in flight to settle
        self._usage = PricedUsage()
        self._requests = 0
        self._refused = 0
        self._unknown = 0
        self._input_only = 0

    def admit(
        self,
        worst: float,
        stopping: threading.Event,
        abandoned: Callable[[], bool] = lambda: False,
    ) -> str | None:
        """Reserve `worst` USD and count the request (None), or the refusal for the
        budget (counted); `Stopped` if the proxy stops, or `abandoned()` turns true
        (the client hung up), while it waits."""
        budget = self.budget_usd
        with self._changed:
            waiting = False
            try:
                while True:
                    if budget is None or self._spent + self._reserved + worst <= budget:
                        self._reserved += worst
                        self._in_flight += 1
                        self._requests += 1
                        return None
                    if self._spent >= budget or self._spent + worst > budget:
                        self._refused += 1
                        return self._refusal(budget, worst)
                    if not waiting:
                        waiting, self._waiting = True, self._waiting + 1
                    self._changed.wait(0.1)
                    # Checked before it is admitted: a client gone meanwhile is not sent.
                    if stopping.is_set() or abandoned():
                        raise Stopped
            finally:
                self._waiting -= waiting

    def _refusal(self, budget: float, worst: float) -> str:
        if self._spent >= budget:
            return (
                f"ci-evals: this run's budget of {usd(budget)} is spent ({usd(self._spent)}); "
                "no further model requests are forwarded"
            )
        return (
            f"ci-evals: this run's budget of {usd(budget)} has {usd(budget - self._spent)} "
            f"left, less than this request could cost ({usd(worst)}); it is not forwarded"
        )

    def count_unbudgeted(self) -> None:
        """Count a request that reserves nothing (it is settled all the same)."""
        with self._changed:
            self._in_flight += 1
            self._requests += 1

    def settle(
        self, reserved: float, cost: float, usage: PricedUsage | None, *, charge: Charge = "usage"
    ) -> None:
        """Release a request's reservation and charge what it cost; `charge` says how
        it was known (`reservation`: never; `input`: its input's bound, no output)."""
        with self._changed:
            self._in_flight -= 1
            self._unknown += charge == "reservation" and reserved > 0
            self._input_only += charge == "input" and reserved > 0
            # Float sums leave residue (0.1 + 0.2 - 0.1 - 0.2 is not 0): with nothing
            # in flight nothing is reserved, or `admit` would wait for no one.
            self._reserved = max(0.0, self._reserved - reserved) if self._in_flight else 0.0
            self._spent += cost
            if usage is not None:
                self._usage = self._usage + usage
            self._changed.notify_all()

    @property
    def waiting(self) -> int:
        """Requests waiting for others to settle before they fit in the budget."""
        with self._changed:
            return self._waiting

    @property
    def spent_usd(self) -> float:
        with self._changed:
            return self._spent

    @property
    def exhausted(self) -> bool:
        with self._changed:
            return self.budget_usd is not None and self._spent >= self.budget_usd

    def metered(self) -> Metered:
        with self._changed:
            return Metered(
                self._requests,
                self._refused,
                self._spent,
                self._usage,
                self._unknown,
                self._input_only,
            )


def usd(amount: float) -> str:
    """$5, $0.004, $0.0045: four decimals at most, no trailing zeros."""
    return "$" + f"{amount:.4f}".rstrip("0").rstrip(".")
