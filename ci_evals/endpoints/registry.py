"""Endpoint kinds by name (`ci_evals.registry`), and the endpoint `--model` names.

`--model NAME:REST` is kind NAME with REST as its value: built in, `stub`
(`stub:PATH`), `replay` (`replay:RUN_DIR`) and `anthropic`; a package adds one
with an entry point in group `ci_evals.endpoints` naming its `EndpointKind` (endpoints.base). Any
other value, or none, is a model name on the real API (`anthropic`): a model
id may itself hold a colon, so installed metadata is read only for a prefix
that is not built in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ci_evals.endpoints.base import Endpoint, EndpointKind, EndpointOptions, OpenEndpoint
from ci_evals.errors import UserError
from ci_evals.registry import Registry

DEFAULT_ENDPOINT = "anthropic"

KINDS: Registry[EndpointKind] = Registry(
    "endpoint",
    "ci_evals.endpoints",
    {
        "stub": "ci_evals.endpoints.stub:KIND",
        "replay": "ci_evals.endpoints.replay:KIND",
        DEFAULT_ENDPOINT: "ci_evals.endpoints.anthropic:KIND",
    },
)


@contextmanager
def no_endpoint(options: EndpointOptions) -> Iterator[OpenEndpoint]:
    """Nothing to reach: for a command that turns out to call no model at all."""
    yield OpenEndpoint(name="none", env={}, model=options.default_model)


def endpoint_for(model: str | None) -> Endpoint:
    """The endpoint `--model` names (see the module doc)."""
    name, colon, rest = (model or "").partition(":")
    value: str | None
    if colon and name in KINDS:
        kind, value = KINDS.get(name), rest
    else:
        kind, value = KINDS.get(DEFAULT_ENDPOINT), model
    why = kind.available()
    if why is not None:
        raise UserError(
            f"endpoint {kind.name} cannot run here: {why}", field="--model", hint="run where it can"
        )
    return kind.create(kind.load(value))
