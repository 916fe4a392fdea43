"""`anthropic`: the real Messages API, reached through a local forwarding proxy.

The proxy (`proxy.ForwardingProxy`) holds the real key from our environment
and listens on 127.0.0.1; the agent gets its URL and a per-run token that is
worthless anywhere else, so no sandbox ever holds the credential. The proxy
also enforces the run's hard budget from the usage it forwards, retries
429/529, and can record every exchange.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from ci_evals.endpoints.base import EndpointOptions, OpenEndpoint, has_credential
from ci_evals.errors import UserError

DEFAULT_UPSTREAM = "https://api.anthropic.com"


class AnthropicEndpoint:
    name = "anthropic"

    def __init__(self, model: str | None) -> None:
        self.model = model

    def check(self, environ: Mapping[str, str], why: str, hint: str | None = None) -> None:
        if not has_credential(environ):
            raise UserError(
                f"{why} needs a model: set ANTHROPIC_API_KEY, "
                "or run offline with --model stub:PATH",
                hint=hint,
            )

    @contextmanager
    def open(self, environ: Mapping[str, str], options: EndpointOptions) -> Iterator[OpenEndpoint]:
        from ci_evals.endpoints.proxy import ForwardingProxy, ProxySettings  # noqa: PLC0415

        settings = ProxySettings(
            upstream=environ.get("ANTHROPIC_BASE_URL") or DEFAULT_UPSTREAM,
            api_key=environ.get("ANTHROPIC_API_KEY") or None,
            auth_token=environ.get("ANTHROPIC_AUTH_TOKEN") or None,
            budget_usd=options.budget_usd,
            record_path=options.record_path,
        )
        if options.max_concurrency is not None:  # else the proxy's own default
            settings = replace(settings, max_concurrency=options.max_concurrency)
        with ForwardingProxy(settings) as proxy:
            yield OpenEndpoint(
                name=self.name,
                env=proxy.cli_env(),
                model=self.model or options.default_model,
                meter=proxy.metered,
                # A token per stage: the endpoint's faults are told to the stage they hit.
                new_caller=proxy.new_caller,
            )


class _AnthropicKind:
    """The default: a `--model` that names no other kind is a model name on the API."""

    name = "anthropic"

    def load(self, value: str | None) -> str | None:
        return value or None  # None: the CLI's default model

    def available(self) -> str | None:
        return None  # whether a key is set is `check`'s, once a command knows it needs one

    def create(self, options: object) -> AnthropicEndpoint:
        assert options is None or isinstance(options, str)  # what `load` gave
        return AnthropicEndpoint(options)


KIND = _AnthropicKind()
