"""`headings`: every matching file has every heading (or heading path) required,
as CommonMark's ATX headings outside code fences."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ci_evals.grading.kinds.checks.base import CheckOutcome, Evidence
from ci_evals.grading.kinds.checks.folder import each_file, read_text
from ci_evals.grading.kinds.checks.paths import GLOBS_SCHEMA, globs_of
from ci_evals.text import one_line

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import LoadContext

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

# A heading path: "## Capabilities > ### Gripper" is a `### Gripper` inside the
# `## Capabilities` section.
PATH_SEPARATOR = " > "


@dataclass(frozen=True)
class HasHeadings:
    keys: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "headings": GLOBS_SCHEMA,
        "require": {"type": "array", "items": {"type": "string"}},
    }
    reads_trajectory: ClassVar[bool] = False

    id: str
    globs: tuple[str, ...]
    # "## Steps" needs a level-2 heading "Steps"; "Steps" accepts any level.
    require: tuple[str, ...]

    @classmethod
    def load(
        cls,
        item: LocatedNode,
        given: Mapping[str, LocatedNode],
        explicit_id: str | None,
        ctx: LoadContext,
    ) -> HasHeadings:
        if "require" not in given:
            raise item.error("missing required key 'require'")
        require = tuple(normalize_heading(h) for h in given["require"].as_str_list(False))
        globs = globs_of(given["headings"])
        return cls(id=explicit_id or f"headings:{','.join(globs)}", globs=globs, require=require)

    def run(self, evidence: Evidence) -> CheckOutcome:
        def problem(path: Path, name: str) -> str | None:
            try:
                present = headings_of(read_text(path))
            except (OSError, ValueError) as exc:
                return f"{name}: cannot read ({exc})"
            missing = [want for want in self.require if not _has_heading(present, want)]
            return f"{name}: missing {', '.join(map(repr, missing))}" if missing else None

        passed = f"have all {len(self.require)}"
        return each_file(self.id, self.globs, evidence.folder, problem, passed)


def normalize_heading(text: str) -> str:
    """ "##  Steps " -> "## Steps"; a heading path has each of its parts normalised."""
    if PATH_SEPARATOR in text:
        return PATH_SEPARATOR.join(normalize_heading(part) for part in text.split(PATH_SEPARATOR))
    match = _ATX.match(text.strip())
    if match:
        return f"{match.group(1)} {one_line(match.group(2) or '')}"
    return one_line(text)


def headings_of(markdown: str) -> list[str]:
    """ATX headings as "## Text" (whitespace collapsed), skipping fenced code blocks."""
    found = []
    fence: str | None = None
    for line in markdown.splitlines():
        marker = _FENCE.match(line)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * 3
            elif marker.group(1).startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        match = _ATX.match(line)
        if match:
            found.append(f"{match.group(1)} {one_line(match.group(2) or '')}")
    return found


def _heading_matches(present: str, want: str) -> bool:
    """`present` ("## Steps") is `want` ("## Steps", or "Steps" at any level)."""
    if want.startswith("#"):
        return present == want
    return present.split(" ", 1)[1] == want


def _has_heading(present: Sequence[str], want: str) -> bool:
    """`want` (a heading or a heading path) is among the file's headings `present`."""
    parts = want.split(PATH_SEPARATOR)
    stack: list[str] = []  # the headings enclosing the current one, outermost first
    for heading in present:
        level = len(heading) - len(heading.lstrip("#"))
        while stack and len(stack[-1]) - len(stack[-1].lstrip("#")) >= level:
            stack.pop()
        if _heading_matches(heading, parts[-1]) and _within(stack, parts[:-1]):
            return True
        stack.append(heading)
    return False


def _within(enclosing: Sequence[str], parts: Sequence[str]) -> bool:
    """`parts` appear in `enclosing` in order (each one inside the one before)."""
    found = iter(enclosing)
    return all(any(_heading_matches(h, part) for h in found) for part in parts)
