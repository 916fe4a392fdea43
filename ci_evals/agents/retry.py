"""Retry infrastructure errors — and nothing else.

When the model endpoint fails (HTTP 5xx, 529 overloaded) the stage says
nothing about the agent: `RetryingAgent` runs it again, with exponential
backoff (`ci_evals.backoff`), a bounded number of times. A timeout, a turn or budget limit, an
error of the CLI itself, and a failed verdict are never retried: they are
results.

`RetryingAgent` wraps any backend (the `Agent` protocol), so the stage agent
and the reviewers are retried alike. Each failed attempt's trajectory and
stderr are kept beside the final ones (`trajectory.attempt1.jsonl`, ...), its
cost is added to the outcome's. A request with a `checkpoint` (the runner's
stages) starts every attempt from the same files: the checkpoint is saved
before the first attempt and restored before each next one, so nothing a
failed attempt wrote, changed or deleted reaches the next or its verdict. When
it cannot be restored the stage is not run again: its outcome is the failed
attempt's, with why.

Set `CLAUDE_CODE_MAX_RETRIES` (passed through to the CLI) to tune the CLI's
own retries within one attempt; these retries come on top.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from ci_evals.agents import Abort, Agent, Checkpoint, Progress, StageOutcome, StageRequest
from ci_evals.backoff import RetryPolicy

# A stage is minutes of work: wait 5 s, then 10 s, before its second and third try.
STAGE_RETRY = RetryPolicy(attempts=3, first_s=5.0, factor=2.0, cap_s=60.0)


class RetryingAgent:
    """An `Agent` that runs a stage again while it ends in an infrastructure error."""

    def __init__(
        self,
        agent: Agent,
        policy: RetryPolicy | None = None,
        on_retry: Callable[[StageRequest, StageOutcome, int, float], None] | None = None,
    ) -> None:
        self.agent = agent
        self.name = agent.name
        self.policy = policy or STAGE_RETRY
        self.on_retry = on_retry  # (request, failed outcome, attempt, delay) -> None
        # Attempts per trajectory path, for the record (the outcome has no field for it).
        self.attempts: dict[Path, int] = {}

    async def run_stage(
        self,
        request: StageRequest,
        *,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StageOutcome:
        checkpoint = request.checkpoint if self.policy.attempts > 1 else None
        if checkpoint is not None:
            await asyncio.to_thread(checkpoint.save)
        try:
            return await self._attempts(request, checkpoint, abort, on_progress)
        finally:
            if checkpoint is not None:
                await asyncio.to_thread(checkpoint.discard)

    async def _attempts(
        self,
        request: StageRequest,
        checkpoint: Checkpoint | None,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None,
    ) -> StageOutcome:
        attempt = 1
        spent = 0.0
        while True:
            outcome = await self.agent.run_stage(request, abort=abort, on_progress=on_progress)
            outcome.attempts = attempt
            self.attempts[request.trajectory_path] = attempt
            if (
                not outcome.infrastructure_error
                or not self.policy.retries_left(attempt)
                or abort.is_set
            ):
                outcome.cost_usd += spent
                return outcome
            spent += outcome.cost_usd
            delay = self.policy.wait(attempt)
            _keep_attempt(request, attempt)
            if self.on_retry is not None:
                self.on_retry(request, outcome, attempt, delay)
            if await _sleep_unless(abort, delay):
                outcome.cost_usd = spent  # this attempt's cost is already in `spent`
                return outcome
            if checkpoint is not None:
                try:
                    await asyncio.to_thread(checkpoint.restore)
                except OSError as exc:  # never retry on top of a failed attempt's files
                    outcome.cost_usd = spent
                    outcome.error = (
                        f"{outcome.error}; not retried: the workspace could not be "
                        f"restored ({exc.strerror or exc})"
                    )
                    return outcome
            attempt += 1


def _keep_attempt(request: StageRequest, attempt: int) -> None:
    """Move a failed attempt's trajectory and stderr aside (`*.attemptN.*`)."""
    for path in (request.trajectory_path, request.stderr_path):
        with contextlib.suppress(OSError):
            path.rename(path.with_name(f"{path.stem}.attempt{attempt}{path.suffix}"))


async def _sleep_unless(abort: Abort, seconds: float) -> bool:
    """Sleep; True if `abort` was set meanwhile (then return at once)."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def wake() -> None:
        loop.call_soon_threadsafe(woken.set)

    unsubscribe = abort.on_set(wake)
    try:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(woken.wait(), seconds)
    finally:
        unsubscribe()
    return abort.is_set
