"""The spec text each sub-test holds a server to: cited in the reason of every failure.

Each entry names the page and section of the revision checked (as on
modelcontextprotocol.io/specification/REV/…, from docs/specification/REV/ in
modelcontextprotocol/modelcontextprotocol) and quotes the rule. The JSON-RPC
error codes are JSON-RPC 2.0's own (the MCP base protocol is JSON-RPC 2.0).
"""

from __future__ import annotations

from ci_evals.mcp import revisions

_JSONRPC = "JSON-RPC 2.0 §5.1 Error object"
_LIFECYCLE = "basic/lifecycle §Version Negotiation"
_NOTIFICATIONS = (
    "basic/index §Notifications",
    '"The receiver MUST NOT send a response."',
)
_TOOL_ERRORS = "server/tools §Error Handling"

# sub-test -> (page §section, the rule quoted); stateless overrides below.
_RULES: dict[str, tuple[str, str]] = {
    "initialize": (
        "basic/lifecycle §Initialization",
        '"The server MUST respond with its own capabilities and information"',
    ),
    "serves-revision": (
        _LIFECYCLE,
        '"If the server supports the requested protocol version, it MUST respond with the '
        'same version."',
    ),
    "version-negotiation": (
        _LIFECYCLE,
        '"Otherwise, the server MUST respond with another protocol version it supports."',
    ),
    "initialized-notification": _NOTIFICATIONS,
    "notification-no-reply": _NOTIFICATIONS,
    "discover": (
        "server/discover §Response",
        '"Servers MUST implement it." (DiscoverResult: supportedVersions, capabilities; '
        'basic/index §ResultType: "The result MUST include a resultType field")',
    ),
    "meta-required": (
        "basic/index §_meta (Per-request protocol fields)",
        '"A request missing any required field is malformed; the server MUST reject it with '
        'JSON-RPC error code -32602 (Invalid params)."',
    ),
    "tools-list": (
        "server/tools §Tool",
        '"inputSchema: JSON Schema defining expected parameters ... MUST be a valid JSON '
        'Schema object (not null)"',
    ),
    "tools-call": (
        "server/tools §Tool Result, §Output Schema (schema.ts CallToolResult)",
        '"content: ContentBlock[]; isError?: boolean" and "Servers MUST provide structured '
        'results that conform to this schema."',
    ),
    "tools-call-success": (
        _TOOL_ERRORS,
        '"Tool Execution Errors: Reported in tool results with isError: true" (the call named '
        "in the configuration was expected to succeed)",
    ),
    "tools-call-unknown": (
        _TOOL_ERRORS,
        '"Protocol Errors: Standard JSON-RPC errors for issues like: Unknown tools"',
    ),
    "parse-error": (
        _JSONRPC,
        '"-32700 Parse error: Invalid JSON was received by the server." and §5 "If there was '
        "an error in detecting the id in the Request object (e.g. Parse error/Invalid "
        'Request), it MUST be Null."',
    ),
    "invalid-request": (
        _JSONRPC,
        '"-32600 Invalid Request: The JSON sent is not a valid Request object."',
    ),
    "unknown-method": (
        _JSONRPC,
        '"-32601 Method not found: The method does not exist / is not available."',
    ),
    "stdout-clean": (
        "basic/transports §stdio",
        '"The server MUST NOT write anything to its stdout that is not a valid MCP message."',
    ),
    "cache-hints": (
        "server/utilities/caching §Cacheable Results, §Time-to-Live (TTL) Field",
        '"Servers MUST include caching hints on results with resultType: \\"complete\\" '
        "returned by ... server/discover, tools/list, prompts/list, resources/list, "
        'resources/templates/list, resources/read" and "Servers MUST provide a ttlMs value '
        'that is >= 0." (schema.ts CacheableResult: cacheScope "public" | "private")',
    ),
}
_STATELESS: dict[str, tuple[str, str]] = {
    "serves-revision": (
        "server/discover §Response",
        "DiscoverResult.supportedVersions: the protocol versions the server supports",
    ),
    "version-negotiation": (
        "basic/versioning §Protocol Version Negotiation; basic/index §_meta",
        '"If the server does not implement the requested version ... it MUST respond with an '
        'UnsupportedProtocolVersionError [-32022] listing the versions it does support" and '
        '"Servers use these to identify the protocol version ... without relying on any prior '
        'connection state."',
    ),
    "stdout-clean": (
        "basic/transports/stdio (its opening rules)",
        '"The server MUST NOT write anything to its stdout that is not a valid MCP message."',
    ),
}
# Revisions before the one that wrote a rule down say less: (first revision with
# the text above, what the earlier ones say).
_EARLIER: dict[str, tuple[str, tuple[str, str]]] = {
    "initialized-notification": (
        "2025-03-26",
        (
            "basic/messages §Notifications",
            '"They do not expect a response." and JSON-RPC 2.0 §4.1 "The Server MUST NOT '
            'reply to a Notification"',
        ),
    ),
    "tools-list": (
        "2025-11-25",
        (
            "server/tools §Tool",
            '"inputSchema: JSON Schema defining expected parameters" (schema.ts Tool: '
            'inputSchema { type: "object" ... })',
        ),
    ),
    "tools-call": (
        "2025-06-18",
        (
            "server/tools §Tool Result (schema.ts CallToolResult)",
            '"content: (TextContent | ImageContent | ... )[]; isError?: boolean"',
        ),
    ),
}


def cite(subtest: str, revision: str) -> str:
    """`spec REV page §section: "rule"` for `subtest`, or "" when it has none."""
    entry = (_STATELESS if revisions.is_stateless(revision) else {}).get(subtest)
    if subtest in _EARLIER and revision < _EARLIER[subtest][0]:  # ISO dates sort as text
        entry = _EARLIER[subtest][1]
    entry = entry or _RULES.get(subtest)
    if entry is None:
        return ""
    page, text = entry
    if page.startswith("JSON-RPC"):
        return f"{page}: {text}"
    return f"spec {revision} {page}: {text}"
