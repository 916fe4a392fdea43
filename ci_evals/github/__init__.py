"""GitHub at the edge: Actions I/O (`actions`), the event payload (`event`),
the sticky pull-request comment over the REST API (`comment`), and the
baseline run's artifact (`artifacts`, unpacked by `safe_zip`).

Settings come from the environment into one record each (`ActionsEnv`,
`CommentSettings`); nothing else in ci-evals reads GitHub's variables.
"""
