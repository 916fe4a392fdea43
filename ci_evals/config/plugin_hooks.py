"""A plugin's command hooks as Claude Code reads them: `hooks/hooks.json` and the
manifest's `hooks` (a file, a list of files, or the hooks themselves).

Two readers need them: `init`'s draft (which hooks a stub run fires, and a
check for each) and the claude agent's progress (which of the plugin's hooks
the CLI's `hook_started` frame is, while it keeps a stage waiting). Unreadable
files are left to the CLI, which reports them when it loads the plugin. Pure.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MANIFEST = ".claude-plugin/plugin.json"
# How a hook's command names the plugin's own files (the CLI sets it when it runs one).
_PLUGIN_ROOT = re.compile(r"\"?\$\{?CLAUDE_PLUGIN_ROOT\}?\"?/")


@dataclass(frozen=True)
class Hook:
    event: str  # "SessionStart"
    matcher: str  # "" for none
    conditional: bool  # an `if:` condition on the tool call
    command: str  # what it runs, for comments
    background: bool = False  # `async` / `asyncRewake`: the session may end before it does


def read_hooks(plugin_dir: Path, manifest: Mapping[str, object] | None = None) -> list[Hook]:
    """The plugin's command hooks; `manifest` None: read from the folder (none: {})."""
    found = []
    for source in _sources(plugin_dir, manifest):
        events = source.get("hooks") if isinstance(source, dict) else None
        for event, groups in events.items() if isinstance(events, dict) else ():
            for group in groups if isinstance(groups, list) else []:
                if not isinstance(group, dict):
                    continue
                matcher = group.get("matcher")
                for hook in group.get("hooks") or []:
                    if not isinstance(hook, dict):
                        continue
                    found.append(
                        Hook(
                            event=str(event),
                            matcher=matcher if isinstance(matcher, str) else "",
                            conditional="if" in hook,
                            background=bool(hook.get("async") or hook.get("asyncRewake")),
                            command=str(hook.get("command") or hook.get("type") or ""),
                        )
                    )
    return found


def _sources(plugin_dir: Path, manifest: Mapping[str, object] | None) -> list[object]:
    """`hooks/hooks.json`, then what the manifest's `hooks` names or holds."""
    if manifest is None:
        read = _json(plugin_dir / MANIFEST)
        manifest = read if isinstance(read, dict) else {}
    sources: list[object] = []
    default = plugin_dir / "hooks" / "hooks.json"
    if default.is_file():
        sources.append(_json(default))
    given = manifest.get("hooks")
    for item in given if isinstance(given, list) else [given]:
        if isinstance(item, str):
            path = plugin_dir / item
            if not _inside(path, plugin_dir):  # `/etc/x.json`, `../../x`: no file of the plugin
                continue
            if path.is_file() and path != default:
                sources.append(_json(path))
        elif isinstance(item, dict):
            sources.append(item)
    return sources


def matches(matcher: str, value: str) -> bool:
    """Whether a hook group's `matcher` takes `value` (a tool, `startup`), as the CLI
    reads it: empty or `*` takes all, else a regular expression, else the literal."""
    if matcher in ("", "*"):
        return True
    try:
        return re.fullmatch(matcher, value) is not None
    except re.error:
        return matcher == value


def what_runs(hook_name: str, hooks: Sequence[Hook]) -> str:
    """The plugin's commands behind the CLI's hook name (`SessionStart:startup`, its
    event and what the matcher took): `plugin hooks/x.sh`, or "" when none is."""
    event, _, target = hook_name.partition(":")
    commands = [
        _PLUGIN_ROOT.sub("", hook.command)
        for hook in hooks
        if hook.event == event and (not target or matches(hook.matcher, target))
    ]
    shown = "; ".join(dict.fromkeys(command for command in commands if command))
    return f"plugin {shown[:100]}" if shown else ""


def _inside(path: Path, folder: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, top]) == top


# A hooks file or manifest is a few KiB; the agent of an earlier stage may have
# rewritten the plugin copy this is read from (a pipe, /dev/zero, a huge file):
# only a regular file of at most this much is read, never waited on.
_MAX_JSON = 1 << 20


def _json(path: Path) -> object:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_JSON:  # before fdopen: a folder
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(_MAX_JSON + 1)
    try:
        return json.loads(data[:_MAX_JSON].decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
