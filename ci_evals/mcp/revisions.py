"""The MCP spec revisions a stdio check knows, and how each era starts a request.

2024-11-05 through 2025-11-25 open a session with `initialize` (the
*handshake* era). 2026-07-28 is *stateless*: no `initialize`, `server/discover`
instead, and every request carries the protocol version and the client's
capabilities in `params._meta`. A dual-era server answers both; a check
speaks exactly the revision it was asked for.
"""

from __future__ import annotations

from typing import Any

from ci_evals.errors import UserError

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS = ("2026-07-28",)
KNOWN = HANDSHAKE + STATELESS
# What `mcp-check` speaks when not told: the newest handshake revision, which
# servers built with any SDK of the last two years answer.
DEFAULT = "2025-11-25"

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
# 2026-07-28: a request for a version the server does not serve.
UNSUPPORTED_VERSION = -32022

# A version no server serves: what the negotiation sub-test asks for.
UNSERVED = "1999-01-01"

CLIENT_INFO = {"name": "ci-evals-mcp-check", "version": "1"}


def check_known(revision: str) -> str:
    """`revision` when it is one we know; else a one-line usage error listing them."""
    if revision not in KNOWN:
        raise UserError(
            f"unknown MCP protocol revision {revision!r}", hint=f"known: {', '.join(KNOWN)}"
        )
    return revision


def is_stateless(revision: str) -> bool:
    return revision in STATELESS


def meta(revision: str) -> dict[str, Any]:
    """The `_meta` a stateless request carries."""
    return {VERSION_KEY: revision, CAPABILITIES_KEY: {}, CLIENT_INFO_KEY: CLIENT_INFO}


def initialize_params(revision: str) -> dict[str, Any]:
    return {"protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}
