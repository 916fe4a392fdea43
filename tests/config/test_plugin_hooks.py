"""The plugin's hooks as ci-evals reads them to name a slow hook and to draft checks.

They are read on the host from a plugin copy that an earlier stage's agent may
have rewritten: a pipe, a device, a folder or a huge file where `hooks.json` was,
or a manifest naming a file outside the plugin, is read as no hooks, at once.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from ci_evals.config.plugin_hooks import read_hooks

HOOKS = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x.sh"}]}]}}


def _plugin(tmp_path: Path, manifest: dict[str, object] | None = None) -> Path:
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest or {"name": "p"}))
    (plugin / "hooks").mkdir()
    return plugin


def test_a_plugins_hooks_are_read(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path)
    (plugin / "hooks" / "hooks.json").write_text(json.dumps(HOOKS))
    assert [(h.event, h.command) for h in read_hooks(plugin)] == [("SessionStart", "x.sh")]


@pytest.mark.parametrize("kind", ["fifo", "zero", "folder", "huge"])
def test_a_hooks_file_that_is_no_small_file_is_read_as_none_at_once(
    tmp_path: Path, kind: str
) -> None:
    plugin = _plugin(tmp_path)
    target = plugin / "hooks" / "hooks.json"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "zero":
        target.symlink_to("/dev/zero")
    elif kind == "folder":
        target.mkdir()
    else:
        with target.open("wb") as handle:
            handle.truncate(64 << 20)  # sparse: 64 MiB of NULs
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(read_hooks(plugin)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), f"read_hooks waited on a {kind}"
    assert found == [[]]


def test_a_manifest_naming_a_file_outside_the_plugin_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "host.json"
    outside.write_text(json.dumps(HOOKS))
    for named in (str(outside), "../host.json"):
        plugin = _plugin(tmp_path / named.replace("/", "_"), {"name": "p", "hooks": named})
        if named.startswith(".."):
            (plugin.parent / "host.json").write_text(json.dumps(HOOKS))
        assert read_hooks(plugin) == [], named
