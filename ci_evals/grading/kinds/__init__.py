"""Grader kinds: what turns a stage's files (and its trajectory) into criteria.

Each kind is one module behind the `Grader` Protocol (`base`) and the
registry in `registry` (a stage key of `ci-evals.yaml` → the kind that loads
it): `checks` (deterministic checks, reading tool calls with `trajectory`),
`command` (command graders), `mcp` (MCP servers the agent built). A package
adds a kind with an entry point in group `ci_evals.graders`. The reviewer, the
one grader that is an agent, is `ci_evals.grading.reviewer`.

The load halves stay cheap (no pydantic, no jsonschema at import): the suite
loader imports them.
"""
