"""The `claude` backend: one stage is one `claude_agent_sdk.query()` with the plugin loaded.

What the SDK and its bundled CLI do (and what this module does about it):

- The SDK merges our whole `os.environ` into the CLI's environment. The CLI is
  spawned here instead (`_IsolatedTransport`) with exactly the mapping the
  runner built (`ci_evals.agents.environment`), so secrets never reach the agent.
- The CLI runs in its own process group (a new session), so the shell commands
  its Bash tool starts can be ended with it: on a timeout, an interrupt, and
  after every stage (a `sleep 999 &` must not outlive its stage).
- Subagents run in the background: the main loop yields a `ResultMessage`,
  then another turn and a second one. The iterator is read to its end, and
  the results are combined (`_Tally`): `num_turns` and `duration_ms` are per
  result (summed), `total_cost_usd`, `model_usage` and `duration_api_ms` are
  session totals (the last wins; `model_usage` includes subagents' tokens).
- A timeout or an interrupt kills the process group rather than cancelling the
  SDK's iterator: the stream then ends on its own, the SDK's own `close()`
  finds a dead process and returns at once, and no cancellation has to travel
  through the SDK's task groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import urlsplit

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream, TextSendStream
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
    query,
)
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport
from claude_agent_sdk._version import __version__ as sdk_version
from claude_agent_sdk.types import SystemPromptPreset

from ci_evals.agents import (
    STREAM_CUT,
    STREAM_MAX_BYTES,
    Abort,
    Progress,
    StageOutcome,
    StageRequest,
    TokenUsage,
    over_memory,
    over_quota,
)
from ci_evals.agents.hook_watch import HookWatch
from ci_evals.config.plugin_hooks import read_hooks
from ci_evals.sandbox import nondumpable
from ci_evals.sandbox.base import Sandbox, SandboxSpec
from ci_evals.sandbox.registry import open_sandbox
from ci_evals.text import one_line

# Seconds between SIGTERM and SIGKILL when a stage's process group is ended.
KILL_GRACE_S = 2.0
# After the group is killed, how long the SDK may take to notice before we
# stop waiting for it (a safety net; the stream normally ends within ms).
DRAIN_AFTER_KILL_S = 15.0
# How long the CLI's stderr may take to arrive after the stage's processes are gone.
STDERR_DRAIN_S = 5.0

# What the CLI reports when `endpoints.proxy` refused a request over the run's
# hard budget (HTTP 402, "API Error: 402 ci-evals: this run's budget ...").
BUDGET_REFUSAL = "ci-evals: this run's budget"

_ERROR_CHARS = 500  # an outcome's error: one line of at most this many characters
# The `model` of an assistant message the CLI made up itself, no model involved:
# a failed `!`cmd`` expansion in a command ("Shell command failed for pattern
# ..."), an API error it reports as text.
SYNTHETIC_MODEL = "<synthetic>"
# How a stage that never reached the model says so (the reports show it as is).
NEVER_RAN = "the model never ran"
# How a stage whose plugin the CLI refused to load says so.
NOT_LOADED = "Claude Code did not load the plugin"
_LIMIT_SUBTYPES = {"error_max_turns": "turns", "error_max_budget_usd": "budget"}

# The longest line the SDK reads from the CLI (its default: 1 MiB). Far above
# what our own checks refuse (a reviewer's final message of 1,000,000
# characters, ~6 MB escaped as JSON), so that they decide, with their reason.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# The SDK logs "Fatal error in message reader" when we kill the CLI on purpose;
# the outcome already says what happened, so keep it off the user's terminal.
logging.getLogger("claude_agent_sdk").addHandler(logging.NullHandler())


class _StderrCopy:
    """The CLI's stderr: one end of a socket pair, whose bytes a thread writes into
    `path` as they come, up to `max_bytes`; past that it reads on and drops them,
    and one line at the cut says how much was dropped.

    Not the file itself: every process in the sandbox could read the file's host
    path (the run folder) from `/proc/<pid>/fd/2`, and open it again there. Not
    a pipe either: any process in the sandbox could reopen a pipe through
    `/proc/<cli>/fd/2` and write into the log (a 300 MiB flood, a forged line);
    a socket cannot be reopened that way (ENXIO). A process that can take the
    descriptor itself (`pidfd_getfd`, ptrace) still can write: the cap bounds it.
    """

    def __init__(self, path: Path, max_bytes: int) -> None:
        self._path = path
        self._max_bytes = max_bytes
        self.write_fd: int | None = None
        self.dropped = 0  # bytes read past the cap and not written

    def __enter__(self) -> _StderrCopy:
        self._file = self._path.open("wb")
        ours, theirs = socket.socketpair()
        theirs.shutdown(socket.SHUT_RD)  # the CLI only writes; nothing reads from its end
        self._read_fd, self.write_fd = ours.detach(), theirs.detach()
        self._thread = threading.Thread(target=self._copy, name="cli-stderr", daemon=True)
        self._thread.start()
        return self

    def _copy(self) -> None:
        kept = 0
        with contextlib.suppress(OSError, ValueError):
            while data := os.read(self._read_fd, 64 * 1024):
                room = self._max_bytes - kept
                if room > 0:
                    self._file.write(data[:room])
                    self._file.flush()
                    kept += min(room, len(data))
                self.dropped += max(0, len(data) - max(room, 0))
        if self.dropped:
            with contextlib.suppress(OSError, ValueError):
                self._file.write(stderr_cut_note(self._max_bytes, self.dropped).encode())
                self._file.flush()

    def close_write(self) -> None:
        if self.write_fd is not None:
            os.close(self.write_fd)
            self.write_fd = None

    def __exit__(self, *exc_info: object) -> None:
        self.close_write()
        self._thread.join(STDERR_DRAIN_S)
        if not self._thread.is_alive():  # else something still holds the socket: leave it
            os.close(self._read_fd)
            self._file.close()


def stderr_cut_note(kept: int, dropped: int) -> str:
    """The line a capped stderr log ends with (its own line, whatever came before)."""
    return f"\n[ci-evals: stderr cut here: the first {kept} bytes kept, {dropped} more dropped]\n"


class _StreamCopy:
    """The CLI's stdout, kept as it came (`StageRequest.stream_path`), at most
    `STREAM_MAX_BYTES`, then `STREAM_CUT` on a line of its own. Nothing in the
    sandbox can write to the CLI's stdout (a socket: /proc/<cli>/fd/1 cannot be
    reopened), and no line the CLI writes is `STREAM_CUT`."""

    def __init__(self, path: Path, limit: int = STREAM_MAX_BYTES) -> None:
        self._file = path.open("w", encoding="utf-8", errors="surrogateescape")
        self._left = limit
        self._line_start = True

    def write(self, chunk: str) -> None:
        if self._left < 0:
            return
        size = len(chunk.encode("utf-8", "surrogateescape"))
        if size > self._left:
            # Up to the last whole line that fits; the mark on a line of its own
            # (after a line a chunk before began, a grader reads that one as no JSON).
            head = chunk.encode("utf-8", "surrogateescape")[: self._left]
            keep = head[: head.rfind(b"\n") + 1].decode("utf-8", "surrogateescape")
            self._file.write(keep)
            self._file.write(("" if keep or self._line_start else "\n") + STREAM_CUT)
            self._left = -1
            return
        self._file.write(chunk)
        self._left -= size
        if chunk:
            self._line_start = chunk.endswith("\n")

    def close(self) -> None:
        self._file.close()


class _TeeStream(TextReceiveStream):
    """The CLI's stdout as the SDK reads it, every chunk also handed to a `_StreamCopy`."""

    def __init__(self, stdout: anyio.abc.SocketStream, copy: _StreamCopy) -> None:
        super().__init__(stdout)
        self._copy = copy

    async def receive(self) -> str:
        chunk = await super().receive()
        self._copy.write(chunk)
        return chunk


