"""What a command's shell expansion needs granted in a run of `claude plugin eval`
cases.

A command (or a skill only a person may invoke) whose body has `` !`git status` ``
or a ```! block runs it as it expands, before the model sees it, as a Bash call
under the run's permissions: in an eval run the operator's grant
(`suite.tool_grant`), not the command's own `allowed-tools`. Measured with the
bundled CLI (2.1.337): without a Bash grant allowing it, `claude plugin eval`
answers "Shell command permission check failed ... Bash has been denied", as
ci-evals does (tests/suite/test_plugin_evals_shell.py). Granting the command's
own Bash rules makes it run in both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ci_evals.config.front_matter import read_front_matter
from ci_evals.suite import draft_shapes, references
from ci_evals.suite.plugin_source import PluginSource
from ci_evals.suite.tool_grant import Grant, entry_problem, split_entries, tool_name

# A shell expansion in a command's body.
SHELL = re.compile(r"!`[^`\n]+`|^```!", re.MULTILINE)
# A prompt invoking a command: `/NAME` or `/PLUGIN:NAME`, then its arguments.
INVOKED = re.compile(r"\s*/(?:([\w.-]+):)?([\w.:-]+)(?:\s|$)")


def shell_rules(text: str) -> list[str] | None:
    """The Bash rules a run must grant for the command's shell expansions: none when
    it has none; its own `allowed-tools` Bash entries (`Bash(git status:*)`); None
    when it expands shell commands but names no Bash rule to grant."""
    if SHELL.search(text) is None:
        return []
    value = read_front_matter(text).fields.get("allowed-tools")
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    entries = [e for item in items for e in split_entries(str(item))]
    rules = [e for e in entries if tool_name(e) == "Bash" and entry_problem(e) is None]
    return rules or None


def shell_grants(source: PluginSource, prompts: Sequence[str]) -> tuple[str, ...]:
    """The Bash rules a run of cases with `prompts` must grant (the suite's
    `allow_tools`) for the shell expansions of the plugin's commands they invoke
    (`/NAME ...` or `/PLUGIN:NAME ...`): each command's own `allowed-tools` rules."""
    files = dict(references.command_files(source.path, source.manifest))
    for part in draft_shapes.skills(source.path):
        if part.slash_only:
            files[part.name] = source.path / part.file
    rules: list[str] = []
    for prompt in prompts:
        found = INVOKED.match(prompt)
        if found is None:
            continue
        prefix, name = found.groups()
        if prefix is not None and prefix != source.name:
            name = f"{prefix}:{name}"  # a command in a subfolder, `/dir:name`
        if (path := files.get(name)) is not None:
            rules += shell_rules(_read(path)) or []
    return tuple(dict.fromkeys(rules))


def ungranted(source: PluginSource, prompt: str, grant: Grant) -> tuple[str, ...]:
    """The rules the command `prompt` invokes needs for its shell expansion that
    `grant` lacks (a grant of all of Bash lacks none)."""
    if "Bash" in grant.rules:
        return ()
    return tuple(r for r in shell_grants(source, [prompt]) if r not in grant.rules)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
