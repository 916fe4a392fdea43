"""Grading a stage's saved state: the graders of `ci_evals.graders` run on it,
and their results become the stage's verdict.

- `pipeline` — `grade_state`: one saved state → `StageVerdict` (the reviewer on
  a copy through the Agent seam, or a re-used scorecard; then `files`), and
  `apply_verdict`; shared by the run's grading hook, `grade` and `check-fixtures`;
- `files` — `grade_files`: every file grader of the stage on a folder, plus the
  reviewer's result, under the scoring policy;
- `regrade` — `ci-evals grade RUN_DIR`: which stages, reviewer re-use by
  fingerprint, a new results file; no agent stage ever runs.
"""
