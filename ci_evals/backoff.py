"""How long to wait before trying again: one policy, one `Retry-After` reader.

Every retry loop in ci-evals (the agent wrapper re-running a stage whose
endpoint failed, the proxy retrying the API's 429/529, the GitHub client
retrying a 5xx or a rate limit) asks this module the same two questions:

- `requested_wait(headers)`: did the server say how long? `retry-after-ms`
  (as the Anthropic API sends it) first, then `retry-after` — whole or decimal
  seconds, or an HTTP date (RFC 9110 §10.2.3; a date in the past is 0). Anything
  else (garbage, a negative number, `inf`/`nan`) is no answer: the caller backs
  off on its own rather than trusting it.
- `RetryPolicy.wait(attempt, requested)`: the server's wait when it gave one,
  else `first_s * factor**(attempt-1)`, both capped at `cap_s`; with `jitter`,
  drawn from the backoff's upper half, so clients that failed together do not
  come back together.

Whether a wait above the cap is waited (capped) or given up on is the caller's
(`exceeds_cap`): the proxy caps, GitHub gives up. `total_s` also bounds the whole
operation, requests and waits together (`RetryPolicy.deadline()`). Stdlib only:
the GitHub client is on a light path. Who retries what: docs/run.md.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timezone
from typing import Protocol

# RFC 9110 delay-seconds is digits only; a decimal point is tolerated (some
# servers send "1.5"). A sign, an exponent, `inf` or `nan` is not a wait.
_SECONDS = re.compile(r"\d{1,12}(?:\.\d{1,9})?")


class Headers(Protocol):
    """What `requested_wait` reads: `http.client.HTTPMessage`, `email.message.Message`,
    a plain dict with lower-case keys."""

    def get(self, name: str, /) -> object: ...


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` value asks for, or None when it is missing or not a wait."""
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; `-0000` parses as naive
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def parse_retry_after_ms(value: str | None) -> float | None:
    """Seconds a `retry-after-ms` value (milliseconds) asks for, or None."""
    if value is None:
        return None
    text = value.strip()
    return float(text) / 1000.0 if _SECONDS.fullmatch(text) else None


def requested_wait(headers: Headers, now: float | None = None) -> float | None:
    """The server's own wait from `retry-after-ms` or `retry-after`, or None."""
    ms = headers.get("retry-after-ms")
    wait = parse_retry_after_ms(ms if isinstance(ms, str) else None)
    if wait is not None:
        return wait
    value = headers.get("retry-after")
    return parse_retry_after(value if isinstance(value, str) else None, now)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded tries with capped exponential backoff.

    `attempts` counts the first try. `sleep` is how a synchronous caller waits
    (a test passes `list.append` to see the waits); async callers sleep on their own.
    `total_s` bounds an operation's requests and waits together, on `clock`
    (a test whose `sleep` only records passes a clock that the records advance).
    """

    attempts: int = 3
    first_s: float = 1.0
    factor: float = 2.0
    cap_s: float = 60.0
    jitter: bool = False
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    total_s: float | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.first_s < 0 or self.cap_s < 0 or self.factor < 1:
            raise ValueError("first_s and cap_s must not be negative, factor at least 1")
        if self.total_s is not None and self.total_s <= 0:
            raise ValueError("total_s must be positive")

    def deadline(self) -> Deadline:
        """The overall deadline of one operation under this policy, starting now."""
        return Deadline(self.total_s, self.clock)

    def retries_left(self, attempt: int) -> bool:
        """Whether failed try number `attempt` (1-based) may be followed by another."""
        return attempt < self.attempts

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed try `attempt` when the server named no wait."""
        # min() before the power grows: factor**attempt overflows a float near 1,000 tries.
        delay = self.first_s
        for _ in range(attempt - 1):
            delay *= self.factor
            if delay >= self.cap_s:
                delay = self.cap_s
                break
        delay = min(self.cap_s, delay)
        if self.jitter:
            delay = delay / 2 + random.uniform(0.0, delay / 2)  # noqa: S311 - jitter, not crypto
        return delay

    def exceeds_cap(self, requested: float | None) -> bool:
        """The server asked for longer than this policy ever waits."""
        return requested is not None and requested > self.cap_s

    def wait(self, attempt: int, requested: float | None = None) -> float:
        """The wait after failed try `attempt`: the server's (capped) or the backoff."""
        if requested is not None:
            return min(self.cap_s, max(0.0, requested))
        return self.backoff(attempt)


class Deadline:
    """One bound on a whole operation, its requests and its waits (`RetryPolicy.total_s`);
    `total_s` None: no bound."""

    def __init__(self, total_s: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.total_s = total_s
        self._clock = clock
        self._started = clock()

    def left(self) -> float:
        """Seconds left (never negative; infinite without a bound)."""
        if self.total_s is None:
            return float("inf")
        return max(0.0, self.total_s - (self._clock() - self._started))

    def passed(self) -> bool:
        return self.left() <= 0

    def bounded(self, timeout: float) -> float:
        """`timeout`, shortened to what is left."""
        return min(timeout, self.left())

    def cuts(self, timeout: float) -> bool:
        """Whether what is left is shorter than `timeout`: a time-out then is the deadline's."""
        return self.left() < timeout
