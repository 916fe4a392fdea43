"""Run one real claude-agent-sdk `query()` against a started stub model server.

For tests across the project: the real bundled Claude Code CLI, isolated in
its own HOME/TMPDIR/XDG_RUNTIME_DIR/CLAUDE_CODE_TMPDIR under a base folder,
pointed at the stub with `StubServer.cli_env()`, its stderr captured.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    TextBlock,
    query,
)

from ci_evals.endpoints.stub_model import StubServer


@dataclass
class QueryRun:
    """Everything one query produced."""

    messages: list[Any] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    error: BaseException | None = None  # raised by the SDK (e.g. the CLI exited non-zero)
    timed_out: bool = False

    @property
    def results(self) -> list[Any]:
        return [m for m in self.messages if isinstance(m, ResultMessage)]

    @property
    def result(self) -> Any:
        """The last ResultMessage; fails the test when there is none."""
        results = self.results
        assert results, f"no ResultMessage; error={self.error!r}; stderr={self.stderr[-10:]}"
        return results[-1]

    def texts(self) -> list[str]:
        """The text of every assistant text block, in order."""
        return [
            block.text
            for m in self.messages
            if isinstance(m, AssistantMessage)
            for block in m.content
            if isinstance(block, TextBlock)
        ]


def cli_env(
    server: StubServer, base: Path, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The CLI environment for a test: the stub's variables plus private folders under `base`."""
    folders = {
        "HOME": base / "home",
        "TMPDIR": base / "tmp",
        "CLAUDE_CODE_TMPDIR": base / "tmp",
        "XDG_RUNTIME_DIR": base / "run",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {key: str(value) for key, value in folders.items()}
    env.update(server.cli_env())
    env["IS_SANDBOX"] = "1"  # bypassPermissions is refused as root otherwise
    env.update(extra or {})
    return env


def run_query(
    server: StubServer,
    prompt: str,
    cwd: Path,
    base: Path,
    *,
    plugins: Sequence[Path] = (),
    max_turns: int | None = 10,
    env: Mapping[str, str] | None = None,
    timeout: float = 90.0,
    **options: Any,
) -> QueryRun:
    """Run `prompt` through the real CLI in `cwd` against `server`; read the iterator to its end.

    `env` adds to (or overrides) the test environment; `options` go to
    `ClaudeAgentOptions`. `timeout` bounds the whole query on our side.
    """
    run = QueryRun()
    agent_options = ClaudeAgentOptions(
        cwd=str(cwd),
        env=cli_env(server, base, env),
        permission_mode="bypassPermissions",
        plugins=[{"type": "local", "path": str(p)} for p in plugins],
        max_turns=max_turns,
        stderr=run.stderr.append,
        **options,
    )

    async def consume() -> None:
        async for message in query(prompt=prompt, options=agent_options):
            run.messages.append(message)

    async def bounded() -> None:
        try:
            await asyncio.wait_for(consume(), timeout)
        except asyncio.TimeoutError:
            run.timed_out = True
        except Exception as exc:  # the SDK's errors are part of what tests look at
            run.error = exc

    asyncio.run(bounded())
    return run
