"""Graders: what turns a stage's files (and its trajectory) into criteria.

Each kind is one module behind the `Grader` Protocol and the registry in
`registry` (a stage key of `ci-evals.yaml` → the kind that loads it):
`checks` (deterministic checks), `command` (command graders), `reviewer` (the
plugin's own review agent). Around them: `rubrics` (where a criterion's kind
comes from), `scorecard` (fail-closed parsing of a reviewer's final message),
`scoring` (the pass/fail policy), `trajectory` (reading tool calls), `config`
(a stage's graders, validated at load).

The config halves stay cheap (no pydantic, no jsonschema at import): the
suite loader imports them.
"""
