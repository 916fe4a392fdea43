"""What a check is: a `CheckKind` (the class `registry` names) loads a `Check`, which
looks at the `Evidence` of one stage and gives a `CheckOutcome`."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ci_evals.grading.kinds.trajectory import Trajectory, read_trajectory

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext

# The key every check takes besides its kind's own.
ID = "id"


class CheckOutcome(NamedTuple):
    """One check's result before it becomes a `Criterion` (no pydantic needed)."""

    id: str
    passed: bool
    detail: str


class Evidence:
    """What the checks of one stage look at: its folder, and its trajectory, read
    once and only if a check needs it."""

    def __init__(self, folder: Path, trajectory: Path | None) -> None:
        self.folder = folder.resolve()
        self._trajectory_file = trajectory

    @cached_property
    def trajectory(self) -> Trajectory | str:
        """The tool calls and hook runs, or why they cannot be known (which fails
        every trajectory check)."""
        path = self._trajectory_file
        if path is None:
            return "no trajectory was recorded for this stage"
        try:
            return read_trajectory(path)
        except FileNotFoundError:
            return f"trajectory file not found: {path}"
        except (OSError, ValueError) as exc:
            return f"trajectory {path.name} unreadable: {exc}"


class Check(Protocol):
    """One loaded check of a stage (a frozen record): one criterion when run."""

    @property
    def id(self) -> str:
        """Its criterion's id: the `id:` given, or its kind's default (`files:lab/lab.md`)."""

    @property
    def reads_trajectory(self) -> bool:
        """It looks at what the stage called: left out where there is no trajectory
        (a fixture)."""

    def run(self, evidence: Evidence) -> CheckOutcome:
        """Never raises on what the agent wrote: a missing or malformed file is a
        failed outcome, the reason in its detail."""


class CheckKind(Protocol):
    """One kind of check, as `registry` names it: the class of its checks."""

    @property
    def keys(self) -> Mapping[str, Mapping[str, Any]]:
        """Its keys in a check's mapping, the first naming the kind (`files`), the
        others its options (`count`, `min`, `max`), each with the JSON Schema of its
        value: together, its branch of `ci_evals/schemas/ci-evals.schema.json`."""

    def load(
        self,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> Check:
        """A check from its `given` keys (only its own, and `id`, already checked);
        a mistake is an `item.error` at its file:line. A file it names (a schema) is
        read now, so a typo fails at load."""