class _IsolatedTransport(SubprocessCLITransport):
    """The SDK's subprocess transport, spawning the CLI with an exact environment.

    Only `connect()` differs from the SDK's: the CLI starts inside the stage's
    sandbox, its environment is ours alone (not merged over `os.environ`), it
    leads its own process group, and its stderr goes through a pipe into a file
    (`_StderrCopy`: the file's path stays out of the sandbox's /proc).
    Command-line flags, stdin/stdout framing and `close()` are the SDK's.
    """

    def __init__(
        self,
        prompt: str | AsyncIterable[dict[str, Any]],
        options: ClaudeAgentOptions,
        *,
        env: Mapping[str, str],
        stderr: _StderrCopy,
        sandbox: Sandbox,
        preload: Path,
        stream_copy: _StreamCopy | None = None,
        on_frame: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__(prompt, options)
        self._stream_copy = stream_copy
        self._on_frame = on_frame
        self._sandbox = sandbox
        self._preload = preload
        self._sockets: tuple[anyio.abc.SocketStream, ...] = ()
        self._exact_env = dict(env)
        self._stderr = stderr
        self.pid: int | None = None
        self._kill_requested: int | None = None  # a signal asked for before the spawn

    async def connect(self) -> None:
        if self._process:
            return
        if self._cli_path is None:
            self._cli_path = self._find_cli()
        env = {
            **self._exact_env,
            # What the SDK's own transport adds, and the CLI relies on.
            "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
            "CLAUDE_AGENT_SDK_VERSION": sdk_version,
            # The SDK waits for the CLI's "idle" frame to end a run (see its
            # Query); without this the CLI does not send it.
            "CLAUDE_CODE_SDK_READS_SESSION_STATE": "1",
        }
        if self._cwd:
            env["PWD"] = self._cwd
        # LD_PRELOAD is set by `env` for the CLI alone, not for what starts it
        # (bwrap's shell, the relay): the object takes it out of the CLI's
        # environment again, so neither those nor the CLI's tools load it.
        command = nondumpable.preloading(self._preload, self._build_command())
        spawn = self._sandbox.spawn(command, cwd=Path(self._cwd or os.getcwd()), env=env)
        # The CLI's stdin and stdout are socket pairs, not pipes: any process in
        # the sandbox could reopen a pipe through /proc/<cli>/fd/1 and write SDK
        # messages into our stream (a forged trajectory, a forged final result);
        # a socket cannot be reopened that way (ENXIO).
        stdin_ours, stdin_theirs = socket.socketpair()
        stdout_ours, stdout_theirs = socket.socketpair()
        try:
            self._process = await anyio.open_process(
                spawn.argv,
                stdin=stdin_theirs.fileno(),
                stdout=stdout_theirs.fileno(),
                stderr=self._stderr.write_fd,
                cwd=spawn.cwd,
                env=spawn.env,
                start_new_session=True,
            )
        except BaseException:
            stdin_ours.close()
            stdout_ours.close()
            raise
        finally:
            stdin_theirs.close()
            stdout_theirs.close()
        self.pid = self._process.pid
        self._stderr.close_write()  # the CLI holds it now: EOF when the sandbox is gone
        if self._kill_requested is not None:  # timed out or aborted while starting
            self.signal_group(self._kill_requested)
        stdout = await anyio.abc.SocketStream.from_socket(stdout_ours)
        stdin = await anyio.abc.SocketStream.from_socket(stdin_ours)
        self._sockets = (stdout, stdin)
        self._stdout_stream = (
            TextReceiveStream(stdout)
            if self._stream_copy is None
            else _TeeStream(stdout, self._stream_copy)
        )
        self._stdin_stream = TextSendStream(stdin)
        self._ready = True

    async def _frames_seen(self) -> AsyncIterator[dict[str, Any]]:
        async for frame in self._read_messages_impl():
            if self._on_frame is not None:
                self._on_frame(frame)
            yield frame

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        # Every frame as it is read, before the SDK holds it back: it yields
        # nothing until the session is initialised, after SessionStart's hooks.
        return self._frames_seen()

    async def close(self) -> None:
        await super().close()
        for stream in self._sockets:
            with contextlib.suppress(Exception):
                await stream.aclose()
        self._sockets = ()

    def signal_group(self, signum: int) -> None:
        """Send `signum` to the CLI and everything in its process group."""
        if self.pid is None:
            self._kill_requested = signum
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def kill_all(self) -> None:
        """SIGKILL the CLI and every process it started, even those in other sessions
        (the sandbox's `close()` finds those)."""
        self.signal_group(signal.SIGKILL)
        if self.pid is not None:
            self._sandbox.close()

    def remove_fallback_socket(self) -> None:
        """Remove the CLI's messaging socket if it fell back to /tmp.

        The CLI puts it under XDG_RUNTIME_DIR, unless that path is too long for
        a Unix socket (~108 bytes): then it uses `/tmp/cc-socks-<uid>/<pid>.sock`,
        which a killed CLI leaves behind.
        """
        if self.pid is None:
            return
        for base in {"/tmp", self._exact_env.get("TMPDIR", "/tmp")}:  # noqa: S108 - the CLI's choice
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(base, f"cc-socks-{os.getuid()}", f"{self.pid}.sock"))


