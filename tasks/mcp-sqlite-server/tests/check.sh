#!/bin/sh
# The hidden tests of mcp-sqlite-server, run by the suite's command grader inside
# the sandbox, in a copy of the agent's workspace; never visible to the agent.
exec python3 "$(dirname "$0")/check.py" hidden-results.json
