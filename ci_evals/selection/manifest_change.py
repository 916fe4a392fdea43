"""A change to the marketplace file or to the plugin's manifest: does Claude Code see it?

A marketplace file lists every plugin of the repository, and public
marketplaces edit it in most commits (another plugin's entry, a version bump).
Listed as a `global`, each such edit ran every stage. With the stage map's
`marketplace: {file, plugin}` the file is compared at the merge base and at
HEAD (`git cat-file blob REV:PATH`), parsed, and only what loads this plugin
counts: its own entry, the `renames` chains that lead to or through its name
(the loader follows them when an installed name is not found), and everything
outside `plugins`. `ignore_metadata` keys are removed first, from the entry, the
file and the plugin's own manifest — only keys Claude Code shows in listings and
never loads from (`METADATA_KEYS`), and only while their value is of a shape it
reads (`"version": 1` makes the CLI refuse the whole manifest).

Fail closed: a file added or removed, unreadable, not a JSON object, a `plugins`
that is not a list, the entry added, removed or named twice — each is a change
Claude Code can see, and the detail says which. Every rule:
docs/compute-stage.md (*The marketplace entry and metadata*).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci_evals import git

# Keys of a plugin manifest, a marketplace entry or a marketplace file that
# Claude Code shows (listings, `/plugin`) but loads nothing from (code.claude.com
# docs: plugins reference, "metadata fields"; marketplace reference, plugin
# entries' optional metadata and the file's `owner`, `metadata.description`,
# `metadata.version`). `name`, `source`, `strict`, the component keys
# (`commands`, `agents`, `skills`, `hooks`, `mcpServers`, `lspServers`,
# `outputStyles`, ...) and `metadata.pluginRoot` change what loads: never here.
METADATA_KEYS = (
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "category",
    "tags",
    "owner",
    "$schema",
    # The CLI's plugin schema: "Human-readable name shown in UI ... not used for
    # namespacing or lookup"; read with description and author as "display metadata".
    "displayName",
)


@dataclass(frozen=True)
class ManifestChange:
    seen: bool  # True: Claude Code can see the change (or it cannot be told: fail closed)
    detail: str  # one line for a person


def compare_marketplace(
    repo: Path,
    path: str,
    plugin: str,
    ignore: Sequence[str],
    *,
    merge_bases: Sequence[str],
    head: str,
) -> ManifestChange:
    """The marketplace file at `path`, as far as it loads the plugin `plugin`."""
    return _compare(
        repo, path, merge_bases, head, lambda data: _marketplace_view(data, plugin, ignore)
    )


def compare_manifest(
    repo: Path, path: str, ignore: Sequence[str], *, merge_bases: Sequence[str], head: str
) -> ManifestChange:
    """The plugin's own `.claude-plugin/plugin.json`, less the ignored metadata keys."""
    return _compare(repo, path, merge_bases, head, lambda data: _without(data, ignore))


class _Unclear(ValueError):
    """What makes a version impossible to compare: the change counts."""


def _compare(
    repo: Path,
    path: str,
    merge_bases: Sequence[str],
    head: str,
    view: Callable[[dict[str, object]], object],
) -> ManifestChange:
    if not merge_bases:
        return ManifestChange(True, "cannot be compared (no merge base)")
    try:
        now = view(_parse(git.blob_at(repo, head, path), "HEAD"))
        # Several merge bases (criss-cross): a difference from any one counts.
        for base in merge_bases:
            before = view(_parse(git.blob_at(repo, base, path), "the merge base"))
            if before != now:
                return ManifestChange(True, _difference(before, now))
    except _Unclear as exc:
        return ManifestChange(True, str(exc))
    return ManifestChange(False, "")


def _parse(data: bytes | None, where: str) -> dict[str, object]:
    if data is None:
        raise _Unclear(f"not a file at {where} (added or removed)")
    value = _json(data)
    if value is _INVALID:
        raise _Unclear(f"cannot be compared: not valid JSON at {where}")
    if not isinstance(value, dict):
        raise _Unclear(f"cannot be compared: not a JSON object at {where}")
    return value


_INVALID = object()