def message_record(message: object, elapsed_s: float) -> dict[str, Any]:
    """One trajectory line: the message's type, its fields, and when it arrived."""
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        fields = dataclasses.asdict(message)
    else:
        fields = {"repr": repr(message)}
    return {
        "time": time.time(),
        "elapsed_s": round(elapsed_s, 4),
        "type": type(message).__name__,
        **fields,
    }


class _Tally:
    """Turns, tokens, cost and durations over a stage's result messages."""

    def __init__(self) -> None:
        self.results: list[ResultMessage] = []
        self.live_turns = 0  # top-level assistant messages, for progress only
        self.last_tool: str | None = None
        self.model_messages = 0  # assistant messages a model wrote (not the CLI's own)
        self.synthetic_text: str | None = None  # the first message the CLI made up
        # Why the CLI did not load the plugin under test (its init message's
        # `plugin_errors`: an invalid manifest), the first one.
        self.plugin_error: str | None = None

    def see(self, message: object) -> None:
        if isinstance(message, SystemMessage) and message.subtype == "init":
            errors = message.data.get("plugin_errors")
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                self.plugin_error = str(errors[0].get("message") or errors[0])
        if isinstance(message, ResultMessage):
            self.results.append(message)
        elif isinstance(message, AssistantMessage):
            if message.model == SYNTHETIC_MODEL:
                if self.synthetic_text is None:
                    self.synthetic_text = _text_of(message)
                return
            self.model_messages += 1
            if message.parent_tool_use_id is None:
                self.live_turns += 1
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    self.last_tool = block.name

    @property
    def cost_usd(self) -> float:
        costs = [r.total_cost_usd for r in self.results if r.total_cost_usd is not None]
        return max(costs, default=0.0)

    def fill(self, outcome: StageOutcome) -> None:
        results = self.results
        outcome.turns = sum(r.num_turns for r in results) if results else self.live_turns
        outcome.cost_usd = self.cost_usd
        outcome.duration_ms = sum(r.duration_ms for r in results)
        outcome.duration_api_ms = max((r.duration_api_ms for r in results), default=0)
        outcome.result_subtypes = [r.subtype for r in results]
        outcome.is_error = any(r.is_error for r in results)
        outcome.session_id = results[-1].session_id if results else None
        outcome.final_text = results[-1].result if results else None
        statuses = [r.api_error_status for r in results if r.api_error_status is not None]
        outcome.api_error_status = statuses[-1] if statuses else None
        outcome.usage = _usage(results)
        outcome.model_ran = bool(
            self.model_messages or outcome.turns or outcome.duration_api_ms or outcome.usage.total
        )


