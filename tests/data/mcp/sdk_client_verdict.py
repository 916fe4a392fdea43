"""The official comparison: the `mcp` package's own client against a stdio server.

    python sdk_client_verdict.py MODE TOOL ARGUMENTS_JSON -- COMMAND [ARG...]

MODE is `legacy` (the initialize handshake) or a stateless revision (`2026-07-28`).
The client (mcp 2.x `Client`) connects, lists the tools and calls TOOL with the
arguments, validating every result against the SDK's typed models (mcp-types);
it prints one JSON object: {"mode", "ok", "protocol", "tools", "call", "error"}.
No npm registry is reachable here, so the npm conformance tool and the Inspector
cannot run: this is the official tooling that can.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


async def verdict(mode, tool, arguments, argv):
    out = {"mode": mode, "ok": False, "protocol": None, "tools": [], "call": None, "error": None}
    server = StdioServerParameters(command=argv[0], args=argv[1:])
    try:
        async with Client(server, mode=mode, read_timeout_seconds=20) as client:
            out["protocol"] = client.protocol_version
            listed = await client.list_tools()
            out["tools"] = [t.name for t in listed.tools]
            result = await client.call_tool(tool, arguments)
            out["call"] = "isError" if getattr(result, "is_error", False) else "ok"
            out["ok"] = True
    except Exception as exc:  # the verdict is what failed, said
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def main():
    mode, tool, arguments, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: MODE TOOL ARGUMENTS_JSON -- COMMAND [ARG...]"
    print(json.dumps(asyncio.run(verdict(mode, tool, json.loads(arguments), argv))))


if __name__ == "__main__":
    main()
