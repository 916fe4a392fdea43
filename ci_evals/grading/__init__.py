"""Grading: a stage's saved state (and its trajectory) → criteria → a verdict.

Two halves, by when they run. Loaded with the suite (`ci_evals.suite` sits
above them; cheap at import: no pydantic, no jsonschema):

- `kinds/` — the Grader seam (`base`, `registry`) and the built-in grader
  kinds: `checks` (deterministic checks; `trajectory` reads tool calls for
  them), `command` (command graders), `mcp` (MCP servers the agent built);
- `reviewer/` — the plugin's own review agent as a grader: `config` (its
  stage key), `review` (`run_reviewer`, `fingerprint`), `rubrics` (where a
  criterion's kind comes from), `scorecard` (fail-closed parsing of its final
  message), `untrusted` (what the agent left for its graders);
- `scoring` — the pass/fail policy and `evaluate`;
- `config` — a stage's and the suite's grading keys, validated at load.

Run on a saved state (above `ci_evals.suite`, which they take as input):

- `files` — `grade_files`: every file grader of the stage on a folder, plus
  the reviewer's result, under the scoring policy;
- `pipeline` — `grade_state`: one saved state → `StageVerdict` (the reviewer
  on a copy through the Agent seam, or a re-used scorecard; then `files`), and
  `apply_verdict`; shared by the run's grading hook, `grade` and
  `check-fixtures`;
- `regrade` — `ci-evals grade RUN_DIR`: which stages, reviewer re-use by
  fingerprint, a new results file; no agent stage ever runs.
"""