# One change decided for many maps (a marketplace's plugins, `git.shared_reads`)
# parses the same marketplace file once per side, not once per plugin: a large
# file's parse outweighed all else. The views built from it never modify it.
@functools.lru_cache(maxsize=8)
def _json(data: bytes) -> object:
    import json  # noqa: PLC0415 - only when one of these files changed (kept off start-up)

    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _INVALID


def _without(data: dict[str, object], ignore: Sequence[str]) -> dict[str, object]:
    """`data` less the ignored keys whose value is of a shape the CLI reads; one of
    another shape (`"version": 1`) stays, as its type: the CLI may refuse it."""
    return {
        key: value if key not in ignore else f"<{type(value).__name__}>"
        for key, value in data.items()
        if key not in ignore or not _readable(key, value)
    }


# The shape of each metadata key's value the CLI reads; any other may make it
# refuse the manifest or drop the entry (a string where none is named).
_SHAPES: dict[str, tuple[type, ...]] = {
    "keywords": (list,),
    "tags": (list,),
    "owner": (dict,),
    "author": (dict, str),  # a string: the loader ignores it, with a note
    "repository": (str, dict),
}


def _readable(key: str, value: object) -> bool:
    shapes = _SHAPES.get(key, (str,))
    if isinstance(value, list):
        return list in shapes and all(isinstance(item, str) for item in value)
    return isinstance(value, shapes)


def _marketplace_view(
    data: dict[str, object], plugin: str, ignore: Sequence[str]
) -> dict[str, object]:
    """What of a marketplace file loads `plugin`: its entry, the `renames` naming it,
    and the rest of the file outside `plugins`."""
    plugins = data.get("plugins")
    if not isinstance(plugins, list):
        raise _Unclear('cannot be compared: "plugins" is not a list')
    found = [p for p in plugins if isinstance(p, dict) and p.get("name") == plugin]
    if len(found) > 1:
        raise _Unclear(f"cannot be compared: {len(found)} entries named {plugin!r}")
    rest = _without({k: v for k, v in data.items() if k not in ("plugins", "renames")}, ignore)
    if isinstance(rest.get("metadata"), dict):
        rest["metadata"] = _without(rest["metadata"], ignore)  # type: ignore[arg-type]
    names = {p.get("name") for p in plugins if isinstance(p, dict)}
    renames = _renames_naming(data.get("renames", {}), plugin, names)
    # No entry (on both sides: nothing of the plugin loads from here either way;
    # on one side: added or removed, a difference).
    entry = _without(found[0], ignore) if found else None
    return {"entry": entry, "renames": renames, "outside plugins": rest}


def _renames_naming(renames: object, plugin: str, names: set[object]) -> object:
    """Each `renames` key whose chain (as the loader follows it: from a name not
    in `plugins`, key to value, until a listed name or null) names `plugin`, with
    that chain. A `renames` the loader cannot read as a whole is kept whole."""
    if not isinstance(renames, dict):
        return renames  # fail closed: any change to it counts
    chains: dict[str, list[object]] = {}
    for key in renames:
        chain: list[object] = [key]
        name: object = key
        # A listed name ends the chain (the loader finds it); `plugin` itself may
        # be a key (renamed on, or removed: the chain of its own entry).
        while name in renames and (name == key or name not in names):
            if len(chain) > len(renames):  # a cycle: the loader finds nothing either
                break
            name = renames[name]
            chain.append(name)
            if not isinstance(name, str):
                break
        if plugin in chain:
            chains[str(key)] = chain
    return chains


def _difference(before: object, now: object) -> str:
    """`changed: entry.commands` — the first keys that differ, for the detail."""
    keys = _differing(before, now)
    return ", ".join(keys[:4]) + (", ..." if len(keys) > 4 else "")


def _differing(before: object, now: object) -> list[str]:
    """Each differing key's path (`entry.commands`, `renames.old (added)`)."""
    keys: list[str] = []
    if isinstance(before, dict) and isinstance(now, dict):
        for key in sorted(set(before) | set(now), key=str):
            was, new = before.get(key), now.get(key)
            if was == new:
                continue
            if (was is None) != (new is None):
                keys.append(f"{key} ({'added' if was is None else 'removed'})")
                continue
            inner = _differing(was, new)
            keys.extend([f"{key}.{path}" for path in inner] if inner else [str(key)])
    return keys
