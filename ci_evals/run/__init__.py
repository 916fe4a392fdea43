"""Running a suite: `run_command` (one suite's run: checked first, then built and
executed; `ci-evals run` and `check` call it), `tasks` (`run --tasks`: every task
once per agent configuration), `isolation` (the `--isolation` option and its
rule), `provenance` (what results record of the suite and revision), the
`Runner` (scenarios, repeats, stages in their workspaces, results written after
every stage), the progress display (`progress`), and the grading hook the
runner calls after each stage (`grading_hook`). And what runs on a run's or
the fixtures' saved states, the grading without the stages: `grade` (`ci-evals
grade`: a run folder re-graded) and `check_fixtures` (`ci-evals
check-fixtures`: the fixtures against the contracts, then graded)."""
