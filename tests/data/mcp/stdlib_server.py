"""A small dual-era MCP server on the standard library only, right in every respect the
checker tests, unless told to break one: `stdlib_server.py [MODE]` (see BREAKS).

The tests run each MODE and expect exactly the sub-test it names to fail.
"""

import json
import subprocess
import sys
import time

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS = ("2026-07-28",)
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
INFO = {"name": "stdlib-server", "version": "1.0"}
ADD = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}
# Arguments for it would take a terabyte: a checker must not try to build them.
HUGE = {
    "name": "add",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "string", "minLength": 10**12}},
        "required": ["a"],
    },
}
BAD = {"name": "broken", "inputSchema": {"type": "object", "properties": {"x": {"type": "integr"}}}}

BREAKS = {
    "no-server-info",  # initialize without serverInfo
    "ignores-requested-version",  # initialize answers 2024-11-05 whatever was asked
    "version-error",  # an unsupported version is an error, not a counter-offer
    "reply-to-notification",  # answers notifications
    "bad-input-schema",  # a second tool whose inputSchema is not a valid JSON Schema
    "tool-error",  # the declared tool answers isError: true
    "hang",  # the declared tool never answers
    "unknown-tool-succeeds",  # calling an unknown tool "works"
    "crash-on-malformed",  # a malformed line kills it (a traceback on stderr)
    "parse-error-with-id",  # -32700 with an id that is not null
    "no-invalid-request",  # an invalid request gets no reply
    "unknown-method-wrong-code",  # -32602 for an unknown method (the mcp 1.x answer)
    "logs-on-stdout",  # a log line on stdout
    "non-utf8",  # bytes that are not UTF-8 on stdout
    "huge-line",  # a 5 MiB line on stdout
    "no-discover",  # 2026-07-28: server/discover unknown
    "no-meta-check",  # 2026-07-28: serves requests without _meta
    "serves-any-version",  # 2026-07-28: serves a version it does not support
    "silent",  # reads every line, answers none
    "counter-ids",  # numbers its replies 1, 2, 3... instead of echoing each request's id
    "error-and-result",  # the unknown tool's error reply carries a result too
    "parse-error-and-result",  # -32700 with a result too
    "huge-min-length",  # the declared tool requires a string of at least 10**12 characters
    "no-result-type",  # 2026-07-28: server/discover's result without resultType
    "hang-with-child",  # hang, and leave a child in a session of its own holding stdout
    "control-characters",  # names with a newline and a terminal escape, on stdout and stderr
    "exit-after-parse-error",  # answers a malformed line with -32700, then exits
    "negotiates-older",  # right: serves up to 2025-06-18, so answers that when asked 2025-11-25
    "version-on-first-request-only",  # 2026-07-28: judges the first request's version only
    "no-list-cache-hints",  # 2026-07-28: server/discover has ttlMs/cacheScope, tools/list not
    "bad-content",  # the tool's result has a content item without a type
    "no-args-tool-fails",  # a second tool, without required arguments, answers isError: true
    "exit-on-unknown-method",  # an unknown method ends it (without a reply)
}
MODE = sys.argv[1] if len(sys.argv) > 1 else "none"
assert MODE in BREAKS or MODE == "none", MODE
if MODE == "negotiates-older":
    HANDSHAKE = HANDSHAKE[:-1]
# 2026-07-28 server/utilities/caching: on every cacheable result.
CACHE_HINTS = {"ttlMs": 60000, "cacheScope": "public"}
CACHEABLE = ("server/discover", "tools/list")
NOW = {
    "name": "now",
    "description": "The time (no arguments).",
    "inputSchema": {"type": "object", "additionalProperties": False},
}
if MODE == "control-characters":
    FORGED = "x\n  pass  forged    required  \x1b[32mall good\x1b[0m"
    INFO = {"name": FORGED, "version": FORGED}
    ADD = {**ADD, "name": FORGED}
    STATELESS = (*STATELESS, FORGED)


REPLIES = [0]


def send(message):
    if MODE == "silent":
        return
    if MODE == "counter-ids" and message.get("id") is not None:
        REPLIES[0] += 1
        message["id"] = REPLIES[0]
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def error(request_id, code, text, data=None):
    body = {"code": code, "message": text}
    if data is not None:
        body["data"] = data
    send({"jsonrpc": "2.0", "id": request_id, "error": body})


def initialize(params):
    asked = params.get("protocolVersion")
    if asked in HANDSHAKE:
        version = asked
    elif MODE == "version-error":
        return None
    else:
        version = HANDSHAKE[-1]
    if MODE == "ignores-requested-version":
        version = "2024-11-05"
    result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": INFO}
    if MODE == "no-server-info":
        del result["serverInfo"]
    return result


