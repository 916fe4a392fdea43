"""The stub model: a local Anthropic Messages API stand-in serving scripted turns.

The real Claude Code CLI talks to it over HTTP (streamed SSE), so suites and
tests run offline, deterministically and for free. The script format is
documented in docs/stub-model.md.

    script = load_script(Path("stub.yaml"))
    with StubServer(script) as server:
        env = server.cli_env()
"""

from __future__ import annotations

from ci_evals.endpoints.stub_model.script import (
    Fault,
    RequestMatch,
    Rule,
    Script,
    StubUsage,
    ToolCall,
    Turn,
    load_script,
    loads_script,
)
from ci_evals.endpoints.stub_model.server import RequestRecord, StubServer

__all__ = [
    "Fault",
    "RequestMatch",
    "RequestRecord",
    "Rule",
    "Script",
    "StubServer",
    "StubUsage",
    "ToolCall",
    "Turn",
    "load_script",
    "loads_script",
]
