#!/bin/sh
# The hidden tests of mcp-sqlite-server, run by the suite's command grader inside
# the sandbox, in a copy of the agent's workspace; never visible to the agent.
# The results go where only the grader's identity can write; check.py starts the
# agent's server through $CI_EVALS_AS_AGENT (docs/grading.md); by hand, both default
# to you and the current folder.
exec python3 "$(dirname "$0")/check.py" "${CI_EVALS_RESULTS:-.}/hidden-results.json"
