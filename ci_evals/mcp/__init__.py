"""Checking MCP servers over stdio: the protocol client and the sub-tests.

`framing` splits a server's stdout into JSON-RPC messages, `session` drives
one server process, `revisions` knows the spec's eras, `subtests` holds the
checks and `check` runs them all, each against a fresh process of its own.
Both the `mcp` grader kind (`grading.kinds.mcp`) and `ci-evals mcp-check` use it.
"""
