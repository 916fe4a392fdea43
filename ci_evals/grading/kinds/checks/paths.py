"""A check's paths as a suite writes them: globs relative to the graded folder,
never reaching out of it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

# The JSON Schema of what `globs_of` reads (for a kind's `keys`).
GLOBS_SCHEMA = {
    "anyOf": [
        {"type": "string"},
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
    ]
}


def globs_of(value: LocatedNode) -> tuple[str, ...]:
    """A path/glob or a list of them, each relative to the graded folder."""
    if value.is_null():
        raise value.error("expected a path or glob")
    if isinstance(value.node, yaml.SequenceNode):
        return tuple(relative_path(item) for item in value.sequence(allow_empty=False))
    return (relative_path(value),)


def relative_path(value: LocatedNode) -> str:
    """One path, refused (at its file:line) when absolute or climbing out with `..`."""
    text = value.as_str()
    parts = Path(text).parts
    if Path(text).is_absolute() or ".." in parts:
        raise value.error(
            f"{text!r} must be relative to the workspace and stay inside it",
            hint="checks look only at the stage's own folder",
        )
    return text
