"""`front_matter`: every matching file starts with a YAML front matter block
holding every key required, read as Claude Code reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ci_evals.config.front_matter import read_front_matter
from ci_evals.grading.kinds.checks.base import CheckOutcome, Evidence
from ci_evals.grading.kinds.checks.folder import each_file, read_text
from ci_evals.grading.kinds.checks.paths import GLOBS_SCHEMA, globs_of
from ci_evals.text import one_line

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext


@dataclass(frozen=True)
class HasFrontMatter:
    keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "front_matter": GLOBS_SCHEMA,
        "require": {"type": "array", "items": {"type": "string"}},
    }
    reads_trajectory: ClassVar[bool] = False

    id: str
    globs: tuple[str, ...]
    require: tuple[str, ...]  # keys of the YAML front matter (`---` block at the top)

    @classmethod
    def load(
        cls,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> HasFrontMatter:
        if "require" not in given:
            raise item.error("missing required key 'require'")
        globs = globs_of(given["front_matter"])
        return cls(
            id=explicit_id or f"front_matter:{','.join(globs)}",
            globs=globs,
            require=tuple(given["require"].as_str_list(False)),
        )

    def run(self, evidence: Evidence) -> CheckOutcome:
        def problem(path: Path, name: str) -> str | None:
            try:
                found = read_front_matter(read_text(path))
            except (OSError, ValueError) as exc:
                return f"{name}: cannot read its front matter ({one_line(str(exc), 200)})"
            if not found.present:
                return f"{name}: no front matter (a leading '---' YAML block)"
            if found.problem is not None:
                return f"{found.where(name)}: {found.problem}"
            missing = [key for key in self.require if key not in found.fields]
            return (
                f"{name}: front matter lacks {', '.join(map(repr, missing))}" if missing else None
            )

        passed = f"have all {len(self.require)} front-matter field(s)"
        return each_file(self.id, self.globs, evidence.folder, problem, passed)
