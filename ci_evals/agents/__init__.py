"""Agent backends: what runs one stage, behind a Protocol and a name registry.

A backend takes a `StageRequest` (prompt, working folder, plugin, limits, the
exact environment, where to write the trajectory and stderr) and returns a
`StageOutcome` (status, which limit was hit, turns, tokens, cost, durations).
The runner never knows how the agent is driven; `claude` drives the real
claude-agent-sdk, `loop` a bounded tool loop over the Messages API.
Backends are imported lazily by name: the SDK is heavy.

Outcome statuses:

- `completed` — the agent finished its turn; graders decide pass or fail later;
- `limit` — a turn, time or budget limit ended it (a failure, not an error);
- `error` — the CLI failed, reported `is_error`, or crashed;
- `interrupted` — the run was interrupted (Ctrl-C, SIGTERM) during the stage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ci_evals.endpoints.faults import EndpointFault
from ci_evals.sandbox.base import ON_HOST, MemoryWatch, Sandbox, SandboxConfig

OutcomeStatus = Literal["completed", "limit", "error", "interrupted"]
LimitKind = Literal["turns", "time", "budget", "output"]


class Checkpoint(Protocol):
    """The stage's starting state, for a wrapper that runs the stage again
    (`ci_evals.agents.retry`; `ci_evals.fs.checkpoint.FolderCheckpoint` implements it)."""

    def save(self) -> None: ...

    def restore(self) -> None: ...

    def discard(self) -> None: ...


# A case unit's copy of the CLI's stdout (`StageRequest.stream_path`), beside its
# trajectory; at most this much, then `STREAM_CUT` as its last line.
STREAM_FILE = "stream.jsonl"
STREAM_MAX_BYTES = 64 << 20
STREAM_CUT = '{"ci-evals":"cut: the CLI wrote more than this file keeps"}\n'


@dataclass(frozen=True)
class Limits:
    """Per-stage limits (the suite's `limits:`); `None` means no limit of that kind."""

    max_turns: int = 50
    timeout_s: float = 1800.0
    max_budget_usd: float | None = None
    # What the workspace may hold after the stage (bytes, every file's size as
    # copying would write it): a hostile agent's `truncate -s 8T` must not be
    # hashed for hours and copied into the run folder.
    max_output_bytes: int = 1 << 30
    # How many entries (files, folders, links) the workspace may hold after the
    # stage: 100,000 one-byte files fit any byte limit, yet each would be hashed,
    # saved into the run folder and listed in results.json.
    max_output_files: int = 10_000


@dataclass(frozen=True)
class StageTools:
    """What a stage asks of the agent beyond its prompt (a `claude plugin eval` case's
    `execution`): tools taken away or granted, Claude Code's own system prompt (which those
    cases run with; ci-evals' stages otherwise run with the SDK's empty one) and
    text appended to it. Only the `claude` backend takes them; a suite that sets
    them for another is refused at load."""

    disallowed: tuple[str, ...] = ()
    claude_code_prompt: bool = False
    append_system_prompt: str | None = None
    # The operator's grant (`suite.tool_grant`): the built-in tools the model is
    # offered (None: every one) and the permission rules that allow calls; with it
    # the CLI runs in `dontAsk` mode, so a call no rule allows is a tool error the
    # model sees, as in `claude plugin eval`'s child.
    offered: tuple[str, ...] | None = None
    allowed: tuple[str, ...] = ()


# How much of a CLI's stderr a stage keeps at most (less when its `max_output_bytes` is less).
STDERR_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class StageRequest:
    """Everything one stage run needs; the backend adds nothing from elsewhere."""

    prompt: str
    cwd: Path
    # The plugin copy the agent loads as a local plugin; None: no plugin at all (the
    # run without it, `ablation: with-without`): none loaded, none mounted.
    plugin_dir: Path | None
    env: Mapping[str, str]  # the complete process environment (see agent_env)
    trajectory_path: Path  # JSON lines, one per SDK message
    stderr_path: Path  # the CLI's stderr
    # The CLI's stdout as it wrote it (stream-json lines), STREAM_MAX_BYTES at most:
    # a `claude plugin eval` case's `trace` is these lines. None: not kept.
    stream_path: Path | None = None
    # At most this much of it is kept; one line marks the cut (the agent can write there).
    stderr_max_bytes: int = STDERR_MAX_BYTES
    model: str | None = None  # None: the CLI's default
    max_turns: int = 50
    timeout_s: float = 1800.0
    max_budget_usd: float | None = None
    # What the sandbox's writable folders may grow by while it runs (the stage's
    # limits.max_output_mb): past it the sandbox kills everything, `limit: output`.
    max_output_bytes: int = 1 << 30
    # Where it runs (a sandbox kind and its options) and what it may write there
    # besides `cwd` and `plugin_dir`: the workspace root, the private HOME/TMP.
    sandbox: SandboxConfig = ON_HOST
    writable: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()  # what it may read there but never write (a reviewer's rubrics)
    # A session transcript the CLI resumes (`--resume`: a case's history_file, its copy).
    resume: Path | None = None
    tools: StageTools = StageTools()
    # MCP servers given to the CLI besides the plugin's (`--mcp-config`): a case's
    # standalone mocks (`workspace.mocks`); only the `claude` backend takes them.
    mcp_servers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Ends the stage when it says so of a trajectory record (still graded, as a
    # completed stage): a case's mock stand-in aborted the run (`workspace.mocks`).
    stop: Callable[[Mapping[str, Any]], bool] | None = field(default=None, compare=False)
    # The backend's own settings from the suite (`loop:` -> `agents.loop.config.LoopConfig`
    # for the `loop` backend); a backend that has none ignores it.
    options: object | None = field(default=None, compare=False)
    # What the stage starts from; a retrying wrapper saves it before the first
    # attempt and restores it before the next. Backends themselves ignore it.
    checkpoint: Checkpoint | None = field(default=None, compare=False)
    # How the endpoint last failed this stage's requests since a time
    # (`endpoints.base.FaultReportingCaller.fault`); None: the endpoint does not say
    # (the stub), and the CLI's own API error decides (`agents.retry`).
    endpoint_fault: Callable[[float], EndpointFault | None] | None = field(
        default=None, compare=False
    )

    @property
    def plugin_dirs(self) -> tuple[Path, ...]:
        """The plugin folder the agent is given, if any (a sandbox mounts it)."""
        return () if self.plugin_dir is None else (self.plugin_dir,)


@dataclass
class TokenUsage:
    """Token counts summed over a stage's result messages."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def add(self, usage: Mapping[str, Any] | None) -> None:
        if not usage:
            return
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            value = usage.get(name)
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )


@dataclass
class StageOutcome:
    """What happened when a backend ran one stage."""

    status: OutcomeStatus
    limit: LimitKind | None = None
    error: str | None = None
    turns: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    duration_ms: int = 0  # the CLI's own duration, summed over its result messages
    duration_api_ms: int = 0
    wall_s: float = 0.0  # from spawning the CLI to its exit, as the harness saw it
    session_id: str | None = None
    is_error: bool = False
    result_subtypes: list[str] = field(default_factory=list)
    final_text: str | None = None  # the last result's text: a reviewer's scorecard lives here
    # HTTP status of a failed model call (429, 500, 529, ...): `ci_evals.agents.retry`
    # runs the stage again when it is 5xx/529.
    api_error_status: int | None = None
    attempts: int = 1  # > 1 when `ci_evals.agents.retry` ran it again after an endpoint error
    messages: int = 0
    # A model answered at least once. False: the stage never reached it (the CLI
    # failed before, or answered for it: a command's `!`cmd`` expansion failed).
    model_ran: bool = True
    # The endpoint's failure that ended the stage (`blame_endpoint`), one line.
    endpoint_fault: str | None = None

    @property
    def infrastructure_error(self) -> bool:
        """The model endpoint failed (5xx or overloaded), not the agent: worth a retry."""
        status = self.api_error_status
        return self.status == "error" and status is not None and status >= 500


@dataclass(frozen=True)
class Progress:
    """A live update while a stage runs (for the progress display)."""

    turns: int
    cost_usd: float
    last_tool: str | None = None
    # What keeps the stage waiting, said once when it is noticed ("hook
    # SessionStart:startup (plugin hooks/x.sh) still running after 10 s").
    note: str | None = None


class Abort:
    """Set by the runner to end a running stage now (interrupt, run shutdown)."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], None]] = []
        self.is_set = False

    def set(self) -> None:
        if self.is_set:
            return
        self.is_set = True
        for callback in list(self._callbacks):
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when set (now, if already set); returns an unsubscribe function."""
        if self.is_set:
            callback()
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None


class Agent(Protocol):
    """One way of running a stage."""

    name: str

    async def run_stage(
        self,
        request: StageRequest,
        *,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StageOutcome: ...


def blame_endpoint(outcome: StageOutcome, fault: EndpointFault | None) -> StageOutcome:
    """`outcome`, or an `error` naming the endpoint's fault when the stage did not
    complete while the endpoint was failing it: a stage whose time ran out while
    the API answered 529, or that ran into the budget after cut streams, was ended
    by the endpoint, not by the agent's slowness or spending."""
    ended_by_it = outcome.status == "error" or (
        outcome.status == "limit" and outcome.limit in ("time", "budget")
    )
    if fault is None or not ended_by_it:
        return outcome
    outcome.status, outcome.limit = "error", None
    outcome.endpoint_fault = fault.text
    outcome.error = f"the model endpoint failed: {fault.text}"
    return outcome


def over_quota(outcome: StageOutcome, sandbox: Sandbox, request: StageRequest) -> StageOutcome:
    """`outcome`, or `limit: output` when the sandbox killed everything the stage ran
    because its writable folders grew past `max_output_bytes` (`bwrap` and `local`
    check while it runs: `sandbox.limits.Quota`)."""
    if sandbox.over_quota:
        outcome.status, outcome.limit = "limit", "output"
        outcome.error = (
            f"the stage's folders grew by more than {request.max_output_bytes:,} bytes "
            "while it ran: everything it ran was killed (limits.max_output_mb)"
        )
    return outcome


def over_memory(outcome: StageOutcome, sandbox: Sandbox) -> StageOutcome:
    """`outcome`, its error saying so when the stage failed after the kernel killed
    one of its processes at the sandbox's memory limit: "exit code 137 ... check
    stderr" names nothing, and the CLI itself is the largest process there."""
    limit = sandbox.memory_killed if isinstance(sandbox, MemoryWatch) else None
    if limit is None or outcome.status != "error":
        return outcome
    said = f" ({outcome.error})" if outcome.error else ""
    outcome.error = (
        f"the sandbox's memory limit ({limit / (1 << 20):,.0f} MiB) was reached: the "
        f"kernel killed a process of the stage, the CLI or a tool it ran{said}"
    )
    return outcome
