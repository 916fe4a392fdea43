"""`ci-evals init --format cases`: a plugin's parts drafted as `claude plugin eval`
cases, so that the same suite runs with ci-evals and with Claude Code's own
runner.

One case per part (a skill, an agent, a command, the SessionStart hooks), each
with a grader that shows the part fired in what the CLI's run records, measured
with the bundled CLI 2.1.337 on the stub model
(tests/commands/test_init_case_files.py). A command that expands shell commands
runs them under the run's grant, not its own `allowed-tools`: its case names the
command's Bash rules in `allowed_tools` and the suite grants them
(`command_shell`). Hooks other than SessionStart leave nothing in the CLI's trace,
so they are named as unchecked (a stage draft checks them: its trajectory has
every hook).

Pure: reads the plugin, returns the files' text; `commands/init.py` writes them.
Each part's prompt and graders: docs/onboarding.md (*As `claude plugin eval`
cases*).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ci_evals.config.front_matter import read_front_matter
from ci_evals.config.plugin_hooks import Hook
from ci_evals.errors import UserError
from ci_evals.suite import draft_shapes, references
from ci_evals.suite.command_shell import SHELL, shell_rules
from ci_evals.suite.draft_inputs import NO_HINT, example_value, shown_example
from ci_evals.suite.plugin_source import MANIFEST, PluginSource
from ci_evals.text import display_path

CASE_FILE = "case.yaml"
SCHEMA_VERSION = "1.1"  # the case schema the bundled CLI reads (it takes any 1.x)
HOOKS_CASE = "hooks"
_SESSION_START = "SessionStart"
# The CLI's trace line for a SessionStart hook that ran (one JSON object a line;
# the assistant's words sit in it escaped, `\"`, so no answer can fake one).
_HOOK_RAN = r'"subtype":"hook_response"[^\n]*"hook_name":"SessionStart:startup"'
_HOOK_OK = _HOOK_RAN + r'[^\n]*"outcome":"success"'
_HOOK_FAILED = _HOOK_RAN + r'[^\n]*"outcome":"(?!success")'
_NAME = re.compile(r"[^a-z0-9-]+")
_JS_SPECIAL = re.compile(r"([\\^$.*+?()[\]{}|])")


@dataclass(frozen=True)
class CaseFile:
    folder: str  # the case's folder in the eval folder, and its name
    part: str  # what it exercises: "skill outline", "agent critic", "hooks"
    text: str  # its case.yaml


@dataclass(frozen=True)
class CaseDraft:
    cases: tuple[CaseFile, ...]
    unchecked: tuple[str, ...]  # the plugin's parts no case can show fired, and why


def plan(source: PluginSource) -> CaseDraft:
    """A case per command, skill and agent of the plugin in `source`, and one for
    its SessionStart hooks; a `UserError` when no case could show any part fired."""
    plugin_dir, name = source.path, source.name
    if source.origin != "manifest":
        # The CLI finds a plugin by its manifest: without one it loads nothing, and
        # refuses every case under its default ablation (measured: plugin-dev).
        raise UserError(
            f"claude plugin eval finds no plugin in {display_path(plugin_dir)}: it has no "
            f"{MANIFEST} of its own (its name comes from its {source.origin})",
            hint=f'add one ({{"name": "{name}"}}), or draft stages (init without --format cases)',
        )
    cases: list[CaseFile] = []
    unchecked: list[str] = []
    taken: set[str] = set()
    skills = {part.name: part for part in draft_shapes.skills(plugin_dir)}
    for command, path in references.command_files(plugin_dir, source.manifest).items():
        if command in skills:
            continue  # a skill of the same name is what Claude Code offers
        text = _read(path)
        rules = shell_rules(text)
        if rules is None:
            unchecked.append(_no_rule("command", command, text))
            continue
        hint = _field(text, "argument-hint")
        example = shown_example(text, name, command) or example_value(hint, command)
        cases.append(
            _command_case(
                name,
                command,
                _field(text, "description"),
                example,
                "command",
                taken=taken,
                allowed=rules,
            )
        )
    for part in skills.values():
        text = _read(plugin_dir / part.file)
        example = example_value(part.hint, part.name)
        if part.slash_only:
            rules = shell_rules(text)
            if rules is None:
                unchecked.append(_no_rule("skill", part.name, text))
                continue
            description = _field(text, "description")
            cases.append(
                _command_case(
                    name, part.name, description, example, "skill", taken=taken, allowed=rules
                )
            )
        else:
            cases.append(_skill_case(name, part.name, example, taken))
    for file in references.plugin_agents(plugin_dir, source.manifest):
        agent = _field(_read(plugin_dir / file), "name") or Path(file).stem
        cases.append(_agent_case(name, agent, taken))
    hooks = draft_shapes.hooks(plugin_dir, source.manifest)
    checked, unseen = _sorted_hooks(plugin_dir, hooks)
    unchecked += unseen
    if checked:
        cases.append(_hooks_case(len(checked), taken))
    if not cases:
        why = "; ".join(unchecked) if unchecked else "it has no commands, skills, agents or hooks"
        raise UserError(
            f"no claude plugin eval case can show a part of {name} fired: {why}",
            hint="draft stages instead (init without --format cases): a stage's trajectory "
            "shows every hook",
        )
    return CaseDraft(tuple(cases), tuple(unchecked))


def _no_rule(kind: str, name: str, text: str) -> str:
    """Why no case runs a command expanding shell commands without a Bash rule."""
    found = SHELL.search(text)
    shown = found.group(0).strip() if found is not None else "!"
    return (
        f"the {kind} {name}: it runs `{shown}` before the model sees it, which both "
        "claude plugin eval and ci-evals refuse without a Bash grant ('Shell command "
        "permission check failed'), and its allowed-tools names no Bash rule to grant: "
        "add one (Bash(git status:*)), or a stage draft runs it"
    )


def fired_lines(hooks: Sequence[Hook], plugin_dir: Path) -> tuple[str, ...]:
    """The trace lines every run of the plugin shows (its SessionStart hooks' runs),
    as the CLI writes them: what a stub script need not say for a trace grader."""
    checked, _ = _sorted_hooks(plugin_dir, hooks)
    line = (
        '{"type":"system","subtype":"hook_response","hook_id":"stub",'
        '"hook_name":"SessionStart:startup","hook_event":"SessionStart","output":"",'
        '"exit_code":0,"outcome":"success"}'
    )
    return (line,) * len(checked)


def _sorted_hooks(plugin_dir: Path, hooks: Sequence[Hook]) -> tuple[list[Hook], list[str]]:
    """The hooks a case can show ran, and a line for each other one saying why not."""
    checked: list[Hook] = []
    unchecked: list[str] = []
    for hook in hooks:
        why = draft_shapes.observable(
            hook, (), draft_shapes.script_fetches(plugin_dir, hook.command)
        )
        if why is None and hook.event != _SESSION_START:
            why = (
                "claude plugin eval's trace shows the runs of SessionStart hooks only "
                "(a stage draft checks it: its trajectory has every hook)"
            )
        if why is None:
            checked.append(hook)
        else:
            unchecked.append(f"the {hook.event} hook ({hook.command[:60]}): {why}")
    return checked, unchecked


def _skill_case(plugin: str, skill: str, example: str, taken: set[str]) -> CaseFile:
    named = f"{plugin}:{skill}"
    prompt = f"Use the Skill tool to run the skill `{named}`, then follow it for: {example}."
    why = f"the Skill tool loaded {named}"
    return _tool_case("Skill", named, skill, prompt, why, taken=taken)


def _agent_case(plugin: str, agent: str, taken: set[str]) -> CaseFile:
    named = f"{plugin}:{agent}"
    prompt = f"Use the Agent tool to launch the subagent `{named}` on: {NO_HINT}."
    why = f"the Agent tool ran the subagent {named}"
    return _tool_case("Agent", named, agent, prompt, why, taken=taken)


def _tool_case(
    tool: str, named: str, name: str, prompt: str, why: str, *, taken: set[str]
) -> CaseFile:
    """A case whose graders count the `tool` call naming `named`, and find the CLI's
    answer to it in the trace: a call counts even when refused (no such skill or
    agent, as in the without-plugin arm); the answer shows the part loaded."""
    kind = tool.lower() if tool == "Skill" else "agent"
    used = {
        "name": f"{kind}-used",
        "type": "tool_used",
        "tool": tool,
        "input_match": _exactly(named),
    }
    answer = skill_answer(named) if tool == "Skill" else agent_answer(named)
    loaded = {
        "name": "skill-loaded" if tool == "Skill" else "agent-ran",
        "type": "regex",
        "target": "trace",
        "pattern": _JS_SPECIAL.sub(r"\\\1", answer),
    }
    return _case(kind, name, prompt, [used, loaded], why, taken=taken)


def skill_answer(named: str) -> str:
    """What the CLI's trace holds when the Skill tool loaded `named` (a JSON member:
    an answer's words sit in the trace escaped, so none can fake it)."""
    return f'"content":"Launching skill: {named}"'


def agent_answer(named: str) -> str:
    """What the CLI's trace holds when the subagent `named` ran to its end."""
    return f'"agentType":"{named}"'


def _command_case(
    plugin: str,
    command: str,
    description: str | None,
    example: str,
    kind: str,
    *,
    taken: set[str],
    allowed: Sequence[str] = (),
) -> CaseFile:
    invocation = f"/{plugin}:{command}"
    prompt = f"{invocation} {example}".rstrip()
    what = f" ({description})" if description else ""
    grader = {
        "name": "command-followed",
        "type": "llm",
        "criteria": (
            f"The response carries out the {invocation} command{what} for: "
            f"{example or 'no arguments'}."
        ),
    }
    why = (
        f"the answer carries out {invocation} (a judge reads it: the CLI's trace holds "
        "no user message, so nothing in it shows the command's expansion)"
    )
    return _case(kind, command, prompt, [grader], why, taken=taken, allowed=allowed)


def _hooks_case(count: int, taken: set[str]) -> CaseFile:
    graders: list[dict[str, Any]] = [
        {"name": "session-start-ran", "type": "regex", "target": "trace", "pattern": _HOOK_OK},
        {
            "name": "session-start-never-failed",
            "type": "regex",
            "target": "trace",
            "pattern": _HOOK_FAILED,
            "match": "not_contains",
        },
    ]
    why = f"the plugin's {count} SessionStart hook(s) ran and succeeded (the trace's lines)"
    prompt = "Reply with one word: ready."
    return _case(HOOKS_CASE, "", prompt, graders, why, taken=taken, part="hooks")


def _case(
    kind: str,
    name: str,
    prompt: str,
    graders: list[dict[str, Any]],
    why: str,
    *,
    taken: set[str],
    part: str | None = None,
    allowed: Sequence[str] = (),
) -> CaseFile:
    folder = _folder(f"{kind}-{name}" if name else kind, taken)
    execution: dict[str, Any] = {"prompt": prompt, "max_turns": 10}
    if allowed:
        # What its shell expansion needs: the run grants it (the suite's allow_tools,
        # --allow-tools); listed here the CLI names it when a run does not.
        execution["allowed_tools"] = list(allowed)
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": folder,
        "description": f"Checks that {why}.",
        "tags": [kind],
        "execution": execution,
        "runs": 1,
        "graders": graders,
    }
    header = (
        "# Drafted by `ci-evals init --format cases`: runs with `claude plugin eval` and\n"
        "# with `ci-evals run` (docs/plugin-evals.md). Make the prompt a real task and\n"
        "# raise `runs` for a real model (the CLI's default is 3).\n"
    )
    text = header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=1 << 16)
    return CaseFile(folder, part or f"{kind} {name}", text)


def _folder(wanted: str, taken: set[str]) -> str:
    """A case folder and name: lowercase letters, digits and `-`, unique."""
    base = _NAME.sub("-", wanted.lower()).strip("-") or "case"
    folder, n = base, 2
    while folder in taken:
        folder, n = f"{base}-{n}", n + 1
    taken.add(folder)
    return folder


def _exactly(named: str) -> str:
    """A JavaScript pattern finding `named` in a call's input JSON, and not a longer
    name (`p:outline` in `p:outline-long`)."""
    return _JS_SPECIAL.sub(r"\\\1", named) + r"(?![\w:-])"


def _field(text: str, key: str) -> str | None:
    value = read_front_matter(text).fields.get(key)
    if isinstance(value, list):
        value = " ".join(f"[{item}]" for item in value)
    if value is None or isinstance(value, dict):
        return None
    return " ".join(str(value).split()) or None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
