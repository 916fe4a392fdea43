"""Retry infrastructure errors — and nothing else.

When the model endpoint fails the stage says nothing about the agent. An
endpoint that says how it failed a stage (the forwarding proxy,
`endpoints.faults`) decides two things here: the stage is an `error` naming
the fault even when it ended as a timeout or on the budget
(`agents.blame_endpoint`), and it is run again only when the fault is one the
proxy could not retry itself (`EndpointFault.retry_stage`): one layer owns the
retries, so an outage costs a few requests per stage, not the product of three
layers' tries. An endpoint that does not say (the stub) leaves it to the CLI's
API error: 5xx and 529 are run again.

`RetryingAgent` wraps any backend (the `Agent` protocol), so the stage agent and
the reviewers are retried alike, with exponential backoff (`ci_evals.backoff`); a
timeout, a limit, a CLI error or a failed verdict is a result, never retried.
Each attempt starts from the same files (the request's `checkpoint`, restored
before each next one; when it cannot be, the stage is not run again), and each
failed attempt's trajectory and stderr are kept beside the final ones, its cost
added. Who retries what: docs/run.md (*Infrastructure errors*).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from ci_evals.agents import (
    Abort,
    Agent,
    Checkpoint,
    Progress,
    StageOutcome,
    StageRequest,
    blame_endpoint,
)
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
            began = time.monotonic()
            outcome = await self.agent.run_stage(request, abort=abort, on_progress=on_progress)
            outcome.attempts = attempt
            self.attempts[request.trajectory_path] = attempt
            if (
                not _worth_retrying(request, outcome, began)
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


def _worth_retrying(request: StageRequest, outcome: StageOutcome, began: float) -> bool:
    """Whether the attempt that began at `began` failed at the endpoint in a way
    no other layer retried (module doc); the outcome then names the fault."""
    if outcome.status == "interrupted":
        return False
    if request.endpoint_fault is None:  # the endpoint does not say: the CLI's error does
        return outcome.infrastructure_error
    fault = request.endpoint_fault(began)
    blame_endpoint(outcome, fault)
    return fault is not None and outcome.endpoint_fault is not None and fault.retry_stage


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