def _text_of(message: AssistantMessage) -> str:
    return " ".join(block.text for block in message.content if isinstance(block, TextBlock))


def _usage(results: list[ResultMessage]) -> TokenUsage:
    """Session totals from the last `model_usage` (includes subagents), else summed `usage`."""
    usage = TokenUsage()
    last = next((r.model_usage for r in reversed(results) if r.model_usage), None)
    if last:
        for per_model in last.values():
            usage.input_tokens += int(per_model.get("inputTokens", 0))
            usage.output_tokens += int(per_model.get("outputTokens", 0))
            usage.cache_read_input_tokens += int(per_model.get("cacheReadInputTokens", 0))
            usage.cache_creation_input_tokens += int(per_model.get("cacheCreationInputTokens", 0))
        return usage
    for result in results:
        usage.add(result.usage)
    return usage


class ClaudeAgent:
    """Run a stage through the real claude-agent-sdk and its bundled Claude Code CLI."""

    name = "claude"

    async def run_stage(
        self,
        request: StageRequest,
        *,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StageOutcome:
        request.trajectory_path.parent.mkdir(parents=True, exist_ok=True)
        request.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        request.cwd.mkdir(parents=True, exist_ok=True)
        options = ClaudeAgentOptions(
            cwd=str(request.cwd),
            # None in the run without the plugin: no `--plugin-dir`, so none of its
            # commands, skills, agents, hooks or MCP servers.
            plugins=[{"type": "local", "path": str(path)} for path in request.plugin_dirs],
            permission_mode="bypassPermissions",
            max_turns=request.max_turns,
            max_budget_usd=request.max_budget_usd,
            model=request.model,
            env=dict(request.env),
            max_buffer_size=MAX_MESSAGE_BYTES,
            # No settings from the file system: not the workspace's `.claude/`,
            # `CLAUDE.md` or `.mcp.json` (an earlier stage, or the stage under
            # review, may have written them: hooks that run, `env` that points the
            # CLI at another model), nor the private HOME's `~/.claude`. The SDK's
            # default (None) loads user, project and local; `[]` loads none. The
            # plugin under test still loads (`--plugin-dir`), hooks and all.
            setting_sources=[],
            disallowed_tools=list(request.tools.disallowed),
            # Every hook's start and end in the trajectory (SessionStart's come
            # regardless): what shows a plugin's hook fired, and why it failed.
            include_hook_events=True,
        )
        if request.resume is not None:
            options.resume = str(request.resume)  # `--resume FILE`, as `claude plugin eval`
        if request.mcp_servers:
            options.mcp_servers = {k: dict(v) for k, v in request.mcp_servers.items()}  # type: ignore[misc]
        if request.tools.offered is not None:
            # The operator's grant (`suite.tool_grant`): only these built-in tools are
            # offered, and a call no rule allows is refused, not asked about: the model
            # reads the refusal as a tool error. The sandbox stays the boundary.
            options.tools = list(request.tools.offered)
            options.allowed_tools = list(request.tools.allowed)
            options.permission_mode = "dontAsk"
        if request.tools.claude_code_prompt:
            # No `--system-prompt ""`: the CLI's own, as a `claude plugin eval` run has it,
            # and the case's `--append-system-prompt`.
            preset: SystemPromptPreset = {"type": "preset", "preset": "claude_code"}
            if request.tools.append_system_prompt is not None:
                preset["append"] = request.tools.append_system_prompt
            options.system_prompt = preset
        cli = _cli_binary(request.prompt, options)
        with (
            # The stderr copy is closed last: after the sandbox.
            _StderrCopy(request.stderr_path, request.stderr_max_bytes) as stderr,
            # The CLI makes itself non-dumpable before its own code runs: its Bash
            # tool's commands share its uid and could otherwise write its memory
            # through /proc/<cli>/mem (sandbox/nondumpable.py).
            nondumpable.preloaded(cli) as preload,
            open_sandbox(
                request.sandbox,
                SandboxSpec(
                    writable=(request.cwd, *request.plugin_dirs, *request.writable),
                    readonly=(cli, preload.parent, *request.readonly),
                    endpoint=endpoint_address(request.env),
                    disk_bytes=request.max_output_bytes,
                ),
            ) as sandbox,
            request.trajectory_path.open("w", encoding="utf-8") as trajectory,
            contextlib.ExitStack() as copies,
        ):
            stream_copy = None
            if request.stream_path is not None:
                stream_copy = _StreamCopy(request.stream_path)
                copies.callback(stream_copy.close)
            watch = HookWatch([] if request.plugin_dir is None else read_hooks(request.plugin_dir))
            transport = _IsolatedTransport(
                request.prompt,
                options,
                env=request.env,
                stderr=stderr,
                sandbox=sandbox,
                preload=preload,
                stream_copy=stream_copy,
                on_frame=watch.see,
            )
            outcome = await _drive(
                request, options, transport, trajectory, abort, on_progress, watch
            )
        return over_quota(over_memory(outcome, sandbox), sandbox, request)


def _cli_binary(prompt: str, options: ClaudeAgentOptions) -> Path:
    """The CLI the SDK would start (its bundled binary): an isolating sandbox must
    see it, although it lives in a virtualenv that may be inside the repository."""
    probe = SubprocessCLITransport(prompt, options)
    return Path(probe._cli_path or probe._find_cli()).resolve()


def endpoint_address(env: Mapping[str, str]) -> tuple[str, int] | None:
    """The loopback (host, port) of the model endpoint the CLI is pointed at, if any:
    the one address an isolating sandbox lets it reach."""
    url = urlsplit(env.get("ANTHROPIC_BASE_URL", ""))
    if url.scheme != "http" or url.hostname not in ("127.0.0.1", "localhost"):
        return None
    return ("127.0.0.1", url.port or 80)


async def _drive(  # noqa: PLR0917 - one private call site
    request: StageRequest,
    options: ClaudeAgentOptions,
    transport: _IsolatedTransport,
    trajectory: IO[str],
    abort: Abort,
    on_progress: Callable[[Progress], None] | None,
    watch: HookWatch,
) -> StageOutcome:
    """Read the stage's messages to the end, enforcing the timeout and honouring `abort`."""
    loop = asyncio.get_running_loop()
    tally = _Tally()

    def say(note: str) -> None:
        if on_progress is not None:
            on_progress(Progress(tally.live_turns, tally.cost_usd, tally.last_tool, note=note))

    watch.start(say)
    why_killed: list[str] = []  # "time" or "abort", first one wins
    kill_handles: list[asyncio.TimerHandle] = []

    def end_group(reason: str) -> None:
        if not why_killed:
            why_killed.append(reason)
        transport.signal_group(signal.SIGTERM)
        kill_handles.append(loop.call_later(KILL_GRACE_S, transport.kill_all))

    timer = loop.call_later(request.timeout_s, end_group, "time")

    def on_abort() -> None:
        loop.call_soon_threadsafe(end_group, "abort")

    unsubscribe = abort.on_set(on_abort)
    started = time.monotonic()
    failure: BaseException | None = None
    messages = 0
    _record_prompt(trajectory, request.prompt)
    try:
        # Safety net: if the stream does not end after the group is killed, stop waiting.
        with anyio.move_on_after(request.timeout_s + KILL_GRACE_S + DRAIN_AFTER_KILL_S):
            try:
                # aclosing: if the safety net cancels us, the SDK's own clean-up still runs.
                stream = cast(
                    AsyncGenerator[object, None],  # typed as an iterator; it is a generator
                    query(prompt=request.prompt, options=options, transport=transport),
                )
                async with contextlib.aclosing(stream):
                    async for message in stream:
                        messages += 1
                        record = message_record(message, time.monotonic() - started)
                        trajectory.write(json.dumps(record, default=str) + "\n")
                        trajectory.flush()
                        _see(tally, message, record if request.stop else None, request, end_group)
                        if on_progress is not None:
                            on_progress(Progress(tally.live_turns, tally.cost_usd, tally.last_tool))
            except Exception as exc:  # the CLI failed: classified below, recorded in the outcome
                failure = exc
    finally:
        waiting = watch.still_running()
        watch.close()
        timer.cancel()
        unsubscribe()
        # Whatever the agent left running in the background ends with its stage.
        transport.kill_all()
        transport.remove_fallback_socket()
        for handle in kill_handles:
            handle.cancel()
    outcome = _classify(tally, failure, why_killed[0] if why_killed else None, request)
    if waiting is not None and outcome.error is not None:
        # What kept the stage from starting (a SessionStart hook past the SDK's
        # 60 s initialize): said after the CLI's own words.
        outcome.error = one_line(f"{outcome.error} ({waiting})", _ERROR_CHARS, ellipsis="…")
    outcome.wall_s = time.monotonic() - started
    outcome.messages = messages
    return outcome


def _record_prompt(trajectory: IO[str], prompt: str) -> None:
    """The trajectory's first line: the CLI's messages do not repeat the prompt, and a
    reader of the stage (`report --html`) needs it to judge what the agent did."""
    line = {"time": time.time(), "elapsed_s": 0.0, "type": "Prompt", "text": prompt}
    trajectory.write(json.dumps(line) + "\n")


def _classify(
    tally: _Tally,
    failure: BaseException | None,
    killed: str | None,
    request: StageRequest,
) -> StageOutcome:
    outcome = StageOutcome(status="completed")
    tally.fill(outcome)
    limits = [_LIMIT_SUBTYPES[s] for s in outcome.result_subtypes if s in _LIMIT_SUBTYPES]
    if killed == "abort":
        outcome.status, outcome.error = "interrupted", "the run was interrupted"
    elif killed == "mock":
        # A case's mock stand-in aborted the run (its `expect:` or `abort_when:`): a
        # verdict on the agent, graded as the CLI grades it, not an error.
        outcome.status, outcome.error = "completed", None
    elif killed == "time":
        outcome.status, outcome.limit = "limit", "time"
        outcome.error = f"timed out after {request.timeout_s:g} s"
    elif limits:
        outcome.status, outcome.limit = "limit", limits[0]  # type: ignore[assignment]
        outcome.error = _limit_text(limits[0], request)
    elif outcome.is_error and BUDGET_REFUSAL in (tally.results[-1].result or ""):
        # The forwarding proxy refused a request: the run's hard budget is spent.
        outcome.status, outcome.limit = "limit", "budget"
        detail = tally.results[-1].result or BUDGET_REFUSAL
        outcome.error = one_line(detail, _ERROR_CHARS, ellipsis="…")
    elif failure is not None:
        detail = f"{type(failure).__name__}: {failure}"
        outcome.status, outcome.error = "error", one_line(detail, _ERROR_CHARS, ellipsis="…")
    elif outcome.is_error:
        last = tally.results[-1]
        detail = last.result or ", ".join(last.errors or []) or last.subtype
        outcome.status, outcome.error = "error", one_line(detail, _ERROR_CHARS, ellipsis="…")
    elif tally.plugin_error is not None:
        # Nothing of the plugin ran: its stage is no verdict on it, and the CLI's
        # own reason (the manifest's field and rule) is what to fix.
        said = tally.plugin_error.replace(str(request.plugin_dir), "PLUGIN")
        outcome.status = "error"
        outcome.error = one_line(f"{NOT_LOADED}: {said}", _ERROR_CHARS, ellipsis="…")
    elif not tally.results:
        outcome.status, outcome.error = "error", "the CLI ended without a result"
    elif not outcome.model_ran:
        # The CLI answered for the model: the prompt never reached it (a command's
        # `!`git diff HEAD`` failed in a workspace that is no git repository). Not
        # the agent's failure, and nothing to grade: its own line is the reason.
        said = tally.synthetic_text or outcome.final_text or "the CLI answered without it"
        outcome.status = "error"
        outcome.error = one_line(f"{NEVER_RAN}: {said}", _ERROR_CHARS, ellipsis="…")
    return outcome


def _see(
    tally: _Tally,
    message: object,
    record: Mapping[str, Any] | None,
    request: StageRequest,
    end: Callable[[str], None],
) -> None:
    """`message` counted; the stage ended ("mock") when `request.stop` says so of its
    trajectory `record`."""
    tally.see(message)
    if record is not None and request.stop is not None and request.stop(record):
        end("mock")


def _limit_text(kind: str, request: StageRequest) -> str:
    if kind == "turns":
        return f"reached max_turns ({request.max_turns})"
    return f"reached max_budget_usd ({request.max_budget_usd})"
