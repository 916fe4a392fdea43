"""Endpoints by `--model`: `stub:PATH` is the stub, any other value (or none) a
model name on the real API. Adding a kind is a module and a line in `KINDS`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ci_evals.endpoints.anthropic import AnthropicEndpoint
from ci_evals.endpoints.base import Endpoint, EndpointOptions, OpenEndpoint
from ci_evals.endpoints.stub import PREFIX as STUB_PREFIX
from ci_evals.endpoints.stub import StubEndpoint
from ci_evals.errors import UserError


def _stub(rest: str) -> Endpoint:
    if not rest:
        raise UserError("--model stub: needs a script path", field="--model", hint="stub:PATH")
    return StubEndpoint(Path(rest))


# `--model PREFIX:REST` -> the endpoint; anything else is a model name on the API.
KINDS: dict[str, Callable[[str], Endpoint]] = {
    STUB_PREFIX: _stub,
}


@contextmanager
def no_endpoint(options: EndpointOptions) -> Iterator[OpenEndpoint]:
    """Nothing to reach: for a command that turns out to call no model at all."""
    yield OpenEndpoint(name="none", env={}, model=options.default_model)


def endpoint_for(model: str | None) -> Endpoint:
    """The endpoint `--model` names (see the module doc)."""
    for prefix, make in KINDS.items():
        if model is not None and model.startswith(prefix):
            return make(model[len(prefix) :])
    return AnthropicEndpoint(model)
