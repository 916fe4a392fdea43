"""`files`: how many files match the glob(s): `count`, or within `min`/`max`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ci_evals.grading.kinds.checks.base import CheckOutcome, Evidence
from ci_evals.grading.kinds.checks.folder import matches, name_in, outside_note
from ci_evals.grading.kinds.checks.paths import GLOBS_SCHEMA, globs_of

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext

_COUNT = {"type": "integer", "minimum": 0}


@dataclass(frozen=True)
class FilesExist:
    keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "files": GLOBS_SCHEMA,
        "count": _COUNT,
        "min": _COUNT,
        "max": _COUNT,
    }
    reads_trajectory: ClassVar[bool] = False

    id: str
    globs: tuple[str, ...]
    count: int | None = None
    min: int | None = None
    max: int | None = None

    @classmethod
    def load(
        cls,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> FilesExist:
        globs = globs_of(given["files"])
        bounds = {k: given[k].as_int(minimum=0) for k in ("count", "min", "max") if k in given}
        if "count" in bounds and len(bounds) > 1:
            raise given["count"].error("use either 'count' or 'min'/'max'")
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            raise given["max"].error(f"max {bounds['max']} is below min {bounds['min']}")
        if not bounds:
            bounds = {"min": 1}
        return cls(
            id=explicit_id or f"files:{','.join(globs)}",
            globs=globs,
            count=bounds.get("count"),
            min=bounds.get("min"),
            max=bounds.get("max"),
        )

    def run(self, evidence: Evidence) -> CheckOutcome:
        folder = evidence.folder
        files, outside = matches(folder, self.globs)
        n = len(files)
        if self.count is not None:
            want, ok = f"exactly {self.count}", n == self.count
        else:
            low = self.min if self.min is not None else 0
            high = self.max
            ok = n >= low and (high is None or n <= high)
            want = f"at least {low}" if high is None else f"{low} to {high}"
        shown = ", ".join(name_in(folder, f) for f in files[:5]) + (" ..." if n > 5 else "")
        detail = f"{n} file(s) match {', '.join(self.globs)}, expected {want}"
        if shown:
            detail += f": {shown}"
        return CheckOutcome(self.id, ok, detail + outside_note(outside))
