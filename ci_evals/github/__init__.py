"""GitHub at the edge: Actions I/O (`actions`), the event payload (`event`),
the REST API's client (`rest`) and over it the sticky pull-request comment
(`comment`), the baseline run's artifact (`artifacts`, unpacked by `safe_zip`),
and a fork's pull request: its artifact read as untrusted data
(`fork_artifact`) and its head checked over the REST API (`pulls`).

Settings come from the environment into one record each (`ActionsEnv`,
`CommentSettings`); nothing else in ci-evals reads GitHub's variables.
"""
