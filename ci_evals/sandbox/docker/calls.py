"""Deadlines on a sandbox's calls to the Docker engine, and a lost engine named.

A container lives through a stage of many engine calls. The SDK's own default
(one 120 s read timeout per call, no bound on a loop of polls, nothing
retried) let a stalled engine hold a stage for 6 to 10 minutes and turned a
dropped connection into a tool failure the model saw again at every later
call. Here:

- every call has a deadline: `CONNECT_S` to connect, `CALL_S` for its answer;
  polls (an exec's or the container's state) and removals try for `POLL_S` at a
  time until theirs, so a sandbox closed from another thread (Ctrl-C) never
  waits long for a thread polling it;
- a refused, reset or dropped connection is tried again a few times (`_BACKOFF_S`:
  an engine restarting, a blip); a call left unanswered past its deadline is not
  (the engine is stalled: trying again would only wait again);
- what still fails is `Unanswered`, whose text names the engine (`address()`:
  `DOCKER_HOST`, else the default socket) and the call.

The exec stream itself (the command's output) is bounded by the command's own
timeout (`stream.pump`), a longer one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ci_evals.text import one_line

if TYPE_CHECKING:
    import docker

CONNECT_S = 5.0
CALL_S = 20.0
POLL_S = 3.0
REMOVE_S = 10.0  # how long a container's removal keeps trying before it is left to `gc`
_BACKOFF_S = (0.2, 0.5, 1.0)
DEFAULT_HOST = "unix:///var/run/docker.sock"

T = TypeVar("T")

_lock = threading.Lock()
_clients: dict[float, docker.DockerClient] = {}
# Both cleared by any answer. `failing`: the engine's last try went unanswered, so
# closing a sandbox (at Ctrl-C during a stall) tries its removal for `POLL_S`, not
# `REMOVE_S`. `gave_up`: a call gave up on it, so a new sandbox asks once, briefly
# (`check`), before waiting out a call's deadline for each stage still to come.
failing = threading.Event()
gave_up = threading.Event()


class Unanswered(Exception):
    """The engine did not answer a call (connection refused or lost, or no answer by
    its deadline); its text is one line naming the engine and the call."""


def address() -> str:
    """The engine this process talks to, as a user would name it."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def client(read_s: float = CALL_S) -> docker.DockerClient:
    """A client whose every call connects within `CONNECT_S` and is answered within
    `read_s` (one per deadline, shared: the SDK's pool is thread-safe). Raises
    `Unanswered` when the engine does not answer its first call (the API version)."""
    with _lock:
        made = _clients.get(read_s)
    if made is not None:
        return made
    import docker  # noqa: PLC0415 - heavy (requests); only when a container is wanted

    made = call(
        "a version query", lambda: docker.from_env(timeout=max(1, int(read_s))), deadline_s=read_s
    )
    # The pool takes one number; each request takes the pair (`_set_request_timeout`).
    made.api.timeout = (CONNECT_S, read_s)  # type: ignore[assignment]
    with _lock:
        return _clients.setdefault(read_s, made)


def unanswered(exc: BaseException) -> bool:
    """Whether `exc` (or what it wraps) says the engine did not answer, rather than
    answering with an error of its own (`docker.errors.APIError`)."""
    import requests  # noqa: PLC0415 - loaded with the SDK

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
            return True
        if isinstance(seen, OSError) and not isinstance(seen, requests.RequestException):
            return True  # a socket's own error (ECONNREFUSED, ENOENT, EPIPE)
        seen = seen.__cause__ or seen.__context__
    return False


def stalled(exc: BaseException) -> bool:
    """Whether `exc` is a call that got no answer by its deadline (not worth repeating)."""
    import requests  # noqa: PLC0415

    return isinstance(exc, requests.exceptions.ReadTimeout) or (
        isinstance(exc.__cause__, requests.exceptions.ReadTimeout)
    )


def call(
    what: str,
    fn: Callable[[], T],
    *,
    deadline_s: float = CALL_S,
    retry_stalls: bool = False,
    keep_trying: bool = False,
    given_up: Callable[[], bool] = lambda: False,
) -> T:
    """`fn()`, one engine call: a lost connection tried again `len(_BACKOFF_S)` times;
    with `retry_stalls` a try left unanswered too, with `keep_trying` both for as
    long as `deadline_s` lasts (a removal waiting for the engine to come back);
    never once `given_up()`. Then `Unanswered`. The engine's own errors pass."""
    start = time.monotonic()
    tries = 0
    while True:
        try:
            answer = fn()
        except Exception as exc:
            if not unanswered(exc):
                failing.clear()  # it answered, with an error of its own
                gave_up.clear()
                raise
            stall = stalled(exc)
            failing.set()
            elapsed = time.monotonic() - start
            wait = _BACKOFF_S[min(tries, len(_BACKOFF_S) - 1)]
            tries += 1
            spent = (
                not (retry_stalls or keep_trying)
                if stall
                else not keep_trying and tries > len(_BACKOFF_S)
            )
            if spent or elapsed + wait >= deadline_s or given_up():
                how = (
                    f"no answer within {elapsed:.0f} s"
                    if stall
                    else f"{_reason(exc)} ({tries} {'try' if tries == 1 else 'tries'})"
                )
                said = f"the Docker engine at {address()} did not answer {what}: {how}"
                gave_up.set()
                raise Unanswered(said) from exc
            if not stall:
                time.sleep(wait)
        else:
            failing.clear()
            gave_up.clear()
            return answer


def check() -> None:
    """Once the engine failed a call: one brief ping (`POLL_S`, no retry), so that
    each sandbox still to open does not wait out a call's deadline; `Unanswered`."""
    if gave_up.is_set():
        call("a ping (it failed an earlier call)", lambda: client(POLL_S).ping(), deadline_s=0)


def _reason(exc: BaseException) -> str:
    """The innermost cause's words: 'Connection refused', not the pool's wrapping."""
    seen: BaseException = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    text = getattr(seen, "strerror", None) or str(seen) or type(seen).__name__
    return one_line(str(text), 160)
