"""Hooks that keep a stage waiting, from the CLI's hook frames as they arrive.

With `include_hook_events` the CLI writes `hook_started` and `hook_response`
frames (`{"type": "system", "subtype": "hook_started", "hook_id": ...,
"hook_name": "SessionStart:startup", "hook_event": "SessionStart"}`). The SDK
yields them only once the session is initialised, and a SessionStart hook runs
before that: a hook that waits on a network the sandbox does not have (`npx -y
PKG` retries for 71 s) holds the stage with no message at all, then the SDK's
initialize times out at 60 s. So the transport hands each frame here as it
reads it, and a hook still running after `SLOW_HOOK_S` is said, naming the
plugin's command (`config.plugin_hooks.what_runs`); at the stage's end, a hook
that never answered is part of the stage's error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ci_evals.config.plugin_hooks import Hook, what_runs

SLOW_HOOK_S = 10.0  # a SessionStart hook that prints its context takes well under 1 s
_NAME_CHARS = 100


@dataclass(frozen=True)
class _Running:
    name: str  # "SessionStart:startup"
    started: float  # time.monotonic()


class HookWatch:
    """The plugin's hooks running now; `start` gives it where to say a slow one."""

    def __init__(self, hooks: Sequence[Hook], after_s: float = SLOW_HOOK_S) -> None:
        self._hooks = tuple(hooks)
        self._after_s = after_s
        self._running: dict[str, _Running] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._say: Callable[[str], None] | None = None

    def start(self, say: Callable[[str], None]) -> None:
        self._say = say

    def see(self, frame: Mapping[str, Any]) -> None:
        """One frame of the CLI's stdout, in the event loop that reads it."""
        if frame.get("type") != "system":
            return
        ident = frame.get("hook_id")
        if not isinstance(ident, str):
            return
        if frame.get("subtype") == "hook_started":
            name = str(frame.get("hook_name") or frame.get("hook_event") or "a hook")
            self._running[ident] = _Running(name[:_NAME_CHARS], time.monotonic())
            loop = asyncio.get_running_loop()
            self._timers[ident] = loop.call_later(self._after_s, self._slow, ident)
        elif frame.get("subtype") == "hook_response":
            self._running.pop(ident, None)
            timer = self._timers.pop(ident, None)
            if timer is not None:
                timer.cancel()

    def still_running(self) -> str | None:
        """The hooks that have not answered yet, as one phrase; None when none."""
        now = time.monotonic()
        said = [self._text(hook, now - hook.started) for hook in self._running.values()]
        return "; ".join(said) or None

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _slow(self, ident: str) -> None:
        hook = self._running.get(ident)
        if hook is not None and self._say is not None:
            self._say(self._text(hook, self._after_s))

    def _text(self, hook: _Running, seconds: float) -> str:
        command = what_runs(hook.name, self._hooks)
        where = f" ({command})" if command else ""
        return f"hook {hook.name}{where} still running after {seconds:.0f} s"
