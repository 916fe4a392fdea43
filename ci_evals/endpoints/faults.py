"""What the forwarding proxy saw the model API do wrong, per caller.

The proxy hands every stage (with its reviewers) its own token (`proxy.ProxyCaller`),
so a failure is told to the stage whose request it was, not to whichever stage
asks next. A caller's *fault* is the failure of its last request, set as soon
as an attempt fails (a request the proxy is still retrying when the stage's
time runs out counts) and cleared when a request of its succeeds. The agent
wrapper reads it when a stage did not complete (`agents.retry`): such a stage
is an `error` naming the endpoint's last answer, not the agent's `limit`.

Who retries what is decided in one place, here (`docs/run.md` has the table):
the proxy retries every failure that reached no client byte (429, 5xx, a
connection refused); what it cannot retry, because the client already holds
part of the answer or the request may have been billed (a stream cut, a
connection lost after the request left), is worth running the stage again
(`EndpointFault.retry_stage`). The CLI's own retries are off behind the proxy.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from ci_evals.text import one_line

# The statuses that say the API (not the request) failed: worth another try.
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
_FAULT_CHARS = 300


@dataclass(frozen=True)
class EndpointFault:
    """How a caller's model requests last failed at the endpoint, not at the agent."""

    text: str  # one line: "HTTP 529 overloaded_error: Overloaded (5 tries)"
    # Worth running the stage again: a fault the endpoint could not retry itself
    # (a stream cut after the agent got part of it, a connection lost after the
    # request left). False: the endpoint already retried it as far as its policy goes.
    retry_stage: bool
    at: float  # time.monotonic() when it was seen


class Faults:
    """The last fault of each caller; thread-safe (every proxy handler writes it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, EndpointFault] = {}

    def failed(self, caller: str, text: str, *, retry_stage: bool) -> None:
        fault = EndpointFault(
            one_line(text, _FAULT_CHARS, ellipsis="…"), retry_stage, time.monotonic()
        )
        with self._lock:
            self._last[caller] = fault

    def succeeded(self, caller: str) -> None:
        with self._lock:
            self._last.pop(caller, None)

    def last(self, caller: str, since: float) -> EndpointFault | None:
        with self._lock:
            fault = self._last.get(caller)
        return fault if fault is not None and fault.at >= since else None


def status_fault(status: int, body: bytes, tries: int) -> str:
    """One line for an error answer: `HTTP 529 overloaded_error: Overloaded (5 tries)`."""
    kind, message = "", ""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        kind, message = str(error.get("type") or ""), str(error.get("message") or "")
    said = ": ".join(part for part in (kind, message) if part)
    tried = f" ({tries} tries)" if tries > 1 else ""
    return f"the model API answered HTTP {status}{' ' + said if said else ''}{tried}"
