"""GitHub at the edge: Actions I/O (`actions`), the event payload (`event`) and
the sticky pull-request comment over the REST API (`comment`).

Settings come from the environment into one record each (`ActionsEnv`,
`CommentSettings`); nothing else in ci-evals reads GitHub's variables.
"""
