"""Endpoint kinds by name (`ci_evals.registry`), and the endpoint `--model` names.

`--model NAME:REST` is kind NAME with REST as its value when NAME is a kind's
name: built in, `stub` (`stub:PATH`), `replay` (`replay:RUN_DIR`) and
`anthropic`, or one a package adds with an entry point in group
`ci_evals.endpoints` naming its `EndpointKind` (endpoints.base). A kind's name
is letters, digits, `_` and `-` only (`KIND_NAME`). Any other value, or none,
is a model id on the default endpoint (`anthropic`): a model id may itself
hold a colon (Bedrock's `us.anthropic.claude-opus-4-1-v1:0`, whose NAME has
dots, is never looked up, whatever is installed), and installed metadata is
read only for a kind-shaped NAME that is not built in. A package's endpoint
runs inside `KINDS.theirs`: what it raises, loading, creating, checking,
opening or closing, is reported as that package's, not as a bug of ours.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from ci_evals.endpoints.base import Endpoint, EndpointKind, EndpointOptions, OpenEndpoint
from ci_evals.errors import UserError
from ci_evals.registry import Registry

DEFAULT_ENDPOINT = "anthropic"
KIND_NAME = re.compile(r"[A-Za-z0-9_-]+")

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


def kind_of(model: str | None) -> tuple[str, str | None]:
    """The kind `--model` names and the value it is given (see the module doc)."""
    name, colon, rest = (model or "").partition(":")
    if colon and KIND_NAME.fullmatch(name) and name in KINDS:
        return name, rest
    return DEFAULT_ENDPOINT, model


def endpoint_for(model: str | None) -> Endpoint:
    """The endpoint `--model` names (see the module doc)."""
    name, value = kind_of(model)
    kind = KINDS.get(name)
    with KINDS.theirs(name):
        why = kind.available()
    if why is not None:
        raise UserError(
            f"endpoint {kind.name} cannot run here: {why}", field="--model", hint="run where it can"
        )
    with KINDS.theirs(name):
        endpoint = kind.create(kind.load(value))
    return endpoint if KINDS.origin(name) is None else _Theirs(endpoint, name)


class _Theirs:
    """Another package's endpoint, every call into it inside `KINDS.theirs`."""

    def __init__(self, inner: Endpoint, kind: str) -> None:
        self.name = inner.name
        self._inner = inner
        self._kind = kind

    def check(self, environ: Mapping[str, str], why: str, hint: str | None = None) -> None:
        with KINDS.theirs(self._kind):
            self._inner.check(environ, why, hint)

    def open(
        self, environ: Mapping[str, str], options: EndpointOptions
    ) -> AbstractContextManager[OpenEndpoint]:
        return self._open(environ, options)

    @contextmanager
    def _open(self, environ: Mapping[str, str], options: EndpointOptions) -> Iterator[OpenEndpoint]:
        with KINDS.theirs(self._kind):
            manager = self._inner.open(environ, options)
            opened = manager.__enter__()
        try:
            yield opened
        except BaseException as exc:  # the run's own: theirs only if their exit adds one
            with KINDS.theirs(self._kind, passing=exc):
                if manager.__exit__(type(exc), exc, exc.__traceback__):
                    return
            raise
        with KINDS.theirs(self._kind):
            manager.__exit__(None, None, None)
