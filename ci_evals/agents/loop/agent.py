"""The `loop` backend: a bounded tool loop; the model decides, the tools act in the sandbox.

Each step sends the conversation (through the configured context strategy,
`context`) to the model with the five tools (`tools`), runs the tool calls it
answers with inside the stage's sandbox, and sends their outputs back.
`final_submit` ends the run `completed`; reaching the step ceiling
(`loop.max_steps`) ends it `limit` (`turns`). The stage's time and budget limits
end it as they end a `claude` stage; the runner checks the output limit after it.

It uses the `anthropic` client's Messages API, not claude-agent-sdk: the loop is
what is under test, so the step ceiling, the context strategy and every message
of the trajectory must be ours (docs/loop-agent.md, *Why the Messages API*). The
stub model speaks the Messages API, so the loop runs offline; the cost is priced
from each answer's usage (`endpoints.pricing`), as the forwarding proxy prices
it. The model calls leave the ci-evals process itself, for the endpoint in the
stage's environment; the sandbox gets no endpoint and the tools' environment no
token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import IO, Any

import anthropic

from ci_evals.agents import Abort, Progress, StageOutcome, StageRequest, TokenUsage, over_quota
from ci_evals.agents.loop.config import DEFAULT_MODEL, LoopConfig
from ci_evals.agents.loop.context import view
from ci_evals.agents.loop.tools import ToolBox, ToolRun
from ci_evals.endpoints.base import ENDPOINT_NAMES
from ci_evals.endpoints.pricing import PricedUsage, Pricing
from ci_evals.sandbox.base import SandboxLost, SandboxSpec
from ci_evals.sandbox.registry import open_sandbox
from ci_evals.text import one_line

# Sent when the model answers without a tool call: the loop acts only through tools.
NUDGE = "Continue with a tool call; call final_submit when the task is complete."
MODEL_RETRIES = 2  # the client's own retries of 408/409/429/5xx, with back-off
_ERROR_CHARS = 500
_PRICING = Pricing()
SESSION_HEADER = "X-Claude-Code-Session-Id"


class LoopAgent:
    """Run a stage as a bounded tool loop (see the module doc)."""

    name = "loop"

    async def run_stage(
        self,
        request: StageRequest,
        *,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StageOutcome:
        config = request.options if isinstance(request.options, LoopConfig) else LoopConfig()
        for folder in (request.trajectory_path.parent, request.stderr_path.parent, request.cwd):
            folder.mkdir(parents=True, exist_ok=True)
        session = str(uuid.uuid4())
        client = _client(request.env, session)
        if isinstance(client, str):
            request.stderr_path.write_text(client + "\n", encoding="utf-8")
            return StageOutcome(status="error", error=client, model_ran=False)
        async with client:
            outcome = await self._run(request, config, client, abort, on_progress)
        outcome.session_id = session
        return outcome

    async def _run(
        self,
        request: StageRequest,
        config: LoopConfig,
        client: anthropic.AsyncAnthropic,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None,
    ) -> StageOutcome:
        spec = SandboxSpec(
            writable=(request.cwd, *request.plugin_dirs, *request.writable),
            disk_bytes=request.max_output_bytes,
        )
        with (
            open_sandbox(request.sandbox, spec) as sandbox,
            request.trajectory_path.open("w", encoding="utf-8") as trajectory,
            request.stderr_path.open("w", encoding="utf-8") as stderr,
        ):
            tools = ToolBox(
                sandbox=sandbox,
                cwd=request.cwd,
                env={k: v for k, v in request.env.items() if k not in ENDPOINT_NAMES},
                output_chars=config.output_chars,
                command_timeout_s=config.command_timeout_s,
            )
            run = _StageLoop(request, config, tools, trajectory, on_progress)
            task = asyncio.ensure_future(run.drive(client))
            loop = asyncio.get_running_loop()
            aborted: list[bool] = []

            def on_abort() -> None:
                aborted.append(True)
                loop.call_soon_threadsafe(task.cancel)
                sandbox.close()  # ends a command the loop is waiting for

            unsubscribe = abort.on_set(on_abort)
            try:
                outcome = await asyncio.wait_for(task, timeout=request.timeout_s)
            except asyncio.TimeoutError:
                sandbox.close()
                outcome = run.end("limit", "time", f"timed out after {request.timeout_s:g} s")
            except asyncio.CancelledError:
                if not aborted:
                    raise
                outcome = run.end("interrupted", None, "the run was interrupted")
            except anthropic.APIStatusError as exc:
                outcome = run.api_failure(exc)
            except anthropic.APIError as exc:  # connection, timeout, bad response
                outcome = run.end("error", None, f"model call failed: {type(exc).__name__}: {exc}")
            except SandboxLost as exc:  # its engine or container is gone: no tool can run
                outcome = run.end("error", None, str(exc))
            finally:
                unsubscribe()
            if outcome.error:
                stderr.write(outcome.error + "\n")
            return over_quota(outcome, sandbox, request)


def _client(env: Mapping[str, str], session: str) -> anthropic.AsyncAnthropic | str:
    """A client for the stage's endpoint only, or why there is none. Credentials are
    passed explicitly, so the client reads none from our own environment or files."""
    base_url = env.get("ANTHROPIC_BASE_URL")
    key, token = env.get("ANTHROPIC_API_KEY"), env.get("ANTHROPIC_AUTH_TOKEN")
    if not base_url or not (key or token):
        return "no model endpoint in the stage's environment (ANTHROPIC_BASE_URL and a key)"
    credential = {"api_key": key} if key else {"auth_token": token}
    return anthropic.AsyncAnthropic(
        base_url=base_url,
        max_retries=MODEL_RETRIES,
        # One id per stage run, in the header the CLI uses: the stub model (variants,
        # fault counters) and the proxy's record tell conversations apart by it.
        default_headers={SESSION_HEADER: session},
        **credential,
    )


class _StageLoop:
    """One stage's loop: the history, the step count, what it cost, the trajectory."""

    def __init__(
        self,
        request: StageRequest,
        config: LoopConfig,
        tools: ToolBox,
        trajectory: IO[str],
        on_progress: Callable[[Progress], None] | None,
    ) -> None:
        self.request = request
        self.config = config
        self.tools = tools
        self.trajectory = trajectory
        self.on_progress = on_progress
        self.model = request.model or DEFAULT_MODEL
        self.history: list[dict[str, Any]] = [{"role": "user", "content": request.prompt}]
        self.steps = 0
        self.usage = TokenUsage()
        self.cost_usd = 0.0
        self.api_ms = 0
        self.records = 0
        self.last_tool: str | None = None
        self.last_text: str | None = None
        self.started = time.monotonic()

    async def drive(self, client: anthropic.AsyncAnthropic) -> StageOutcome:
        config = self.config
        definitions = self.tools.definitions(config.tools)
        self.record(
            "LoopStarted",
            model=self.model,
            sandbox=self.request.sandbox,
            config=dataclasses.asdict(config),
            prompt=self.request.prompt,
        )
        while self.steps < config.max_steps:
            budget = self.request.max_budget_usd
            if budget is not None and self.cost_usd >= budget:
                return self.end("limit", "budget", f"reached max_budget_usd ({budget})")
            messages = view(self.history, config.context, config.keep_last)
            asked = time.monotonic()
            response = await client.messages.create(
                model=self.model,
                max_tokens=config.max_tokens,
                system=config.system_prompt,
                tools=definitions,  # type: ignore[arg-type]
                messages=messages,  # type: ignore[arg-type]
                timeout=max(1.0, self.time_left()),
            )
            self.api_ms += int((time.monotonic() - asked) * 1000)
            self.steps += 1
            content = [_block(block) for block in response.content]
            self._count(response.model or self.model, response.usage.model_dump())
            self.record(
                "AssistantMessage",
                step=self.steps,
                model=response.model,
                stop_reason=response.stop_reason,
                content=content,
                usage=response.usage.model_dump(exclude_none=True),
                cost_usd=round(self.cost_usd, 6),
                sent_chars=len(json.dumps(messages)),
            )
            self.history.append({"role": "assistant", "content": content})
            texts = [b["text"] for b in content if b.get("type") == "text" and b.get("text")]
            self.last_text = texts[-1] if texts else self.last_text
            calls = [b for b in content if b.get("type") == "tool_use"]
            if not calls:
                self.history.append({"role": "user", "content": NUDGE})
                self.record("Nudge", step=self.steps, text=NUDGE)
                self._progress()
                continue
            results: list[dict[str, Any]] = []
            for call in calls:
                self.last_tool = str(call["name"])
                if call["name"] == "final_submit" and "final_submit" in config.tools:
                    summary = call["input"].get("summary")
                    self._tool_record(call, "Submitted.", is_error=False)
                    self.last_text = summary if isinstance(summary, str) else self.last_text
                    return self.end("completed", None, None)
                results.append(await self._call(call))
            self.history.append({"role": "user", "content": results})
            self._progress()
        return self.end(
            "limit",
            "turns",
            f"halted at the step ceiling ({config.max_steps} steps) without final_submit",
        )

    async def _call(self, call: dict[str, Any]) -> dict[str, Any]:
        name = str(call["name"])
        given = call["input"] if isinstance(call["input"], dict) else {}
        if name in self.config.tools:
            ran = await asyncio.to_thread(self.tools.call, name, given, time_left=self.time_left())
        else:
            offered = ", ".join(self.config.tools)
            ran = ToolRun(f"no tool named {name!r}; the tools are: {offered}", is_error=True)
        self._tool_record(
            call, ran.output, is_error=ran.is_error, exit_code=ran.exit_code,
            timed_out=ran.timed_out, duration_s=round(ran.duration_s, 3),
        )  # fmt: skip
        return {
            "type": "tool_result",
            "tool_use_id": call["id"],
            "content": ran.output,
            "is_error": ran.is_error,
        }

    def _tool_record(self, call: dict[str, Any], output: str, **fields: Any) -> None:
        # `tool`, not `name`: only the call itself is a tool use to grading.kinds.trajectory.
        self.record(
            "ToolResult",
            step=self.steps,
            tool_use_id=call["id"],
            tool=call["name"],
            output=output,
            **fields,
        )

    def _count(self, model: str, usage: Mapping[str, Any]) -> None:
        self.usage.add(usage)
        self.cost_usd += _PRICING.cost(model, PricedUsage.from_api(usage))

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(self.steps, self.cost_usd, self.last_tool))

    def time_left(self) -> float:
        return self.request.timeout_s - (time.monotonic() - self.started)

    def record(self, kind: str, **fields: Any) -> None:
        """One trajectory line (flushed: a killed run keeps what it did)."""
        line = {
            "time": time.time(),
            "elapsed_s": round(time.monotonic() - self.started, 4),
            "type": kind,
            **fields,
        }
        self.trajectory.write(json.dumps(line, default=str) + "\n")
        self.trajectory.flush()
        self.records += 1

    def api_failure(self, exc: anthropic.APIStatusError) -> StageOutcome:
        detail = f"model call failed: HTTP {exc.status_code}: {exc.message}"
        if exc.status_code == 402:  # the forwarding proxy: the run's hard budget is spent
            return self.end("limit", "budget", detail)
        outcome = self.end("error", None, detail)
        outcome.api_error_status = exc.status_code  # 5xx/529: `agents.retry` runs it again
        return outcome

    def end(self, status: Any, limit: Any, error: str | None) -> StageOutcome:
        """The outcome, and the trajectory's last line saying it."""
        halted = status == "limit" and limit == "turns"
        subtype = "halted" if halted else status
        self.record(
            "ResultMessage",
            subtype=subtype,
            steps=self.steps,
            cost_usd=self.cost_usd,
            usage=dataclasses.asdict(self.usage),
            error=error,
            result=self.last_text,
        )
        return StageOutcome(
            status=status,
            limit=limit,
            error=None if error is None else one_line(error, _ERROR_CHARS, ellipsis="…"),
            turns=self.steps,
            usage=self.usage,
            cost_usd=self.cost_usd,
            duration_ms=int((time.monotonic() - self.started) * 1000),
            duration_api_ms=self.api_ms,
            wall_s=time.monotonic() - self.started,
            result_subtypes=[subtype],
            final_text=self.last_text,
            messages=self.records,
        )


def _block(block: Any) -> dict[str, Any]:
    """An answer's content block as the plain dict the next request sends back."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        given = block.input if isinstance(block.input, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": given}
    dumped: dict[str, Any] = block.model_dump(exclude_none=True)
    return dumped
