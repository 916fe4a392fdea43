"""`copy_plugin`: the plugin's folder copied for a workspace or a grader.

Links are followed: a link out of the plugin folder becomes a copy of what it
points at, so nothing in the copy leads back into the repository. The copy is
named `plugin/`, not after the plugin, so a plugin Claude Code names after its
folder or its marketplace entry (it has no manifest of its own) gets one
written into the copy that says the same name (`suite.plugin_source`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.text import display_path

MANIFEST = ".claude-plugin/plugin.json"


def copy_plugin(source: Path, dest: Path, manifest: Mapping[str, object] | None = None) -> None:
    """Copy `source` to `dest` (which must not exist); write `manifest` into the copy."""
    try:
        shutil.copytree(source, dest, symlinks=False)
        if manifest is not None:
            path = dest / MANIFEST
            path.parent.mkdir(exist_ok=True)
            path.write_text(json.dumps(dict(manifest), indent=2) + "\n", encoding="utf-8")
    except (OSError, shutil.Error) as exc:
        raise UserError(f"cannot copy the plugin {display_path(source)}: {exc}") from None
