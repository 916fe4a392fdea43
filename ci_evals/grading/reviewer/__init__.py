"""The reviewer: the plugin's own review agent, run as a grader.

`config` (a stage's `reviewer:` key, validated at load), `review`
(`run_reviewer` on a copy of the state, `fingerprint` for re-use by `grade`),
`rubrics` (the rubric files; where a criterion's kind comes from),
`scorecard` (fail-closed parsing of its final message into criteria),
`untrusted` (what the agent left for its graders: configuration withheld from
the reviewer's copy, outputs that address the grader).
"""
