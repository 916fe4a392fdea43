"""Grading a saved workspace state with the graders of `ci_evals.grading`.

Above `ci_evals.suite` (each takes the loaded suite as input) and beside
`ci_evals.workspace` (neither imports the other); `ci_evals.grading` below
holds what a grader is, this package runs them on what a stage left:

- `files` — `grade_files`: every file grader of the stage on a folder, plus
  the reviewer's result, under the scoring policy;
- `pipeline` — `grade_state`: one saved state → `StageVerdict` (the reviewer
  on a copy through the Agent seam, or a re-used scorecard; then `files`), and
  `apply_verdict`; shared by the run's grading hook (`run.grading_hook`),
  `ci-evals grade` and `check-fixtures`;
- `regrade` — what `ci-evals grade RUN_DIR` decides (its command is
  `run/grade.py`): which stages, reviewer re-use by fingerprint, a new results
  file; no agent stage ever runs.
"""
