"""Grading: turn files on disk and reviewer output into criteria and a verdict.

Every grader returns a `GraderResult` (criteria, or an error); `scoring.evaluate`
applies a `ScoringPolicy` to a stage's grader results and returns a
`StageVerdict`; `stats.summarize_repeats` folds the verdicts of repeated runs.

Modules (each small, each importable on its own):

- `criteria` — the pydantic models (`Criterion`, `GraderResult`, `StageVerdict`).
- `rubrics` — find a reviewer's rubric files; each criterion's kind comes from them.
- `scorecard` — fail-closed parsing of a reviewer's final message.
- `scoring` — the pass/fail policy.
- `stats` — repeats: mean, stdev, 95% CI, k-of-n.
- `checks` — deterministic checks over a folder and a trajectory.
- `command` — command graders (exit code, JUnit XML, JSON sub-results).

Nothing is imported here on purpose: the config loaders in `checks`, `command`
and `scoring` must stay cheap for the suite loader (no pydantic, no jsonschema
at import).
"""
