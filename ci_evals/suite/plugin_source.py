"""Which folder is the plugin under test, and the name Claude Code gives it.

Claude Code loads a folder as a plugin with or without a manifest. With
`.claude-plugin/plugin.json`, its `name` names the commands (`/NAME:command`)
and its component keys add folders to the standard ones. Without one, the
components load from the standard folders and the name is the folder's own
(`--plugin-dir DIR`, which is how ci-evals loads it) or, for a plugin installed
from a marketplace, its entry's `name`. Official plugins ship both ways, so
ci-evals accepts both. A suite may name a marketplace entry (`plugin:
{marketplace: ., name: NAME}`); only a folder of this repository can be
evaluated, and with no manifest of its own (or `strict: false`) the entry is the
plugin's manifest, as Claude Code reads it.

ci-evals copies the plugin into every workspace as `plugin/`; a name that did
not come from a manifest in the folder would be lost with the folder's name,
so `PluginSource.manifest_to_write` is what the copy must carry. docs/suite.md
(*Plugin*).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.text import display_path

MANIFEST = ".claude-plugin/plugin.json"
MARKETPLACE = ".claude-plugin/marketplace.json"
# A plugin name as Claude Code uses it: /NAME:command, and a folder name in its caches.
PLUGIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NAME_HINT = (
    "letters, digits, '-', '_' and '.', starting with a letter or digit "
    "(no '/', no '..'): it names the commands, /NAME:command"
)
# The keys of a marketplace entry that describe the plugin itself; the others
# (`source`, `category`, `tags`, `strict`, ...) describe the listing.
_ENTRY_MANIFEST_KEYS = (
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "lspServers",
    "outputStyles",
)


@dataclass(frozen=True)
class PluginSource:
    path: Path  # the plugin's folder, absolute
    name: str  # `/NAME:command`
    manifest: Mapping[str, object]  # what Claude Code reads as its manifest ({} for none)
    origin: str  # where the name came from: "manifest", "folder name", "marketplace entry"
    # `.claude-plugin/marketplace.json` when the plugin was named there: a change
    # to it changes what loads, so the stage map must reach it.
    marketplace: Path | None = None
    # Written into the workspace's copy (`plugin/.claude-plugin/plugin.json`) when
    # the folder's own manifest is not what Claude Code would read: none at all,
    # or a marketplace entry that stands in for it. None: copy as it is.
    manifest_to_write: Mapping[str, object] | None = None


@dataclass(frozen=True)
class MarketplaceEntry:
    name: str
    source: object  # a relative folder (str) or a remote source (a mapping)
    line: int | None  # of its `"name"` in marketplace.json, for messages
    data: Mapping[str, object]  # the whole entry


@dataclass(frozen=True)
class Marketplace:
    file: Path  # its marketplace.json
    entries: tuple[MarketplaceEntry, ...]
    plugin_root: str | None  # `metadata.pluginRoot`: the folder bare sources are in


def plugin_at(path: Path) -> PluginSource:
    """The plugin in folder `path` (absolute), named as `--plugin-dir path` names it."""
    manifest_file = path / MANIFEST
    if manifest_file.is_file():
        data = read_json_object(manifest_file, "plugin manifest")
        return PluginSource(path, plugin_name_of(data, manifest_file), data, "manifest")
    name = path.name
    if not _plain(name):
        raise UserError(
            f"{display_path(path)} has no {MANIFEST}, and Claude Code would name it after "
            f"its folder, {name!r}, which is not a plugin name",
            hint=f"add {MANIFEST} with a name ({_NAME_HINT})",
        )
    return PluginSource(path, name, {}, "folder name", manifest_to_write={"name": name})


def is_marketplace(folder: Path) -> bool:
    return (folder / MARKETPLACE).is_file()


def read_marketplace(folder: Path) -> Marketplace:
    """The plugins a marketplace lists, in its order; a malformed file is a one-line error."""
    file = folder / MARKETPLACE
    data = read_json_object(file, "marketplace")
    plugins = data.get("plugins")
    if not isinstance(plugins, list):
        raise UserError(
            'a marketplace needs a "plugins" list',
            file=file,
            line=json_key_line(file, "plugins"),
            field="plugins",
        )
    entries = []
    for index, item in enumerate(plugins):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise UserError(
                'every plugin entry needs a "name" string',
                file=file,
                field=f"plugins[{index}].name",
            )
        assert isinstance(item, dict)
        entries.append(MarketplaceEntry(name, item.get("source"), _entry_line(file, name), item))
    metadata = data.get("metadata")
    plugin_root = metadata.get("pluginRoot") if isinstance(metadata, dict) else None
    return Marketplace(file, tuple(entries), plugin_root if isinstance(plugin_root, str) else None)


def plugin_in_marketplace(folder: Path, name: str) -> PluginSource:
    """The plugin a marketplace (the folder holding `.claude-plugin/`) lists as `name`."""
    market = read_marketplace(folder)
    file = market.file
    entry = next((e for e in market.entries if e.name == name), None)
    if entry is None:
        listed = ", ".join(e.name for e in market.entries) or "none"
        raise UserError(
            f"the marketplace lists no plugin {name!r}",
            file=file,
            hint=f"its plugins: {listed}",
        )
    item = entry.data
    if not isinstance(entry.source, str):
        kind = entry.source.get("source") if isinstance(entry.source, dict) else None
        raise UserError(
            f"plugin {name!r} comes from {'a ' + str(kind) + ' source' if kind else 'elsewhere'}, "
            "not a folder of this repository",
            file=file,
            line=entry.line,
            field="source",
            hint="ci-evals evaluates the plugin's files in this repository: vendor it, or "
            "point the suite's plugin: at its folder",
        )
    base = folder
    if market.plugin_root is not None and not entry.source.startswith(("./", "../")):
        base = folder / market.plugin_root  # "source": "formatter", "pluginRoot": "./plugins"
    path = Path(os.path.normpath(base / entry.source))
    if not path.is_relative_to(folder):
        raise UserError(
            f"plugin {name!r}: its source {entry.source!r} is outside the marketplace's folder",
            file=file,
            line=entry.line,
            field="source",
        )
    if not path.is_dir():
        raise UserError(
            f"plugin {name!r}: no folder {display_path(path)}",
            file=file,
            line=entry.line,
            field="source",
        )
    own = (path / MANIFEST).is_file()
    if own and item.get("strict", True) is not False:
        found = plugin_at(path)  # its own manifest decides, as with --plugin-dir
        return PluginSource(found.path, found.name, found.manifest, found.origin, file)
    if not _plain(name):
        raise UserError(
            f"plugin {name!r} has no manifest of its own, and its marketplace name is not "
            "a plugin name",
            file=file,
            line=entry.line,
            field="name",
            hint=_NAME_HINT,
        )
    manifest = {key: item[key] for key in _ENTRY_MANIFEST_KEYS if key in item}
    return PluginSource(path, name, manifest, "marketplace entry", file, manifest_to_write=manifest)


def plugin_name_of(data: Mapping[str, object], manifest: Path) -> str:
    """The manifest's `name`, checked: it names the commands (/NAME:command)."""
    plugin_name = data.get("name")
    if not isinstance(plugin_name, str) or not plugin_name.strip():
        raise UserError('the manifest needs a "name" string', file=manifest, field="name")
    if not _plain(plugin_name):
        raise UserError(
            f"not a plain plugin name: {plugin_name!r}",
            file=manifest,
            line=json_key_line(manifest, "name"),
            field="name",
            hint=_NAME_HINT,
        )
    return plugin_name


def read_json_object(file: Path, what: str) -> dict[str, object]:
    """A JSON file holding an object ({} when it holds another value)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what}: {exc}", file=file) from None
    except json.JSONDecodeError as exc:
        raise UserError(
            f"invalid JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno
        ) from None
    except RecursionError:
        raise UserError(f"cannot read {what}: nested too deeply", file=file) from None
    return data if isinstance(data, dict) else {}


def json_key_line(path: Path, key: str) -> int | None:
    """The line of the first `"key":` in a JSON file (for the error message), if found."""
    return _first_line(path, rf'"{re.escape(key)}"\s*:')


def _plain(name: str) -> bool:
    return bool(PLUGIN_NAME.fullmatch(name)) and ".." not in name


def _entry_line(file: Path, name: str) -> int | None:
    return _first_line(file, rf'"name"\s*:\s*{re.escape(json.dumps(name))}')


def _first_line(path: Path, pattern: str) -> int | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = re.search(pattern, text)
    return None if match is None else text.count("\n", 0, match.start()) + 1
