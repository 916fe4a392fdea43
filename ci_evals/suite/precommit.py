"""Every suite's stage map in the pre-commit hook: a map added to the `ci-evals-coverage`
hook of a `.pre-commit-config.yaml` that has one already.

A marketplace of many plugins gets one suite per plugin (`evals/<plugin>/`),
each with its own map, and one `.pre-commit-config.yaml` at the repository's
top. `init` writes the hook for the first map (`suite.draft.render_precommit`);
for each later one it adds `--map PATH` to that hook's `args` (the command
takes `--map` once per map, `commands/check_coverage.py`). The file is the
user's: the edit touches only the hook's `args` (replacing a one-line flow
list, or adding an `args:` line under its `entry:`), and is written only when
the file read back gives exactly the args intended; otherwise `init` prints
what to add.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ci_evals.fs.atomic import write_atomic

HOOK_ID = "ci-evals-coverage"
DEFAULT_MAP = "stage_map.yaml"


def has_hook(text: str) -> bool:
    return f"id: {HOOK_ID}" in text


def hook_args(text: str) -> list[str] | None:
    """The args of the file's `ci-evals-coverage` hook ([] without any), or None
    when the file has no such hook or is not what pre-commit reads."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    for hook in _hooks(data):
        if hook.get("id") == HOOK_ID:
            args = hook.get("args", [])
            return [str(a) for a in args] if isinstance(args, list) else None
    return None


def maps_of(args: list[str]) -> list[str]:
    """The maps a hook's args name (`--map PATH` or `--map=PATH`)."""
    found = []
    for i, arg in enumerate(args):
        if arg == "--map" and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith("--map="):
            found.append(arg.removeprefix("--map="))
    return found


def add_map(path: Path, map_path: str, *, top_map: bool) -> bool:
    """Add `--map map_path` to the hook in the file at `path`; whether the file now
    names it (False: the file's shape is not one this edits; say what to add).
    `top_map`: the repository's top holds a `stage_map.yaml`, which a hook
    without `--map` checks, so it is named first to stay checked."""
    text = path.read_text(encoding="utf-8")
    args = hook_args(text)
    if args is None:
        return False
    maps = maps_of(args)
    if map_path in maps:
        return True
    if not maps and top_map:
        args = [*args, "--map", DEFAULT_MAP]
    wanted = [*args, "--map", map_path]
    edited = _with_args(text, wanted)
    if edited is None or hook_args(edited) != wanted:
        return False
    write_atomic(path, edited.encode("utf-8"))
    return True


def _with_args(text: str, args: list[str]) -> str | None:
    """`text` with the hook's `args` set to `args`, by position; None when not one-line."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    hook = _hook_node(root)
    if hook is None:
        return None
    rendered = "[" + ", ".join(_scalar(arg) for arg in args) + "]"
    for key, value in hook.value:
        if key.value == "args":
            start, end = value.start_mark, value.end_mark
            if not isinstance(value, yaml.SequenceNode) or start.line != end.line:
                return None
            return text[: start.index] + rendered + text[end.index :]
    for key, value in hook.value:
        if key.value == "entry" and value.start_mark.line == value.end_mark.line:
            eol = text.find("\n", value.end_mark.index)
            eol = len(text) if eol == -1 else eol
            line = f"\n{' ' * key.start_mark.column}args: {rendered}"
            return text[:eol] + line + text[eol:]
    return None


def _hook_node(root: yaml.Node | None) -> yaml.MappingNode | None:
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, repos in root.value:
        if key.value != "repos" or not isinstance(repos, yaml.SequenceNode):
            continue
        for repo in repos.value:
            if not isinstance(repo, yaml.MappingNode):
                continue
            for rkey, hooks in repo.value:
                if rkey.value != "hooks" or not isinstance(hooks, yaml.SequenceNode):
                    continue
                for hook in hooks.value:
                    if isinstance(hook, yaml.MappingNode) and any(
                        k.value == "id" and getattr(v, "value", None) == HOOK_ID
                        for k, v in hook.value
                    ):
                        return hook
    return None


def _hooks(data: object) -> list[dict[str, object]]:
    if not isinstance(data, dict):
        return []
    repos = data.get("repos")
    found = []
    for repo in repos if isinstance(repos, list) else []:
        hooks = repo.get("hooks") if isinstance(repo, dict) else None
        found += [h for h in hooks if isinstance(h, dict)] if isinstance(hooks, list) else []
    return found


def _scalar(text: str) -> str:
    """`text` as a YAML double-quoted scalar, as the drafted hook quotes its paths."""
    emitted = yaml.dump(text, Dumper=yaml.SafeDumper, default_style='"', width=1 << 30)
    return emitted.rstrip("\n").removesuffix("\n...").rstrip("\n")
