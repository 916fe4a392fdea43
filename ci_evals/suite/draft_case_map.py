"""`ci-evals init` on a plugin with `claude plugin eval` cases: the stage map that
selects the cases a change reaches (`evals:`, `selection.units`).

Each skill, command and agent of the plugin goes to the cases that name it —
in their prompt, `case.yaml` or `graders/` (a `tool_used` on `Skill` with an
`input_match`, say, names the skill): a skill by its folder or `name:`, a
command as `/NAME` or `/PLUGIN:NAME`, an agent by its `name:` (or file name),
each as a whole word, case ignored. What no case names, and every other file
Claude Code loads (the manifest, hooks, `.mcp.json`, scripts), goes to every
case (`cases: ["*"]`): Claude Code offers every skill, command and agent to
every prompt, so the names are the draft's best guess, said beside each entry
for the author to check. A README, licence or changelog nothing names is read
by no case (`stage: none`). The eval folder needs no entry: a case's own
folder selects that case, a mock the cases below it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ci_evals.selection.manifest_change import METADATA_KEYS
from ci_evals.suite.draft import (
    agent_name,
    as_comment,
    glob_of,
    marketplace_lines,
    quoted,
    read_or_empty,
    unit_of,
)
from ci_evals.suite.plugin_evals import Case

EVERY = '["*"]'


@dataclass(frozen=True)
class CaseEntry:
    glob: str
    cases: tuple[str, ...] | None  # case names; None: every case; () : no case reads it
    why: str


def entries(
    plugin_name: str,
    plugin_dir: Path,
    files: Sequence[str],
    cases: Sequence[Case],
    unread: frozenset[str],
) -> list[CaseEntry]:
    """One entry per skill folder and per other plugin file (plugin-relative `files`,
    the eval folder's left out), with the cases that name it."""
    texts = {case.name: _case_text(case.folder) for case in cases}
    units: dict[str, list[str]] = {}
    for path in sorted(files):
        units.setdefault(unit_of(path), []).append(path)
    found = []
    for key, paths in units.items():
        glob = glob_of(key)
        if len(paths) == 1 and paths[0] in unread:
            found.append(
                CaseEntry(glob, (), "no skill, command or agent names it: no case reads it")
            )
            continue
        kind, pattern = _pattern(plugin_name, key, paths, plugin_dir)
        if pattern is None:
            found.append(CaseEntry(glob, None, "loaded for every case: every case"))
            continue
        named = tuple(name for name, text in texts.items() if pattern.search(text))
        if not named:
            found.append(CaseEntry(glob, None, f"{kind} named by no case: every case"))
        else:
            found.append(CaseEntry(glob, named, f"{kind} named in these cases' files"))
    return found


def _pattern(
    plugin_name: str, key: str, paths: Sequence[str], plugin_dir: Path
) -> tuple[str, re.Pattern[str] | None]:
    """What the unit is, and how a case's text names it (None: it cannot, every case)."""
    parts = PurePosixPath(paths[0]).parts
    if key.endswith("/**") and parts[0] == "skills":
        names = {parts[1]}
        skill = plugin_dir / "skills" / parts[1] / "SKILL.md"
        if skill.is_file():
            names.add(agent_name("SKILL.md", read_or_empty(skill)))
        return f"skill {parts[1]}", _words(names)
    if parts[0] == "commands" and len(parts) == 2 and parts[1].endswith(".md"):
        name = parts[1].removesuffix(".md")
        options = (re.escape(f"/{plugin_name}:{name}"), re.escape(f"/{name}"))
        return f"command /{name}", re.compile(rf"(?:{'|'.join(options)})(?![\w-])", re.I)
    if parts[0] == "agents" and len(parts) == 2 and parts[1].endswith(".md"):
        name = agent_name(paths[0], read_or_empty(plugin_dir / paths[0]))
        return f"agent {name}", _words({name})
    return "", None


def _words(names: set[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(name) for name in sorted(names))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)


def _case_text(folder: Path) -> str:
    """Everything the case says: its prompt, case.yaml and graders (not its mocks)."""
    texts = [read_or_empty(folder / name) for name in ("prompt.md", "case.yaml")]
    graders = folder / "graders"
    if graders.is_dir():
        texts += [read_or_empty(path) for path in sorted(graders.glob("*.md"))]
    return "\n".join(texts)


def render(
    plugin: str,
    evals: str,
    found: Sequence[CaseEntry],
    global_paths: Sequence[str],
    *,
    marketplace: tuple[str, str] | None = None,
) -> str:
    """The map's text; `marketplace`: (its folder from the map's, the plugin's entry)."""
    lines = [
        f"# Drafted by `ci-evals init` from {as_comment(plugin)}/: "
        "which cases a change to each plugin",
        "# file can affect. A skill, command or agent goes to the cases whose prompt or",
        "# graders name it; what no case names, and what Claude Code loads for every case,",
        '# to every case (cases: ["*"]). A case\'s own folder selects that case, a mock the',
        "# cases below it. Refine by hand (docs/plugin-evals.md, Selecting cases by a change);",
        "# `ci-evals check-coverage` keeps it complete.",
        "version: 1",
        f"root: {quoted(plugin)}",
        f"evals: {quoted(evals)}",
        "entries:",
    ]
    for entry in found:
        if entry.cases is None:
            lines.append(
                f"  - {{ glob: {quoted(entry.glob)}, cases: {EVERY} }}   # {as_comment(entry.why)}"
            )
        elif not entry.cases:
            lines.append(
                f"  - {{ glob: {quoted(entry.glob)}, stage: none }}   # {as_comment(entry.why)}"
            )
        else:
            listed = ", ".join(quoted(_literal_case(name)) for name in entry.cases)
            lines.append(
                f"  - {{ glob: {quoted(entry.glob)}, cases: [{listed}] }}   "
                f"# {as_comment(entry.why)}"
            )
    globals_ = ", ".join(quoted(path) for path in global_paths)
    lines.append(f"global: [{globals_}]")
    lines += marketplace_lines(marketplace)
    lines += [
        "# Keys Claude Code shows but loads nothing from: a change to them alone in",
        "# .claude-plugin/plugin.json runs no case.",
        f"ignore_metadata: [{', '.join(quoted(key) for key in METADATA_KEYS)}]",
    ]
    return "\n".join(lines) + "\n"


def _literal_case(name: str) -> str:
    """A case name as a `cases:` glob matching only it (`*` and `?` are the wildcards;
    the CLI's globs have no escape, so such a name is matched by `?` in its place)."""
    return name.replace("*", "?")
