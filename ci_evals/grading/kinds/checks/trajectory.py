"""`trajectory`: the stage called (or, with `used: false`, never called) a tool, a
skill or a subagent; or a hook on an event ran and succeeded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ci_evals.grading.kinds.checks.base import CheckOutcome, Evidence
from ci_evals.grading.kinds.trajectory import Trajectory, What, count_calls, hook_runs

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext

_WHAT: tuple[What, ...] = ("tool", "skill", "subagent", "hook")


@dataclass(frozen=True)
class TrajectoryUse:
    keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "trajectory": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                **{what: {"type": "string"} for what in _WHAT},
                "used": {"type": "boolean"},
            },
        },
    }
    reads_trajectory: ClassVar[bool] = True

    id: str
    what: What
    name: str  # "Bash"; "research-product"; "labsmith:lab-planner" or "lab-planner"
    used: bool = True

    @classmethod
    def load(
        cls,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> TrajectoryUse:
        main = given["trajectory"]
        spec = main.mapping((*_WHAT, "used"), what="trajectory check")
        named = [k for k in _WHAT if k in spec]
        if len(named) != 1:
            raise main.error("a trajectory check names exactly one of tool, skill, subagent, hook")
        used = spec["used"].as_bool() if "used" in spec else True
        name = spec[named[0]].as_str()
        default_id = f"trajectory:{named[0]}{'' if used else '-not'}-used:{name}"
        return cls(id=explicit_id or default_id, what=named[0], name=name, used=used)

    def run(self, evidence: Evidence) -> CheckOutcome:
        found = evidence.trajectory
        if isinstance(found, str):
            return CheckOutcome(self.id, False, found)
        if self.what == "hook":
            return self._hook(found)
        label = f"{self.what} {self.name!r}"
        count = count_calls(found.uses, self.what, self.name)
        if self.used:
            detail = f"{label} called {count} time(s)" if count else f"{label} was never called"
            return CheckOutcome(self.id, count > 0, detail)
        detail = (
            f"{label} called {count} time(s), expected never" if count else f"{label} not called"
        )
        return CheckOutcome(self.id, count == 0, detail)

    def _hook(self, found: Trajectory) -> CheckOutcome:
        """A hook fired: it ran to its end and succeeded (a failed hook says why)."""
        runs = hook_runs(found.hooks, self.name)
        ok = [run for run in runs if run.ok]
        label = f"hook {self.name!r}"
        if not self.used:
            detail = (
                f"{label} ran {len(runs)} time(s), expected never"
                if runs
                else f"{label} did not run"
            )
            return CheckOutcome(self.id, not runs, detail)
        if ok:
            return CheckOutcome(self.id, True, f"{label} ran {len(ok)} time(s)")
        if not runs:
            return CheckOutcome(self.id, False, f"{label} never ran")
        last = runs[-1]
        code = "" if last.exit_code is None else f", exit {last.exit_code}"
        said = f": {last.said}" if last.said else ""
        return CheckOutcome(
            self.id,
            False,
            f"{label} ({last.name}) ran {len(runs)} time(s), never succeeded "
            f"({last.outcome or 'no outcome'}{code}){said}",
        )
