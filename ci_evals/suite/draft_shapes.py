"""The plugin's parts beyond its commands, for `init`'s draft: skills, agents, hooks.

How the bundled CLI offers them (measured with Claude Code 2.1.337 on the stub
model, `tests/commands/test_init_shapes.py`):

- a skill `skills/NAME/SKILL.md` is `/PLUGIN:NAME` (expanded into the prompt,
  as a command is: nothing in the trajectory says so) and the Skill tool's
  `PLUGIN:NAME` (a `Skill` call, answered `Launching skill: PLUGIN:NAME`, then
  the skill's text as a message): the draft asks for the Skill tool, so the
  trajectory shows the skill fired. A skill with `disable-model-invocation:
  true` is slash-only: its stage runs `/PLUGIN:NAME`;
- an agent is the Agent tool's `subagent_type: PLUGIN:NAME`;
- a hook's every run is a `hook_response` event in the trajectory (its event,
  name, exit code, outcome, stderr), SessionStart's always and the others'
  with `include_hook_events`, which the claude agent sets.

A skill or agent no command names gets a stage of its own; a plugin of hooks
alone (an output style) one plain-prompt stage; the first stage checks every
hook a stub run of it can fire. Pure: reads the plugin's files, writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ci_evals.config.front_matter import read_front_matter
from ci_evals.config.plugin_hooks import Hook, matches, read_hooks

# Events a stub run of a drafted stage fires, and when: the session starts
# (`startup`), the prompt is submitted, the turn ends. A tool hook fires on the
# tools the stage's stub calls (it writes its output; a skill or agent stage
# calls that tool too).
_ALWAYS = ("UserPromptSubmit", "Stop")
STOP_EVENTS = ("Stop", "SubagentStop")
# A hook that fetches a package when it runs: the sandbox has no network, and the
# agent's environment tells package managers so (agents.environment.OFFLINE), so
# it fails at once. A check on it would fail every run for the sandbox's sake.
_FETCHES = re.compile(
    r"(?<![\w-])(?:npx|bunx|uvx|pipx\s+run|pnpm\s+dlx|yarn\s+dlx|"
    r"(?:npm|pnpm|yarn|pip3?|uv\s+pip)\s+(?:install|add|i))\b"
)
# A plugin file a hook's command runs (`${CLAUDE_PLUGIN_ROOT}/hooks/x.sh`, quoted
# or not): read for a fetch too, as protect-mcp's `npx` may sit in a script.
_PLUGIN_FILE = re.compile(r"\$\{?CLAUDE_PLUGIN_ROOT\}?\"?/([^\s\"'`;|&()<>$]+)")
_SCRIPT_BYTES = 1 << 20  # a hook script read at most this far
# The CLI ends a turn after a Stop hook blocked it this many times in a row
# (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP), saying so in the trajectory.
STOP_HOOK_BLOCK_CAP = 9


@dataclass(frozen=True)
class Part:
    """A skill or an agent the draft gives a stage of its own."""

    kind: str  # "skill" or "agent"
    name: str  # the folder (skill) or the agent's name
    file: str  # plugin-relative: skills/NAME/SKILL.md, agents/x.md
    hint: str | None  # its argument-hint
    slash_only: bool = False  # a skill the model may not invoke: /PLUGIN:NAME


def skills(plugin_dir: Path) -> list[Part]:
    """Every `skills/NAME/SKILL.md`, as the CLI offers it."""
    folder = plugin_dir / "skills"
    found = []
    for path in sorted(folder.glob("*/SKILL.md")) if folder.is_dir() else []:
        if not path.is_file():
            continue
        fields = read_front_matter(_read(path)).fields
        found.append(
            Part(
                kind="skill",
                name=path.parent.name,
                file=path.relative_to(plugin_dir).as_posix(),
                hint=_text(fields.get("argument-hint")),
                slash_only=fields.get("disable-model-invocation") is True,
            )
        )
    return found


def agent_part(path: str, name: str) -> Part:
    return Part(kind="agent", name=name, file=path, hint=None)


def hooks(plugin_dir: Path, manifest: Mapping[str, object]) -> list[Hook]:
    """The plugin's command hooks (`config.plugin_hooks`)."""
    return read_hooks(plugin_dir, manifest)


def script_fetches(plugin_dir: Path, command: str) -> str | None:
    """`its script hooks/x.sh runs `npx` (line 3)`: the first package fetch in a
    plugin file the hook's command runs, read as text (one level: what that file
    starts in turn is not read); None when there is none, or no such file."""
    top = plugin_dir.resolve()
    for match in _PLUGIN_FILE.finditer(command):
        name = match.group(1)
        path = (top / name).resolve()
        if not path.is_relative_to(top) or not path.is_file():
            continue  # outside the plugin, or not there: nothing of the plugin's to read
        try:
            with path.open("rb") as handle:
                text = handle.read(_SCRIPT_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        found = _FETCHES.search(text)
        if found is not None:
            line = text.count("\n", 0, found.start()) + 1
            return f"its script {name} runs `{found.group(0)}` (line {line})"
    return None


def observable(hook: Hook, tools: Sequence[str], in_script: str | None = None) -> str | None:
    """Why a stub run of the first stage, calling `tools`, cannot show `hook`
    fire; None when it can. `in_script`: a fetch its script makes (`script_fetches`)."""
    why: str | None = "nothing in a stub run of the stage fires it"
    fetches = _FETCHES.search(hook.command)
    offline = (
        "which needs the network the sandbox does not have (it fails at once, offline): "
        "vendor what it fetches, or check it by hand"
    )
    if fetches is not None:
        why = f"it runs `{fetches.group(0)}`, {offline}"
    elif in_script is not None:
        why = f"{in_script}, {offline}"
    elif hook.background:
        why = "it runs in the background (async): the session may end before it does"
    elif hook.event == "SessionStart":
        why = None if matches(hook.matcher, "startup") else f"its matcher {hook.matcher!r}"
    elif hook.event in _ALWAYS:
        why = None
    elif hook.event in ("PreToolUse", "PostToolUse"):
        if hook.conditional:
            why = "it runs only under its `if:` condition"
        elif any(matches(hook.matcher, tool) for tool in tools):
            why = None
        else:
            why = f"the stage's stub calls no tool its matcher {hook.matcher!r} takes"
    return why


def loops(found: Sequence[Hook]) -> list[Hook]:
    """Hooks that may refuse to let a turn end (feeding a prompt back)."""
    return [hook for hook in found if hook.event in STOP_EVENTS]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _text(value: object) -> str | None:
    if isinstance(value, list):
        return " ".join(f"[{item}]" for item in value) or None
    if value is None or isinstance(value, dict):
        return None
    return str(value).strip() or None
