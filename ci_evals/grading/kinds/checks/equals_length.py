"""`equals_length`: in one JSON file, the integer at `field` equals the length of
the list at `array` (dotted paths)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ci_evals.grading.kinds.checks.base import CheckOutcome, Evidence
from ci_evals.grading.kinds.checks.folder import matches, outside_note, parse_json, read_text
from ci_evals.grading.kinds.checks.paths import relative_path

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext

_MISSING = object()


@dataclass(frozen=True)
class EqualsLength:
    keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "equals_length": {"type": "string"},
        "field": {"type": "string"},
        "array": {"type": "string"},
    }
    reads_trajectory: ClassVar[bool] = False

    id: str
    file: str
    field: str  # dotted path to an integer: "chapter_count", "meta.count"
    array: str  # dotted path to a list: "chapters", "plan.chapters"

    @classmethod
    def load(
        cls,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> EqualsLength:
        for key in ("field", "array"):
            if key not in given:
                raise item.error(f"missing required key {key!r}")
        path = relative_path(given["equals_length"])
        field_path = given["field"].as_str()
        return cls(
            id=explicit_id or f"equals_length:{path}:{field_path}",
            file=path,
            field=field_path,
            array=given["array"].as_str(),
        )

    def run(self, evidence: Evidence) -> CheckOutcome:
        files, outside = matches(evidence.folder, (self.file,))
        if len(files) != 1:
            found = "no file" if not files else f"{len(files)} files"
            return CheckOutcome(self.id, False, f"{found} match {self.file}{outside_note(outside)}")
        try:
            document = parse_json(read_text(files[0]))
        except (OSError, ValueError) as exc:
            return CheckOutcome(self.id, False, f"{self.file}: not valid JSON ({exc})")
        count = dotted(document, self.field)
        array = dotted(document, self.array)
        problem = None
        if count is _MISSING or array is _MISSING:
            problem = f"no field {self.field if count is _MISSING else self.array!r}"
        elif isinstance(count, bool) or not isinstance(count, int):
            problem = f"{self.field} is {json.dumps(count)}, not an integer"
        elif not isinstance(array, list):
            problem = f"{self.array} is not an array"
        if problem is not None:
            return CheckOutcome(self.id, False, f"{self.file}: {problem}")
        relation = "==" if count == len(array) else "!="
        detail = f"{self.file}: {self.field} {count} {relation} len({self.array}) {len(array)}"
        return CheckOutcome(self.id, count == len(array), detail)


def dotted(document: Any, path: str) -> Any:
    """`document` at a dotted path (`a.b.0.c`; digits index lists); `_MISSING` if absent."""
    value = document
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value
