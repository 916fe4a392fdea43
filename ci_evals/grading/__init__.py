"""Grading: what a grader is, loaded with the suite (`ci_evals.suite` sits above).

Cheap at import: no pydantic, no jsonschema.

- `kinds/` — the Grader seam (`base`, `registry`) and the built-in grader
  kinds: `checks` (deterministic checks; `trajectory` reads tool calls for
  them), `command` (command graders), `mcp` (MCP servers the agent built);
- `reviewer/` — the plugin's own review agent as a grader: `config` (its
  stage key), `review` (`run_reviewer`, `fingerprint`), `rubrics` (where a
  criterion's kind comes from), `scorecard` (fail-closed parsing of its final
  message), `untrusted` (what the agent left for its graders);
- `config` — a stage's and the suite's grading keys (`scoring:` among them),
  validated at load.

Running them on a saved state is `ci_evals.grade_state`, above the suite; the
pass/fail policy they are held to is `ci_evals.results.verdict`, below.
"""
