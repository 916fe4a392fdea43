"""The Endpoint Protocol: where an agent's model calls go.

An endpoint is chosen by `--model` (`registry.endpoint_for`): `stub:PATH`
serves a script offline; anything else is the real Anthropic API behind a
local forwarding proxy that holds the key (the agent only ever gets a
per-run token). `open()` starts it for as long as the command runs and gives
an `OpenEndpoint`: what the agent's environment gets, the model to ask for,
and what results record about it.

A backend is an `EndpointKind` (registered by name in `registry`, or by a
package's `ci_evals.endpoints` entry point): `--model NAME:REST` picks kind
NAME, which reads REST into its options (`load`), says whether it can run
here (`available`) and makes the `Endpoint` (`create`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ci_evals.endpoints.faults import EndpointFault
    from ci_evals.endpoints.ledger import Metered
    from ci_evals.results.model import EndpointMiss, ReplayedFrom

# The variables that point the CLI at a model: set only from an endpoint.
ENDPOINT_NAMES: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    # An endpoint that retries the API itself (the forwarding proxy) turns the
    # CLI's own retries off: one layer owns the retry policy (docs/run.md).
    "CLAUDE_CODE_MAX_RETRIES",
)


def has_credential(environ: Mapping[str, str]) -> bool:
    """Whether `environ` holds a way to reach the real model (a key or a token)."""
    return bool(environ.get("ANTHROPIC_API_KEY") or environ.get("ANTHROPIC_AUTH_TOKEN"))


@runtime_checkable
class EndpointCaller(Protocol):
    """One caller of an endpoint (a stage with its reviewers): the environment
    its CLIs get, and afterwards the requests of theirs it had no answer for."""

    @property
    def env(self) -> Mapping[str, str]: ...

    def misses(self) -> list[EndpointMiss]: ...


@runtime_checkable
class FaultReportingCaller(EndpointCaller, Protocol):
    """An `EndpointCaller` whose endpoint sees the API fail (the forwarding proxy)."""

    def fault(self, since: float) -> EndpointFault | None:
        """The fault of this caller's last request, if it failed after `since`
        (`time.monotonic()`), even one still being retried; None if it succeeded."""


@dataclass(frozen=True)
class OpenEndpoint:
    """A started endpoint."""

    name: str  # recorded in results: "anthropic", "stub:PATH" or "replay:RUN_DIR"
    env: Mapping[str, str] = field(repr=False)  # the agent's ENDPOINT_NAMES (URL, run token)
    model: str | None  # the model to ask for (None: the CLI's default)
    # An endpoint that can tell callers apart (the stub) hands out an `EndpointCaller` per
    # caller; None: every caller uses `env`, and nothing can go unanswered.
    # It is told the place in the plan of the caller's unit (scenario and repeat):
    # what a scripted endpoint answers may depend on it, never on call order.
    new_caller: Callable[[int | None], EndpointCaller] | None = field(default=None, repr=False)
    # What it forwarded so far, for the run's cost (the forwarding proxy sees the
    # agent's own calls too); None: it does not meter (the stub, no endpoint).
    meter: Callable[[], Metered] | None = field(default=None, repr=False)
    # An endpoint serving a recording's answers says what made them (results record
    # it, and reports label the run with it); None: it asks a model (or a script).
    replayed_from: ReplayedFrom | None = None
    # What a reader of the run's scores should know of the endpoint, one line each
    # (the stub's rotating variants: scores that change between runs by design);
    # `run` prints them when the scores changed (`run.score_change`).
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class EndpointOptions:
    default_model: str | None = None  # the suite's `model:`
    budget_usd: float | None = None  # a hard budget the endpoint enforces, if it can
    record_path: Path | None = None  # every exchange as JSON lines, if it can
    # Requests it forwards at once (the rest wait their turn), if it forwards; None:
    # its own default.
    max_concurrency: int | None = None


class Endpoint(Protocol):
    name: str

    def check(self, environ: Mapping[str, str], why: str, hint: str | None = None) -> None:
        """Fail (one line: `why` needs it, `hint`) before anything starts when it
        cannot be reached."""

    def open(
        self, environ: Mapping[str, str], options: EndpointOptions
    ) -> AbstractContextManager[OpenEndpoint]: ...


class EndpointKind(Protocol):
    """One endpoint backend, as the registry knows it."""

    @property
    def name(self) -> str:
        """What `--model NAME:...` calls it."""

    def load(self, value: str | None) -> object:
        """Its options from what follows `NAME:` in `--model` (None: no `--model`, for
        the default kind); a mistake is a `UserError` naming `--model`."""

    def available(self) -> str | None:
        """Why it cannot run on this machine, in one line; None when it can."""

    def create(self, options: object) -> Endpoint:
        """The endpoint for what `load` gave."""
