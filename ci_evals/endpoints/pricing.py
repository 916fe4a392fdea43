"""What a model response cost: list prices per model, in USD per million tokens.

The forwarding proxy enforces a run's hard budget (`ledger`): each request's
worst case is reserved at these prices, and it is settled on the `usage` the
API returns, priced here (the CLI's own `total_cost_usd` comes from its price
table, which is wrong for models it does not know).

Models are looked up by their id without the date or provider decorations
(`us.anthropic.claude-sonnet-4-5-20250929-v1:0` prices as `claude-sonnet-4-5`).
A model not in the table is priced at the most expensive known price, field by
field (`Pricing.ceiling`): for a budget, guessing high fails closed.
`cache_write` is the 5-minute TTL price, the 1-hour TTL costs 2 x input, and a request for the
1M-token window past 200K input tokens is billed at `Price.long_context`. Not
modelled: batch discounts, and server tools billed per use. The rates and
their rules: docs/run.md#budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PER_TOKEN = 1e-6  # prices are per million tokens
LONG_CONTEXT_BETA = "context-1m"  # the anthropic-beta flag's prefix
LONG_CONTEXT_TOKENS = 200_000  # input above this, with the flag, pays the premium


def asks_long_context(anthropic_beta: str) -> bool:
    """Whether an `anthropic-beta` header value (comma-separated) asks for 1M context."""
    return any(
        flag.strip().lower().startswith(LONG_CONTEXT_BETA) for flag in anthropic_beta.split(",")
    )


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float  # 5-minute TTL
    cache_read: float

    @property
    def cache_write_1h(self) -> float:
        return 2.0 * self.input

    def long_context(self) -> Price:
        """The premium above `LONG_CONTEXT_TOKENS` of input: input rates x 2, output x 1.5."""
        return Price(
            2.0 * self.input, 1.5 * self.output, 2.0 * self.cache_write, 2.0 * self.cache_read
        )


@dataclass(frozen=True)
class PricedUsage:
    """Token counts of one response (or a sum of them), as the Messages API reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0  # all cache writes, whatever their TTL
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0  # the part of the writes with the 1-hour TTL

    def __add__(self, other: PricedUsage) -> PricedUsage:
        return PricedUsage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @classmethod
    def from_api(cls, usage: Mapping[str, Any]) -> PricedUsage:
        """From a `usage` object; missing or null counts are 0."""
        return cls().updated(usage)

    def updated(self, usage: Mapping[str, Any]) -> PricedUsage:
        """These counts with those present in `usage` replacing them.

        A stream's `message_delta.usage` carries cumulative counts, so the last
        value of each field wins over `message_start`'s.
        """

        def count(key: str, default: int) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else default

        one_hour = self.cache_creation_1h_input_tokens
        breakdown = usage.get("cache_creation")
        if isinstance(breakdown, Mapping):
            value = breakdown.get("ephemeral_1h_input_tokens")
            if isinstance(value, int) and not isinstance(value, bool):
                one_hour = value
        return PricedUsage(
            input_tokens=count("input_tokens", self.input_tokens),
            output_tokens=count("output_tokens", self.output_tokens),
            cache_creation_input_tokens=count(
                "cache_creation_input_tokens", self.cache_creation_input_tokens
            ),
            cache_read_input_tokens=count("cache_read_input_tokens", self.cache_read_input_tokens),
            cache_creation_1h_input_tokens=one_hour,
        )

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _price(input: float, output: float, cache_write: float, cache_read: float) -> Price:
    return Price(input=input, output=output, cache_write=cache_write, cache_read=cache_read)


_OPUS_4_5 = _price(5.0, 25.0, 6.25, 0.50)
_OPUS_4 = _price(15.0, 75.0, 18.75, 1.50)
_SONNET = _price(3.0, 15.0, 3.75, 0.30)

# Anthropic's list prices. Entries marked (cli) are the prices the Claude Code
# CLI 2.1.332 (claude-agent-sdk 0.2.189) charges for the model, measured by
# pricing its usage; check them against anthropic.com/pricing when they matter.
DEFAULT_PRICES: Mapping[str, Price] = {
    "claude-opus-5": _OPUS_4_5,  # (cli)
    "claude-opus-4-8": _OPUS_4_5,  # (cli)
    "claude-opus-4-7": _OPUS_4_5,  # (cli)
    "claude-opus-4-6": _OPUS_4_5,  # (cli)
    "claude-opus-4-5": _OPUS_4_5,
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4": _OPUS_4,
    "claude-3-opus": _OPUS_4,
    "claude-sonnet-5-5": _price(2.0, 10.0, 2.50, 0.10),  # (cli)
    "claude-sonnet-5": _price(2.0, 10.0, 2.50, 0.20),  # (cli)
    "claude-sonnet-4-6": _SONNET,  # (cli)
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4": _SONNET,
    "claude-3-7-sonnet": _SONNET,
    "claude-3-5-sonnet": _SONNET,
    "claude-haiku-5-5": _price(0.10, 0.50, 0.125, 0.01),  # (cli)
    "claude-haiku-4-5": _price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": _price(0.80, 4.0, 1.0, 0.08),
    "claude-3-haiku": _price(0.25, 1.25, 0.30, 0.03),
}

_PROVIDER_PREFIX = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.")  # Bedrock: us.anthropic.
_SUFFIXES = (
    re.compile(r"\[[^\]]*\]$"),  # the CLI's context-size aliases: claude-sonnet-4-5[1m]
    re.compile(r"@.*$"),  # Vertex: claude-sonnet-4-5@20250929
    re.compile(r"-v\d+(?::\d+)?$"),  # Bedrock: -v1:0
    re.compile(r"-latest$"),
    re.compile(r"-\d{8}$"),  # the snapshot date
)
_ALIASES = {"claude-opus-4-0": "claude-opus-4", "claude-sonnet-4-0": "claude-sonnet-4"}


def model_key(model: str) -> str:
    """The table key of a model id: lower case, without provider prefix, date or version."""
    key = _PROVIDER_PREFIX.sub("", model.strip().lower())
    for suffix in _SUFFIXES:
        key = suffix.sub("", key)
    return _ALIASES.get(key, key)


class Pricing:
    """A price table; unknown models cost the ceiling (the highest known price per field)."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        table = DEFAULT_PRICES if prices is None else prices
        if not table:
            raise ValueError("a price table needs at least one model")
        self._prices = {model_key(name): price for name, price in table.items()}
        self.ceiling = Price(
            input=max(p.input for p in self._prices.values()),
            output=max(p.output for p in self._prices.values()),
            cache_write=max(p.cache_write for p in self._prices.values()),
            cache_read=max(p.cache_read for p in self._prices.values()),
        )

    @property
    def prices(self) -> Mapping[str, Price]:
        return dict(self._prices)

    def price(self, model: str | None) -> Price:
        """The model's price; the ceiling when the model is unknown (or not reported)."""
        if model is None:
            return self.ceiling
        return self._prices.get(model_key(model), self.ceiling)

    def cost(self, model: str | None, usage: PricedUsage, long_context: bool = False) -> float:
        """USD for `usage` at `model`'s price; with `long_context` (the request asked for
        the 1M window), at the premium when its input passed `LONG_CONTEXT_TOKENS`."""
        price = self.price(model)
        prompt = (
            usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        )
        if long_context and prompt > LONG_CONTEXT_TOKENS:
            price = price.long_context()
        one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
        five_minutes = usage.cache_creation_input_tokens - one_hour
        return PER_TOKEN * (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + five_minutes * price.cache_write
            + one_hour * price.cache_write_1h
            + usage.cache_read_input_tokens * price.cache_read
        )
