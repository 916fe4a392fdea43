"""The versioned record of a run: `results.json` and what it embeds.

- `model` — the pydantic models (`RunResult` → `ScenarioResult` → `StageResult`),
  the one atomic write and the reader (earlier versions migrated forward);
- `criteria` — criteria, what each grader returned, a stage's verdict;
- `stats` — repeats: mean, stdev, 95% interval, k-of-n;
- `summary` — per (scenario, stage) summaries and the one exit-code rule;
- `migrate` — earlier file versions brought to the current one;
- `consistency` — whether a file agrees with itself (a report believes no
  single field).

Every report reads only these; nothing here runs an agent or a grader.
Importing this package is cheap (no pydantic): the suite loader reads
`DEFAULT_ANALYTIC_THRESHOLD` from here.
"""

# The seeds' default: a stage passes when the (weighted) mean of its analytic
# criteria is at least this. The scoring policy defaults to it, the scorecard
# marks single criteria with it, and a stage without a verdict records it.
DEFAULT_ANALYTIC_THRESHOLD = 3.0

# A stage with graders left `completed`: the run stopped between the agent and
# its graders (or the file was edited). Nobody judged it: an error, never a pass.
NOT_GRADED = "not graded: the stage has graders but no verdict was recorded"
