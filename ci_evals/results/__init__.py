"""The versioned record of a run: `results.json` and what it embeds.

- `model` — the pydantic models (`RunResult` → `ScenarioResult` → `StageResult`),
  the one atomic write and the reader (earlier versions migrated forward);
- `top_fields` — a few top-level fields read without the model (replay's);
- `criteria` — criteria, what each grader returned, a stage's verdict;
- `stats` — repeats: mean, stdev, 95% interval, k-of-n;
- `verdict` — how a stage's verdict is decided: its criteria under the
  scoring policy, or its status when nobody graded it;
- `summary` — per (scenario, stage) summaries and the one exit-code rule;
- `migrate` — earlier file versions brought to the current one;
- `consistency` — whether a file agrees with itself (a report believes no
  single field).

Every report reads only these; nothing here runs an agent or a grader.
Importing this package is cheap (no pydantic): the suite loader reads
`DEFAULT_ANALYTIC_THRESHOLD` and `normalize_id` from here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

# A run's record, in its run folder (`model.read_results` reads it whole; replay
# reads a few fields of one with `top_fields`).
RESULTS_FILE = "results.json"

# The seeds' default: a stage passes when the (weighted) mean of its analytic
# criteria is at least this. The scoring policy defaults to it, the scorecard
# marks single criteria with it, and a stage without a verdict records it.
DEFAULT_ANALYTIC_THRESHOLD = 3.0

# A stage with graders left `completed`: the run stopped between the agent and
# its graders (or the file was edited). Nobody judged it: an error, never a pass.
NOT_GRADED = "not graded: the stage has graders but no verdict was recorded"


# A criterion id's separators, all compared as `-` (`normalize_id`).
_SEPARATORS = re.compile(r"[\s_]+")


def normalize_id(name: str) -> str:
    """The form criterion ids are compared in: lower case, `_`/spaces -> `-`, a path ->
    its stem."""
    text = name.strip()
    if "/" in text or text.endswith(".md"):
        text = Path(text).stem if text.endswith(".md") else text.rsplit("/", 1)[-1]
    return _SEPARATORS.sub("-", text).lower()


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


# A model id as a recording may name it: a committed recording is hostile, and its
# model is shown in reports and asked for again. Plain ASCII, no space or control
# character, bounded: `claude-sonnet-4-5`, `claude-3-5-sonnet@20240620`, a Bedrock
# id or ARN (`us.anthropic.claude-...-v1:0`, `arn:aws:bedrock:...`), `sonnet[1m]`.
MAX_MODEL_ID = 200
MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]*")


def model_id_problem(value: str) -> str | None:
    """Why `value` is no model id (`MODEL_ID`, at most `MAX_MODEL_ID` characters), or None."""
    if len(value) > MAX_MODEL_ID:
        return f"{len(value)} characters, over {MAX_MODEL_ID}"
    if not MODEL_ID.fullmatch(value):
        return "not a model id (letters, digits and . _ : @ / [ ] -)"
    return None
