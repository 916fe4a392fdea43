"""Which plugin files `init` drafts as `stage: none`: read by no stage.

A README, a licence or a changelog is shipped with a plugin but never loaded
by Claude Code, and no stage reads it unless a command, skill or agent tells
the model to. So a file whose name is such a document's, and whose name or
path no other file of the plugin mentions, gets `stage: none` in the drafted
map (a change to it runs nothing); one that some file names keeps the stage
the draft gave it. A file inside a skill's folder belongs to the skill (its
files name each other) and is never one of these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

# Documents by their stem (case-insensitive), any extension (`README.md`, `LICENSE`).
_DOCUMENTS = frozenset(
    {
        "readme",
        "license",
        "licence",
        "copying",
        "notice",
        "changelog",
        "changes",
        "history",
        "contributing",
        "authors",
        "code_of_conduct",
        "security",
    }
)


def unread_files(plugin_dir: Path, files: Sequence[str]) -> frozenset[str]:
    """The plugin-relative `files` that no stage reads (see the module doc): a
    document is read when any other file's text names it, by its path or its
    name, with or without the extension."""
    texts = {path: _read(plugin_dir / path) for path in files}
    found = set()
    for path in files:
        pure = PurePosixPath(path)
        if pure.parts[0] == "skills" or pure.stem.lower() not in _DOCUMENTS:
            continue
        names = {path, pure.name, pure.stem}
        pattern = re.compile(
            "|".join(rf"(?<![\w-]){re.escape(name)}(?![\w-])" for name in sorted(names))
        )
        if not any(pattern.search(text) for other, text in texts.items() if other != path):
            found.add(path)
    return frozenset(found)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