def call_tool(params):
    name = params.get("name")
    if MODE == "control-characters" and name == ADD["name"]:
        sys.stderr.write(ADD["name"] + "\n")
        return {"content": [{"type": "text", "text": "3"}], "isError": True}
    if name == "now" and MODE == "no-args-tool-fails":
        return {"content": [{"type": "text", "text": "no clock here"}], "isError": True}
    if name != "add":
        if MODE == "unknown-tool-succeeds":
            return {"content": [{"type": "text", "text": "done"}]}
        return None
    if MODE in ("hang", "hang-with-child"):
        time.sleep(3600)
    if MODE == "bad-content":
        return {"content": [{"text": "3"}]}
    args = params.get("arguments") or {}
    if MODE == "tool-error":
        return {"content": [{"type": "text", "text": "database is locked"}], "isError": True}
    return {"content": [{"type": "text", "text": str(args.get("a", 0) + args.get("b", 0))}]}


def handle(message, state):
    request_id = message.get("id")
    method = message["method"]
    params = message.get("params") or {}
    if "id" not in message:  # a notification
        if MODE == "reply-to-notification":
            send({"jsonrpc": "2.0", "result": {}})
        return
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    stateless = VERSION_KEY in meta
    judged = MODE != "version-on-first-request-only" or not state.get("version-seen")
    if stateless and meta[VERSION_KEY] in STATELESS:
        state["version-seen"] = True  # the bug: the version "of the connection" is remembered
    if stateless and meta[VERSION_KEY] not in STATELESS and MODE != "serves-any-version" and judged:
        error(
            request_id,
            -32022,
            "Unsupported protocol version",
            {"supported": list(STATELESS), "requested": meta[VERSION_KEY]},
        )
        return
    if method == "initialize":
        result = initialize(params)
        if result is None:
            error(request_id, -32602, "Unsupported protocol version")
            return
        state["initialized"] = True
    elif not stateless and not state.get("initialized") and MODE != "no-meta-check":
        error(request_id, -32602, "params._meta with the protocol version is required")
        return
    elif method == "ping":
        result = {}
    elif method == "server/discover" and MODE != "no-discover":
        result = {
            "supportedVersions": list(STATELESS),
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": INFO},
        }
    elif method == "tools/list":
        result = {"tools": [ADD, BAD] if MODE == "bad-input-schema" else [ADD]}
        if MODE == "no-args-tool-fails":
            result = {"tools": [ADD, NOW]}
        if MODE == "huge-min-length":
            result = {"tools": [HUGE]}
    elif method == "tools/call":
        result = call_tool(params)
        if result is None:
            if MODE == "error-and-result":
                body = {"code": -32602, "message": "Unknown tool"}
                done = {"content": [{"type": "text", "text": "done"}]}
                send({"jsonrpc": "2.0", "id": request_id, "error": body, "result": done})
                return
            error(request_id, -32602, f"Unknown tool: {params.get('name')}")
            return
    else:
        if MODE == "exit-on-unknown-method":
            sys.exit("unknown method: giving up")
        code = -32602 if MODE == "unknown-method-wrong-code" else -32601
        error(request_id, code, "Method not found")
        return
    if stateless and not (MODE == "no-result-type" and method == "server/discover"):
        result["resultType"] = "complete"
    hinted = not (MODE == "no-list-cache-hints" and method == "tools/list")
    if stateless and method in CACHEABLE and hinted:
        result.update(CACHE_HINTS)
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main():
    if MODE == "hang-with-child":
        # Out of our process group, with our stdout: it outlives a kill of the group.
        sleep = ["import time; time.sleep(3600)", *sys.argv[2:]]
        subprocess.Popen([sys.executable, "-c", *sleep], start_new_session=True)
    if MODE == "logs-on-stdout":
        print("stdlib-server starting on stdio")
    if MODE == "non-utf8":
        sys.stdout.buffer.write(b"\xff\xfe starting\n")
    if MODE == "huge-line":
        sys.stdout.write("x" * (5 * 1024 * 1024) + "\n")
    sys.stdout.flush()
    state = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            if MODE == "crash-on-malformed":
                raise
            if MODE == "parse-error-and-result":
                body = {"code": -32700, "message": "Parse error"}
                send({"jsonrpc": "2.0", "id": None, "error": body, "result": {}})
                continue
            error(1 if MODE == "parse-error-with-id" else None, -32700, "Parse error")
            if MODE == "exit-after-parse-error":
                return
            continue
        valid = (
            isinstance(message, dict)
            and message.get("jsonrpc") == "2.0"
            and isinstance(message.get("method"), str)
        )
        if not valid:
            if MODE != "no-invalid-request":
                request_id = message.get("id") if isinstance(message, dict) else None
                error(
                    request_id if isinstance(request_id, (str, int)) else None,
                    -32600,
                    "Invalid Request",
                )
            continue
        handle(message, state)


if __name__ == "__main__":
    main()
