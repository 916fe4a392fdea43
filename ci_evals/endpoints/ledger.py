"""The run's hard budget as the forwarding proxy keeps it: reserve, then settle.

A Messages request is forwarded only once its **worst case** is reserved
(`worst_case`): `max_tokens` of output plus an upper bound on its input
tokens, both at the model's price (the input at its most expensive rate, a
1-hour cache write). The rule (`Ledger.admit`), with `spent` what settled
requests cost and `reserved` the worst cases of those admitted and not yet
settled:

- `spent` has reached the budget, or `spent + worst case` exceeds it: refused
  (the proxy answers 402). Even if every request in flight cost nothing this
  one might not fit, so it is not forwarded: the spend never passes the budget
  because of a request's size.
- `spent + reserved + worst case` is within the budget: admitted.
- otherwise it waits until requests in flight settle (most cost far less than
  their worst case) and is decided again.

A request is settled (`Ledger.settle`) when its response ends: its reservation
is released and what it cost is added. A response whose final usage was never
seen (a broken stream, a body that is not a message, a request sent that got
no answer) is charged its whole reservation: its cost is unknown, and the
worst case is the only bound we have. So the spend stays within the budget
unless a response reports more than its reservation (an input bound that was
wrong); the bound the tests hold it to is the budget plus one reservation.

The input bound: a token is never shorter than one byte of the request's
JSON text (quotes, keys and escapes only add bytes), plus a fixed allowance
for the prompt the API adds (tool use), `IMAGE_TOKENS` per image, and the
whole context window (`MAX_INPUT_TOKENS`) for anything whose tokens the body
does not hold: a PDF, a URL or Files API source, MCP servers, server tools
(web search and fetch bring pages into the prompt). Not modelled, as in
`pricing`: the long-context premium and per-use billing of server tools.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ci_evals.endpoints.pricing import PER_TOKEN, Pricing, Usage

# The largest context window a model has (the 1M-token beta): no request can
# be charged for more input than this.
MAX_INPUT_TOKENS = 1_000_000
# What the API adds to a request's own text (the tool-use system prompt is ~350).
OVERHEAD_TOKENS = 2_048
# An image is resized to at most ~1.15 megapixels (~1,600 tokens); kept well above.
IMAGE_TOKENS = 5_000
_UNBOUNDED_TOOLS = ("web_search", "web_fetch", "code_execution", "mcp", "computer")


@dataclass(frozen=True)
class WorstCase:
    """What one Messages request can cost at most."""

    cost_usd: float
    model: str | None
    max_tokens: int
    input_tokens: int  # the upper bound used

    def describe(self) -> str:
        model = self.model or "an unknown model"
        return (
            f"max_tokens {self.max_tokens} and up to {self.input_tokens:,} input tokens "
            f"at {model}'s prices"
        )


class Unpriceable(ValueError):
    """The request does not say how much it can cost (no usable `max_tokens`)."""


def worst_case(body: bytes, prices: Pricing) -> WorstCase:
    """The most `body` (a Messages request) can cost; `Unpriceable` if it cannot be bounded."""
    try:
        request = json.loads(body)
    except ValueError:
        raise Unpriceable("the request body is not JSON") from None
    if not isinstance(request, dict):
        raise Unpriceable("the request body is not a JSON object")
    max_tokens = request.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise Unpriceable("the request has no positive integer max_tokens")
    model = request.get("model") if isinstance(request.get("model"), str) else None
    input_tokens = min(MAX_INPUT_TOKENS, len(body) + OVERHEAD_TOKENS + _extra_input(request))
    price = prices.price(model)
    input_rate = max(price.input, price.cache_write, price.cache_write_1h, price.cache_read)
    cost = PER_TOKEN * (input_tokens * input_rate + max_tokens * price.output)
    return WorstCase(cost, model, max_tokens, input_tokens)


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


def _sources(value: object) -> Iterator[dict[str, Any]]:
    """Every content block's `source` object, however deeply nested (tool results)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            source = item.get("source")
            if isinstance(source, dict):
                yield source
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


@dataclass(frozen=True)
class Metered:
    """Everything the endpoint forwarded so far, as it charged it."""

    requests: int = 0  # Messages requests forwarded (count_tokens too)
    refused: int = 0  # Messages requests refused for the budget
    cost_usd: float = 0.0  # settled: usage at our prices, or a reservation (module doc)
    usage: Usage = field(default_factory=Usage)


class Stopped(Exception):
    """The proxy is stopping: a request waiting for the budget gives up."""


class Ledger:
    """The budget's bookkeeping, shared by every request thread of one proxy."""

    def __init__(self, budget_usd: float | None) -> None:
        self.budget_usd = budget_usd
        self._changed = threading.Condition()
        self._spent = 0.0
        self._reserved = 0.0
        self._usage = Usage()
        self._requests = 0
        self._refused = 0

    def admit(self, worst: float, stopping: threading.Event) -> str | None:
        """Reserve `worst` USD and count the request (None), or the refusal for the
        budget (counted); `Stopped` if the proxy stops while it waits."""
        budget = self.budget_usd
        with self._changed:
            while True:
                if budget is None or self._spent + self._reserved + worst <= budget:
                    self._reserved += worst
                    self._requests += 1
                    return None
                if self._spent >= budget or self._spent + worst > budget:
                    self._refused += 1
                    return self._refusal(budget, worst)
                if stopping.is_set():
                    raise Stopped
                self._changed.wait(0.1)

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
        with self._changed:
            self._requests += 1

    def settle(self, reserved: float, cost: float, usage: Usage | None) -> None:
        """Release a request's reservation and charge what it cost."""
        with self._changed:
            self._reserved = max(0.0, self._reserved - reserved)
            self._spent += cost
            if usage is not None:
                self._usage = self._usage + usage
            self._changed.notify_all()

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
            return Metered(self._requests, self._refused, self._spent, self._usage)


def usd(amount: float) -> str:
    """$5, $0.004, $0.0045: four decimals at most, no trailing zeros."""
    return "$" + f"{amount:.4f}".rstrip("0").rstrip(".")
