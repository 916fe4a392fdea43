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

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

# The seeds' default: a stage passes when the (weighted) mean of its analytic
# criteria is at least this. The scoring policy defaults to it, the scorecard
# marks single criteria with it, and a stage without a verdict records it.
DEFAULT_ANALYTIC_THRESHOLD = 3.0

# A stage with graders left `completed`: the run stopped between the agent and
# its graders (or the file was edited). Nobody judged it: an error, never a pass.
NOT_GRADED = "not graded: the stage has graders but no verdict was recorded"


class _Miss(Protocol):  # `model.EndpointMiss`, without importing pydantic here
    @property
    def outcome(self) -> str: ...


def miss_source(misses: Iterable[_Miss]) -> str:
    """Who had no answer for a stage's `endpoint_misses`, as its status word says it
    (`error:replay`, `error:stub`): `replay` when a replayed recording diverged,
    else `stub` (its script had no rule or no turn left)."""
    return "replay" if any(m.outcome == "diverged" for m in misses) else "stub"


# Who `miss_source` names, in a sentence ("... had no answer for").
MISSED_BY = {"stub": "the stub model", "replay": "the replayed recording"}
