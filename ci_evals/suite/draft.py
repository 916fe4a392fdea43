"""Draft a suite for a plugin from its tree: the plan `ci-evals init` writes out.

Stages are the user's (`--stages a,b=cmd,c`); else commands that read each
other's output are phases and independent ones a scenario each of one stage
(`draft_order`). Every file of the plugin gets the stage it can affect, failing
closed: a command's file is its first stage's; any other file (an agent, a
skill, a reference, a template) is the lowest stage of every file that names
it — a command, or a component such a file already reached — and a file
nothing names is stage 1 (it may be used in ways a text search cannot see;
stage 1 runs everything). Nothing here writes: `render_*` give the files'
text, `commands/init.py` writes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from ci_evals.config.front_matter import read_front_matter
from ci_evals.config.plugin_hooks import Hook
from ci_evals.errors import UserError
from ci_evals.selection.manifest_change import METADATA_KEYS
from ci_evals.suite import draft_order, draft_shapes, references
from ci_evals.suite.draft_inputs import example_value, shown_example
from ci_evals.suite.load import BUILTINS, STAGE_NAME
from ci_evals.suite.plugin_source import MANIFEST, MARKETPLACE, PluginSource

OUTPUT_DIR = "outputs"  # where the stub's placeholder outputs go, in the workspace
# Where a command stops for a person: a stage runs unattended and must say what
# the person would have said (docs/onboarding.md).
_ASKS_USER = re.compile(
    r"wait for (?:the |explicit )?(?:user|answers|approval)|user approval|"
    r"ask (?:the )?user|confirm with (?:the )?user",
    re.IGNORECASE,
)
_ARGUMENTS = re.compile(r"\$ARGUMENTS|\$[1-9]")
# A shell expansion running git (`` !`git diff HEAD` ``): the CLI runs it before
# the model sees the prompt, and it fails unless the workspace is a repository.
_RUNS_GIT = re.compile(r"!`\s*git\b")
# Prose telling the model to run git or gh (`git diff`, `gh pr view`): its Bash
# calls fail, and a real model flounders, unless the workspace is a repository.
_USES_GIT = re.compile(
    r"(?<![\w.-])(?:git\s+(?:diff|log|status|show|blame|branch|rev-parse|ls-files|add|commit|"
    r"checkout|switch|stash|merge|rebase|grep|worktree)|gh\s+(?:pr|issue|api|repo|run))\b"
)
# The command hands its arguments to a shell the CLI runs (`` !`x $ARGUMENTS` ``,
# a ```! block): words appended to them are shell words, and `(` a syntax error.
_ARGS_IN_SHELL = re.compile(
    r"!`[^`\n]*\$(?:ARGUMENTS|\d)|```!\n(?:(?!```)[\s\S])*?\$(?:ARGUMENTS|\d)"
)
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


@dataclass(frozen=True)
class StagePlan:
    number: int
    name: str
    command: str  # the plugin command its prompt runs
    command_file: str  # plugin-relative
    input_name: str | None  # the scenario input passed as the command's arguments
    argument_hint: str | None
    shared: bool  # the command also serves other stages: the prompt must say which part
    # Where the command waits for a person: (line, its sentence, the other lines) (_asks_user).
    asks_user: tuple[int, str, tuple[int, ...]] | None
    runs_git: int | None = None  # the line of its first `` !`git ...` `` expansion
    uses_git: tuple[int, str] | None = None  # prose running git or gh: (line, the words)
    # What the stage runs: a command, a skill or an agent no command names
    # (draft_shapes), or, for a plugin of hooks alone, a plain prompt ("session").
    kind: str = "command"
    slash_only: bool = False  # a skill the model may not invoke: run as /PLUGIN:NAME
    # The arguments of an invocation the command's own text shows (`/p:cmd --list`).
    example: str | None = None
    args_in_shell: bool = False  # its arguments go to a shell: nothing may be appended


@dataclass(frozen=True)
class Component:
    """One stage-map entry: a plugin file (or a skill's folder) and its stage."""

    glob: str
    stage: int
    why: str


@dataclass(frozen=True)
class Draft:
    plugin_name: str
    plugin: str  # the plugin folder, relative to the suite folder (POSIX)
    # When a marketplace names the plugin: its folder, relative to the suite
    # folder, and the plugin's name there (the suite then names it so).
    marketplace: tuple[str, str] | None
    stages: tuple[StagePlan, ...]
    entries: tuple[Component, ...]
    agents: Mapping[str, int]  # agent name -> its stage (the stub launches it there)
    global_paths: tuple[str, ...]  # relative to the suite folder
    # Independent commands: one stage runs `{command}`, and each of these (numbered
    # in name order) is a scenario. Empty: the stages are phases.
    calls: tuple[StagePlan, ...] = ()
    why: str = ""  # which the draft chose, and why: init prints it
    hooks: tuple[Hook, ...] = ()
    # Skills and agents no command names, left without a stage of their own
    # (independent commands: each scenario would run them again; --stages: the
    # user named every stage).
    unstaged: tuple[str, ...] = ()
    # Plugin files no stage reads (`draft_unread`): `stage: none` in the map.
    unread: frozenset[str] = frozenset()
    # A hook's command -> the package fetch its plugin script makes (no check on it).
    hook_fetches: Mapping[str, str] = field(default_factory=dict)

    @property
    def stub_file(self) -> str:
        return f"stub/{self.plugin_name}.yaml"

    def fixture_dir(self, stage: StagePlan) -> str:
        return f"fixtures/{stage.number}-{stage.name}-output"

    def output_file(self, stage: StagePlan) -> str:
        return f"{OUTPUT_DIR}/{stage.name}.md"


def plan(
    source: PluginSource,
    plugin_rel: str,
    files: Sequence[str],
    stages_arg: str | None,
    global_paths: Sequence[str] = ("ci-evals.yaml",),
    *,
    marketplace: tuple[str, str] | None = None,
    independent: bool = False,
) -> Draft:
    """The draft for the plugin `source` whose files (plugin-relative) are `files`."""
    plugin_dir, manifest, name = source.path, source.manifest, source.name
    commands = {
        command: path.relative_to(plugin_dir).as_posix()
        for command, path in references.command_files(plugin_dir, manifest).items()
    }
    texts = {path: read_or_empty(plugin_dir / path) for path in files}
    hooks = tuple(draft_shapes.hooks(plugin_dir, manifest))
    fetching = {
        hook.command: fetch
        for hook in hooks
        if (fetch := draft_shapes.script_fetches(plugin_dir, hook.command)) is not None
    }
    parts = _unnamed_parts(source, commands, texts)
    if not commands:
        stages = _part_stages(parts, taken=set()) or (_session_stage(),)
        if not parts and not hooks and not _loads_anything(source):
            raise UserError(
                f"{plugin_dir} has no commands, skills, agents or hooks: nothing to draft "
                "stages from",
                hint="write ci-evals.yaml by hand (docs/suite.md)",
            )
        entries, agents = _components(files, texts, stages, source)
        return Draft(
            plugin_name=name,
            plugin=plugin_rel,
            marketplace=marketplace,
            stages=stages,
            entries=entries,
            agents=agents,
            global_paths=tuple(global_paths),
            why=_why_parts(stages, hooks),
            hooks=hooks,
            hook_fetches=fetching,
        )
    if stages_arg is None and len(commands) > 1:
        command_texts = {c: read_or_empty(plugin_dir / path) for c, path in commands.items()}
        found = [] if independent else draft_order.readings(command_texts, files)
        if not found:
            calls = _stages(None, commands, source, sorted(commands))
            entries, agents = _components(files, texts, calls, source)
            parts = _unreached(parts, entries)
            return Draft(
                plugin_name=name,
                plugin=plugin_rel,
                marketplace=marketplace,
                stages=(_command_stage(),),
                entries=tuple(replace(entry, stage=1) for entry in entries),
                agents=agents,
                global_paths=tuple(global_paths),
                calls=calls,
                why=_why_independent(calls, forced=independent),
                hooks=hooks,
                hook_fetches=fetching,
                unstaged=tuple(f"{part.kind} {part.name}" for part in parts),
            )
        ordered = draft_order.order(sorted(commands), found)
        stages = _stages(None, commands, source, ordered)
        why = _why_phases(stages, found)
    else:
        stages = _stages(stages_arg, commands, source, sorted(commands))
        why = (
            f"phases, as --stages names them: {', '.join(s.name for s in stages)}"
            if stages_arg is not None
            else f"one stage, {stages[0].name}: the plugin's only command"
        )
    parts = _unreached(parts, _components(files, texts, stages, source)[0])
    # --stages names every stage: the rest are listed, not added.
    unstaged = tuple(f"{p.kind} {p.name}" for p in parts) if stages_arg is not None else ()
    extra = () if unstaged else _part_stages(parts, {s.name for s in stages}, len(stages) + 1)
    if extra:
        stages += extra
        why += f"; then {_listing(extra)}, which no command names"
    entries, agents = _components(files, texts, stages, source)
    return Draft(
        plugin_name=name,
        plugin=plugin_rel,
        marketplace=marketplace,
        stages=stages,
        entries=entries,
        agents=agents,
        global_paths=tuple(global_paths),
        why=why,
        hooks=hooks,
        hook_fetches=fetching,
        unstaged=unstaged,
    )


SESSION_STAGE = "session"  # the one stage of a plugin of hooks alone


def _unnamed_parts(
    source: PluginSource, commands: Mapping[str, str], texts: Mapping[str, str]
) -> list[draft_shapes.Part]:
    """The skills and agents no command's file names (all of them without commands):
    a command exercises what it names; the rest get a stage each."""
    said = "\n".join(texts.get(path, "") for path in commands.values())
    found = []
    for part in draft_shapes.skills(source.path):
        if part.name not in commands and not _names_any(said, (part.name,)):
            found.append(part)
    for path in references.plugin_agents(source.path, source.manifest):
        name = agent_name(path, texts.get(path, ""))
        if not _names_any(said, (name, Path(path).stem)):
            found.append(draft_shapes.agent_part(path, name))
    return found


def _unreached(
    parts: Sequence[draft_shapes.Part], entries: Sequence[Component]
) -> list[draft_shapes.Part]:
    """The parts no command reaches, directly or through a file it names (an agent
    naming a skill): those a command stage exercises need no stage of their own."""
    unreached = {entry.glob for entry in entries if entry.why == _UNNAMED}
    return [part for part in parts if glob_of(unit_of(part.file)) in unreached]


def _part_stages(
    parts: Sequence[draft_shapes.Part], taken: set[str], first: int = 1
) -> tuple[StagePlan, ...]:
    plans: list[StagePlan] = []
    for part in parts:
        stage = re.sub(r"[^a-z0-9_-]+", "-", part.name.lower()).strip("-_") or part.kind
        if stage in taken or stage.isdigit():
            stage = f"{part.kind}-{stage}"
        if stage in taken:
            raise UserError(
                f"the {part.kind} {part.name!r} ({quoted(part.file)}) "
                "makes no stage name of its own",
                hint="name the stages: --stages NAME=COMMAND,... then add its stage by hand",
            )
        taken.add(stage)
        plans.append(
            StagePlan(
                number=first + len(plans),
                name=stage,
                command=part.name,
                command_file=part.file,
                input_name=_input_name(stage),
                argument_hint=part.hint,
                shared=False,
                asks_user=None,
                kind=part.kind,
                slash_only=part.slash_only,
            )
        )
    return tuple(plans)


def _session_stage() -> StagePlan:
    return StagePlan(
        number=1,
        name=SESSION_STAGE,
        command="",
        command_file="",
        input_name=None,
        argument_hint=None,
        shared=False,
        asks_user=None,
        kind="session",
    )


def _loads_anything(source: PluginSource) -> bool:
    """An MCP server, an LSP server or an output style: the CLI loads it, a session runs it."""
    folder, manifest = source.path, source.manifest
    keys = ("mcpServers", "lspServers", "outputStyles")
    return (
        any(manifest.get(key) for key in keys)
        or (folder / ".mcp.json").is_file()
        or (folder / "output-styles").is_dir()
    )


def _listing(stages: Sequence[StagePlan]) -> str:
    names = [f"{s.kind} {s.command}" if s.kind != "session" else s.name for s in stages]
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _why_parts(stages: Sequence[StagePlan], hooks: Sequence[Hook]) -> str:
    events = sorted({hook.event for hook in hooks})
    hooked = f" (hooks on {', '.join(events)})" if events else ""
    if stages[0].kind == "session":
        return (
            f"one plain-prompt stage, {SESSION_STAGE}: the plugin has no commands, skills "
            f"or agents{hooked}"
        )
    return f"a stage per skill and agent ({_listing(stages)}): the plugin has no commands{hooked}"


COMMAND_STAGE = "command"  # the one stage of independent commands


def _command_stage() -> StagePlan:
    """The stage of independent commands: each scenario names its command and arguments."""
    return StagePlan(
        number=1,
        name=COMMAND_STAGE,
        command="{command}",
        command_file="",
        input_name="arguments",
        argument_hint=None,
        shared=False,
        asks_user=None,
    )


def _why_independent(calls: Sequence[StagePlan], *, forced: bool = False) -> str:
    names = ", ".join(call.command for call in calls)
    why = "as --independent asks" if forced else "none reads another's output"
    return (
        f"independent commands ({names}): {why}, so one stage "
        f"runs each as its own scenario (phases instead: --stages A,B,...)"
    )


def _why_phases(stages: Sequence[StagePlan], found: Sequence[draft_order.Reading]) -> str:
    at = {stage.command: stage.number for stage in stages}
    # The reason shown: a reading the order keeps (the writer first), the earliest
    # reader first.
    first = min(
        found,
        key=lambda r: (at[r.writer] > at[r.reader], at[r.reader]),
    )
    more = len(found) - 1
    also = f"; {more} more such {'reading' if more == 1 else 'readings'}" if more else ""
    names = ", ".join(stage.name for stage in stages)
    return f"phases, in turn: {names} ({first.reader} reads {first.via}, from {first.writer}{also})"


def read_or_empty(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _stages(
    stages_arg: str | None,
    commands: Mapping[str, str],
    source: PluginSource,
    names: Sequence[str],
) -> tuple[StagePlan, ...]:
    if stages_arg is None:
        pairs = [(command.replace(":", "-").lower(), command) for command in names]
    else:
        pairs = _named_stages(stages_arg, names)
    seen: set[str] = set()
    for stage, command in pairs:
        if stages_arg is None and (not STAGE_NAME.fullmatch(stage) or stage.isdigit()):
            raise UserError(
                f"the command {command!r} ({quoted(commands[command])}) makes no stage name",
                hint="name each stage: --stages NAME=COMMAND,... (lowercase letters, digits, "
                "'-' and '_')",
            )
        if not STAGE_NAME.fullmatch(stage) or stage.isdigit():
            raise UserError(
                f"bad stage name {stage!r}",
                field="--stages",
                hint="lowercase letters, digits, '-' and '_', not only digits",
            )
        if stage in seen:
            raise UserError(f"stage {stage!r} is named twice", field="--stages")
        seen.add(stage)
    uses = [command for _, command in pairs]
    plans = []
    for number, (stage, command) in enumerate(pairs, start=1):
        text = read_or_empty(source.path / commands[command])
        plans.append(
            StagePlan(
                number=number,
                name=stage,
                command=command,
                command_file=commands[command],
                input_name=_input_name(command) if _takes_arguments(text) else None,
                argument_hint=_frontmatter_value(text, "argument-hint"),
                shared=uses.count(command) > 1,
                asks_user=_asks_user(text),
                runs_git=_runs_git(text),
                uses_git=_uses_git(text),
                example=shown_example(text, source.name, command),
                args_in_shell=_ARGS_IN_SHELL.search(text) is not None,
            )
        )
    return tuple(plans)


def _named_stages(stages_arg: str, commands: Sequence[str]) -> list[tuple[str, str]]:
    """`a,b=cmd,c`: each stage with the command it runs (see docs/onboarding.md)."""
    items = [item.strip() for item in stages_arg.split(",") if item.strip()]
    if not items:
        raise UserError("no stage names", field="--stages", hint="e.g. --stages plan,build")
    valid = ", ".join(commands)
    pairs = []
    for position, item in enumerate(items):
        stage, _, command = item.partition("=")
        if command:
            if command not in commands:
                raise UserError(
                    f"stage {stage!r}: the plugin has no command {command!r}",
                    field="--stages",
                    hint=f"its commands: {valid}",
                )
        elif stage in commands:
            command = stage
        elif len(commands) == 1:
            command = commands[0]
        elif len(commands) == len(items):
            command = commands[position]  # one each, in name order
        else:
            raise UserError(
                f"which command does stage {stage!r} run?",
                field="--stages",
                hint=f"write STAGE=COMMAND (its commands: {valid})",
            )
        pairs.append((stage, command))
    return pairs


def _takes_arguments(text: str) -> bool:
    return bool(_ARGUMENTS.search(text)) or _frontmatter_value(text, "argument-hint") is not None


def _input_name(command: str) -> str:
    name = command.replace(":", "-")
    return f"{name}-args" if name in BUILTINS else name


def _frontmatter_value(text: str, key: str) -> str | None:
    """A front-matter field as text, read as Claude Code reads it; None when absent or empty."""
    value = read_front_matter(text).fields.get(key)
    if isinstance(value, list):  # `argument-hint: [pr]` is valid YAML: a one-item list
        shown = " ".join(f"[{item}]" for item in value)
    elif value is None or isinstance(value, dict):
        return None
    else:
        shown = str(value).strip()
    return shown or None


def _runs_git(text: str) -> int | None:
    found = _RUNS_GIT.search(text)
    return None if found is None else text.count("\n", 0, found.start()) + 1


def _uses_git(text: str) -> tuple[int, str] | None:
    found = _USES_GIT.search(text)
    if found is None:
        return None
    return text.count("\n", 0, found.start()) + 1, " ".join(found.group(0).split())


def _asks_user(text: str) -> tuple[int, str, tuple[int, ...]] | None:
    """Where the command first stops for a person: (line, its sentence, the other lines)."""
    matches = list(_ASKS_USER.finditer(text))
    if not matches:
        return None
    first = matches[0]
    start = max(text.rfind(c, 0, first.start()) for c in ".\n:") + 1
    ends = [i for i in (text.find(c, first.end()) for c in ".\n") if i != -1]
    sentence = text[start : min(ends) if ends else len(text)].replace("**", "").strip(" -*#")
    lines = [text.count("\n", 0, match.start()) + 1 for match in matches]
    others = tuple(sorted(set(lines[1:]) - {lines[0]}))
    return lines[0], sentence, others


def _components(
    files: Sequence[str],
    texts: Mapping[str, str],
    stages: tuple[StagePlan, ...],
    source: PluginSource,
) -> tuple[tuple[Component, ...], dict[str, int]]:
    first_stage: dict[str, int] = {}
    for plan_ in stages:
        first_stage.setdefault(unit_of(plan_.command_file), plan_.number)
    # Units: a skill's folder is one (its files name each other); any other file is its own.
    units: dict[str, list[str]] = {}
    for path in sorted(files):
        units.setdefault(unit_of(path), []).append(path)
    stage_of: dict[str, int] = {}
    why: dict[str, str] = {}
    for key in units:
        if key in first_stage:
            stage_of[key] = first_stage[key]
            users = [s for s in stages if unit_of(s.command_file) == key]
            what = users[0].kind if users[0].kind != "command" else "the command"
            what = f"the {what}" if users[0].kind != "command" else what
            why[key] = f"{what} of {', '.join(s.name for s in users)}"
        elif key == MANIFEST:
            stage_of[key] = 1
            why[key] = f"names every /{source.name}:* command"
    _spread(units, texts, stage_of, why)
    entries = []
    for key in units:
        reason = why.get(key, _UNNAMED)
        entries.append(Component(glob=glob_of(key), stage=stage_of.get(key, 1), why=reason))
    agents = {}
    for path in references.plugin_agents(source.path, source.manifest):
        agents[agent_name(path, texts.get(path, ""))] = stage_of.get(path, 1)
    return tuple(entries), agents


_UNNAMED = "named by no command: stage 1 runs everything"


def glob_of(key: str) -> str:
    if key.endswith("/**"):
        return _literal(key.removesuffix("/**")) + "/**"
    return "/" + _literal(key)  # anchored: a bare name would match at any depth


def unit_of(path: str) -> str:
    parts = path.split("/")
    return f"skills/{parts[1]}/**" if parts[0] == "skills" and len(parts) > 2 else path


def _literal(path: str) -> str:
    """`path` as a glob matching only itself: wildcards and backslashes escaped,
    and trailing spaces (which gitignore would drop)."""
    escaped = _GLOB_SPECIAL.sub(r"\\\1", path)
    stripped = escaped.rstrip(" ")
    return stripped + "\\ " * (len(escaped) - len(stripped))


def _spread(
    units: Mapping[str, Sequence[str]],
    texts: Mapping[str, str],
    stage_of: dict[str, int],
    why: dict[str, str],
) -> None:
    """To a fixed point: a unit not yet fixed takes the lowest stage of any staged
    unit whose text names it (an agent a command launches, a template it reads)."""
    fixed = set(stage_of)
    text_of = {key: "\n".join(texts.get(p, "") for p in paths) for key, paths in units.items()}
    names = {key: _unit_names(key, units[key], texts) for key in units}
    changed = True
    while changed:
        changed = False
        for key in units:
            if key in fixed:
                continue
            for other, stage in sorted(stage_of.items(), key=lambda item: item[1]):
                if other == key or not _names_any(text_of[other], names[key]):
                    continue
                if stage < stage_of.get(key, 1 << 30):
                    stage_of[key], why[key] = stage, f"named by {other.removesuffix('/**')}"
                    changed = True
                break


def _unit_names(key: str, paths: Sequence[str], texts: Mapping[str, str]) -> tuple[str, ...]:
    """How other files refer to a unit: a skill by its folder, an agent by its name,
    anything else by its file name (with and without the extension)."""
    if key.endswith("/**"):
        return (key.split("/")[1],)
    path = paths[0]
    stem = Path(path).stem
    found = {Path(path).name, path}
    if path.startswith("agents/"):
        found.add(agent_name(path, texts.get(path, "")))
    if len(stem) > 3 and stem.lower() not in ("readme", "license", "changelog"):
        found.add(stem)
    return tuple(sorted(found))


def agent_name(path: str, text: str) -> str:
    return _frontmatter_value(text, "name") or Path(path).stem


def _names_any(text: str, names: Sequence[str]) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in names)


# -- the files' text -------------------------------------------------------------


# Everything the draft takes from the plugin (file names above all: a name may
# hold a line break, `#`, `: `, quotes or U+2028) goes through these two, never
# into the YAML as it is: otherwise a file name could add keys to the draft.


def quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar, escaped by YAML's own emitter."""
    emitted = yaml.dump(
        text, Dumper=yaml.SafeDumper, default_style='"', allow_unicode=True, width=1 << 30
    )
    return emitted.rstrip("\n").removesuffix("\n...").rstrip("\n")


def as_comment(text: str) -> str:
    """`text` for a YAML comment: as it is when it is one line of printable
    characters (a comment ends only at a line break), else quoted as `quoted` does."""
    if text.isprintable():  # no line break (\n, \r, U+0085, U+2028, U+2029), no control
        return text
    return quoted(text)


def prompt_for(draft: Draft, stage: StagePlan) -> str:
    named = f"`{draft.plugin_name}:{stage.command}`"
    task = f"{{{stage.input_name}}}"
    output = draft.output_file(stage)
    if stage.kind == "session":
        return f"Write a short summary of the files in this workspace to {output}."
    if stage.kind == "skill" and not stage.slash_only:
        return (
            f"Use the Skill tool to run the skill {named}, then follow it for: {task}. "
            f"Write the result to {output}."
        )
    if stage.kind == "agent":
        return (
            f"Use the Agent tool to launch the subagent {named} on: {task}. "
            f"Write what it reports to {output}."
        )
    prompt = f"/{draft.plugin_name}:{stage.command}"
    if stage.input_name is not None:
        prompt += f" {{{stage.input_name}}}"
    # The check reads a file: a real model must be told which (the command's
    # arguments reach it, as $ARGUMENTS or appended as ARGUMENTS: ...). Independent
    # commands are told in each scenario's arguments (`_where_to_write`).
    if stage.args_in_shell or (stage is draft.stages[0] and draft.calls):
        return prompt
    if stage.shared:
        prompt += (
            f" (ci-evals stage {stage.name}: do only this stage's part, write it to {output}, "
            "then stop)"
        )
    else:
        prompt += _where_to_write(output)
    return prompt


def _where_to_write(output: str) -> str:
    return f" (then write the result to {output})"


def _plugin_line(draft: Draft) -> str:
    if draft.marketplace is None:
        return f"plugin: {quoted(draft.plugin)}"
    folder, name = draft.marketplace
    return (
        f"plugin: {{ marketplace: {quoted(folder)}, name: {quoted(name)} }}   "
        f"# {as_comment(draft.plugin)}/"
    )


def render_suite(draft: Draft) -> str:
    lines = [
        f"# Drafted by `ci-evals init` from {as_comment(draft.plugin)}/ "
        f"({as_comment(draft.plugin_name)}): edit the",
        "# prompts, checks and scenario inputs. Format: docs/suite.md; onboarding a plugin",
        "# you did not write: docs/onboarding.md.",
        "version: 1",
        _plugin_line(draft),
        "fixtures: fixtures              # fixtures/<k>-<stage>-output/: stage k's curated output",
        "stage_map: stage_map.yaml",
        "budget_usd: 5.0                 # the run's budget on the real model",
        "limits: { max_turns: 30, timeout_s: 900, max_budget_usd: 2.0 }",
        "stages:",
    ]
    for stage in draft.stages:
        lines.append(f"  - name: {stage.name}")
        if draft.calls:
            lines.append("    # Independent commands: each scenario runs one (see init's output).")
        lines += _asks_user_lines(stage, "    ")
        lines += _shell_lines(stage)
        if stage.shared:
            lines.append("    # One command, several stages: say what this stage does and writes.")
        lines.append(f"    prompt: {quoted(prompt_for(draft, stage))}")
        lines += [
            "    checks:                     # the stub's placeholder; check what the stage writes",
            f"      - {{ id: {stage.name}-output-written, "
            f"files: {quoted(draft.output_file(stage))}, count: 1 }}",
        ]
        lines += _fired_lines(draft, stage)
    if draft.unstaged:
        lines.append(
            "# No stage of their own (--stages names every stage, or each command's "
            "scenario would run them again): "
            f"{as_comment(', '.join(draft.unstaged))}"
        )
    lines.append("scenarios:")
    if draft.calls:
        for call in draft.calls:
            lines.append(f"  - id: {call.name}")
            lines += _asks_user_lines(call, "    ")
            lines += _shell_lines(call)
            lines += _hint_line(call)
            value = _example(call) if call.input_name else ""
            if not call.args_in_shell:
                value = (value + _where_to_write(draft.output_file(draft.stages[0]))).lstrip()
            lines.append(
                f"    inputs: {{ command: {quoted(call.command)}, arguments: {quoted(value)} }}"
            )
            lines += _git_lines([call])
        return "\n".join(lines) + "\n"
    # One input per command (stages sharing a command share it), from its first stage.
    firsts: dict[str, StagePlan] = {}
    for stage in draft.stages:
        if stage.input_name is not None:
            firsts.setdefault(stage.input_name, stage)
    inputs = {name: _example(s) for name, s in firsts.items()}
    if inputs:
        lines.append("  - id: example                 # one set of inputs; add more")
        lines += [line for s in firsts.values() for line in _hint_line(s)]
        values = ", ".join(f"{quoted(name)}: {quoted(value)}" for name, value in inputs.items())
        lines.append(f"    inputs: {{ {values} }}")
    else:
        lines.append("  - id: example")
    lines += _git_lines(draft.stages)
    return "\n".join(lines) + "\n"


def _example(stage: StagePlan) -> str:
    if stage.example is not None:
        return stage.example
    if stage.kind == "command" or stage.argument_hint is not None:
        return example_value(stage.argument_hint, stage.command)
    return f"a small example task of the kind the {stage.kind} is for"


def _stub_tools(draft: Draft, stage: StagePlan) -> list[str]:
    """The tools the drafted stub calls in `stage`."""
    tools = ["Write"]
    if stage.kind == "skill" and not stage.slash_only:
        tools.append("Skill")
    if any(number == stage.number for number in draft.agents.values()):
        tools.append("Agent")
    return tools


def _fired_lines(draft: Draft, stage: StagePlan) -> list[str]:
    """Checks that the stage's part fired: the Skill or Agent call in the trajectory,
    and on stage 1 every hook a stub run of it can fire (each hook runs in every
    stage; once is enough)."""
    named = quoted(f"{draft.plugin_name}:{stage.command}")
    lines = []
    if stage.kind == "skill" and stage.slash_only:
        lines.append(
            "      # disable-model-invocation: run as /PLUGIN:NAME, which the CLI expands "
            "into the prompt; no Skill call shows it"
        )
    elif stage.kind == "skill":
        lines.append(f"      - {{ trajectory: {{ skill: {named} }} }}   # the skill fired")
    elif stage.kind == "agent":
        lines.append(f"      - {{ trajectory: {{ subagent: {named} }} }}   # the agent ran")
    if stage.number != 1:
        return lines
    tools = _stub_tools(draft, stage)
    checked: set[str] = set()
    for hook in draft.hooks:
        why_not = draft_shapes.observable(hook, tools, draft.hook_fetches.get(hook.command))
        if why_not is None and hook.event not in checked:
            checked.add(hook.event)
            lines.append(
                f"      - {{ trajectory: {{ hook: {quoted(hook.event)} }} }}   "
                f"# ran and exited 0: {as_comment(hook.command[:60])}"
            )
        elif why_not is not None:
            lines.append(
                f"      # no check of the {as_comment(hook.event)} hook "
                f"({as_comment(hook.command[:60])}): {as_comment(why_not)}"
            )
    if not draft.hooks and stage.kind == "session":
        lines.append(
            "      # the plugin's MCP server, LSP server or output style leaves nothing "
            "in the trajectory to check: grade what it changes (docs/onboarding.md)"
        )
    return lines


def _git_lines(plans: Sequence[StagePlan]) -> list[str]:
    """`git: true` when a scenario's command runs git before the model sees it, or
    tells the model to run git or gh."""
    using = [s for s in plans if s.runs_git is not None]
    told = [s for s in plans if s.uses_git is not None]
    if using:
        where = f"{as_comment(using[0].command_file)}:{using[0].runs_git}"
        lines = [f"    # {where} runs `!`git ...`` first: the workspace is a repository,"]
    elif told and told[0].uses_git is not None:
        line, words = told[0].uses_git
        where = f"{as_comment(told[0].command_file)}:{line}"
        lines = [
            f"    # {where} has the model run `{as_comment(words)}`: the workspace is a repository,"
        ]
    else:
        return []
    lines.append("    # the seed fixtures/0-<name>/ its one commit (docs/suite.md#a-git-workspace)")
    if any(s.uses_git is not None and s.uses_git[1].startswith("gh ") for s in plans):
        lines.append(
            "    # gh needs GitHub and a network, which the sandbox does not have: give the"
        )
        lines.append("    # stage what gh would fetch (a diff, a PR's text) as a fixture or input")
    return [*lines, "    git: true"]


def _shell_lines(stage: StagePlan) -> list[str]:
    if not stage.args_in_shell:
        return []
    return [
        f"    # {as_comment(stage.command_file)} hands its arguments to a shell "
        "(`!`...$ARGUMENTS``):",
        "    # nothing is added to them to say where to write; check what it writes itself",
    ]


def _asks_user_lines(stage: StagePlan, indent: str) -> list[str]:
    if stage.asks_user is None:
        return []
    line, text, others = stage.asks_user
    where = f"{as_comment(stage.command_file)}:{line}"
    if others:
        where += f" (also line{'s' if len(others) > 1 else ''} {', '.join(map(str, others))})"
    return [
        f"{indent}# {where} stops for a person:",
        f"{indent}#   {quoted(text[:80])}",
        f"{indent}# A stage runs unattended: answer in the prompt (docs/onboarding.md).",
    ]


def _hint_line(stage: StagePlan) -> list[str]:
    """Where an example input came from: the command's own example, or its hint."""
    if stage.input_name is None:
        return []
    if stage.example is not None:
        return [f"    # as {as_comment(stage.command_file)} shows it run"]
    if stage.argument_hint is None:
        return []
    hint = quoted(stage.argument_hint)
    return [f"    # {as_comment(stage.command)}'s argument-hint is {hint}: a made-up value"]


def render_stage_map(draft: Draft) -> str:
    names = ", ".join(stage.name for stage in draft.stages)
    lines = [
        f"# Drafted by `ci-evals init` from {as_comment(draft.plugin)}/: "
        "which stage each plugin file can",
        "# affect. A file maps to the lowest stage whose command (or a file such a command",
        "# names) names it; a file nothing names maps to stage 1, which runs everything, but",
        "# a README, licence or changelog nothing names to none (no stage reads it).",
        "# Refine by hand (docs/onboarding.md); `ci-evals check-coverage` keeps it complete.",
        "version: 1",
        f"root: {quoted(draft.plugin)}",
        f"stages: [{names}]",
        "entries:",
    ]
    unread = {"/" + _literal(path) for path in draft.unread}
    folded = _folders_at_stage_one(draft.entries, unread)
    for folder, (count, others) in folded.items():
        first = draft.stages[0].name
        excepted = (
            f"except: [{', '.join(quoted(entry.glob) for entry in others)}], " if others else ""
        )
        why = f"{count - len(others)} of its {count} entries at stage 1, as is a file added later"
        if others:
            why += "; the rest below"
        lines.append(f"  - {{ glob: {quoted(folder)}, {excepted}stage: {first} }}   # {why}")
    inside = {id(entry) for _, others in folded.values() for entry in others}
    for entry in draft.entries:
        if _folder_of(entry.glob) in folded and id(entry) not in inside:
            continue  # stage 1 through its folder's entry
        if entry.glob in unread:
            why = "no command, skill or agent names it: no stage reads it"
            lines.append(f"  - {{ glob: {quoted(entry.glob)}, stage: none }}   # {why}")
            continue
        stage = draft.stages[entry.stage - 1].name
        lines.append(
            f"  - {{ glob: {quoted(entry.glob)}, stage: {stage} }}   # {as_comment(entry.why)}"
        )
    globals_ = ", ".join(quoted(path) for path in draft.global_paths)
    lines += [f"global: [{globals_}]", "fixtures: fixtures"]
    lines += marketplace_lines(draft.marketplace)
    lines += [
        "# Keys Claude Code shows but loads nothing from: a change to them alone in",
        "# .claude-plugin/plugin.json or the marketplace entry runs no stage.",
        f"ignore_metadata: [{', '.join(quoted(key) for key in METADATA_KEYS)}]",
    ]
    return "\n".join(lines) + "\n"


def marketplace_lines(marketplace: tuple[str, str] | None) -> list[str]:
    """The map's `marketplace:` for a marketplace's plugin: (its folder from the map's,
    the plugin's entry); none for a plugin of its own."""
    if marketplace is None:
        return []
    folder, name = marketplace
    market = f"{folder}/{MARKETPLACE}" if folder != "." else MARKETPLACE
    return [
        "# The marketplace lists every plugin: only this plugin's entry (and what lies",
        "# outside its plugins list) is compared, parsed, at the base and the head.",
        f"marketplace: {{ file: {quoted(market if market.startswith('../') else '/' + market)}, "
        f"plugin: {quoted(name)} }}",
    ]


# A folder of at least this many entries, all but a third of them at stage 1,
# is drafted as one entry with `except:` for the rest (skills/ of 40 skills).
_FOLD_AT = 6


def _folder_of(glob: str) -> str:
    """`/skills/**` for `/skills/x/**` or `/skills/x.md`: the top folder's glob."""
    parts = glob.lstrip("/").split("/")
    return f"/{parts[0]}/**" if len(parts) > 1 else ""


def _folders_at_stage_one(
    entries: Sequence[Component], unread: set[str]
) -> dict[str, tuple[int, list[Component]]]:
    """Top folders whose entries are mostly at stage 1: folder glob -> (its entry
    count, the entries at another stage or none, which its `except:` leaves to
    their own lines). Only stage 1 is folded: a file added there later is then
    matched without anyone deciding its stage, and stage 1 runs everything."""
    by_folder: dict[str, list[Component]] = {}
    for entry in entries:
        if _folder_of(entry.glob):
            by_folder.setdefault(_folder_of(entry.glob), []).append(entry)
    folded = {}
    for folder, inside in by_folder.items():
        others = [e for e in inside if e.stage != 1 or e.glob in unread]
        if len(inside) >= _FOLD_AT and len(others) * 3 <= len(inside):
            folded[folder] = (len(inside), others)
    return folded


def render_stub(draft: Draft) -> str:
    lines = [
        "# Drafted by `ci-evals init`: the stub model's script for this suite",
        "# (docs/stub-model.md). One rule per stage (its command) and per agent; each stage",
        "# writes the placeholder file its check looks for. Script what a good run does.",
        "rules:",
    ]
    loops = draft_shapes.loops(draft.hooks)
    if loops:
        lines += [
            f"# The plugin's {loops[0].event} hook ({as_comment(loops[0].command[:60])}) "
            "may refuse to",
            "# let a turn end and feed a prompt back; the CLI then asks for another turn, and",
            f"# ends it after {draft_shapes.STOP_HOOK_BLOCK_CAP} refusals in a row "
            "(CLAUDE_CODE_STOP_HOOK_BLOCK_CAP).",
            "# Each stage's last turn answers every one of them (repeat_last): script them",
            "# to test the loop itself.",
        ]
    # Independent commands: a rule per command, each writing the one stage's placeholder.
    for stage in draft.calls or draft.stages:
        match = _stub_match(draft, stage)
        content = f"placeholder output of stage {stage.name} (stub) for: {{args}}\\n"
        output = draft.output_file(draft.stages[0] if draft.calls else stage)
        lines += [
            f"  - name: {stage.name if stage.name not in draft.agents else 'stage-' + stage.name}",
            f"    match: {{{match}}}",
            *(["    repeat_last: true"] if loops else []),
            "    turns:",
        ]
        if stage.kind == "skill" and not stage.slash_only:
            skill = quoted(f"{draft.plugin_name}:{stage.command}")
            lines += ["      - tools:", f"          - skill: {{name: {skill}}}"]
        lines += [
            "      - tools:",
            f'          - write: {{path: {quoted(output)}, content: "{content}"}}',
        ]
        for agent, number in draft.agents.items():
            if number == stage.number:
                task = f"Placeholder task for {agent} in stage {stage.name}: {{args}}"
                lines.append(
                    f"          - agent: {{name: {quoted(f'{draft.plugin_name}:{agent}')}, "
                    f"prompt: {quoted(task)}}}"
                )
        lines.append(f"      - text: {quoted(f'Stage {stage.name} done (stub).')}")
    for agent in draft.agents:
        lines += [
            f"  - name: {quoted(agent)}",
            f"    match: {{agent: {quoted(f'{draft.plugin_name}:{agent}')}}}",
            "    turns:",
            f"      - text: {quoted(f'Placeholder findings of {agent} (stub).')}",
        ]
    return "\n".join(lines) + "\n"


def _stub_match(draft: Draft, stage: StagePlan) -> str:
    """How the stub tells the stage's conversation: its slash command, else the
    part its prompt names (in backticks: no other prompt holds them so)."""
    if stage.kind == "session":
        return f"prompt_contains: {quoted(draft.output_file(stage))}, subagent: false"
    if stage.kind != "command" and not stage.slash_only:
        named = f"`{draft.plugin_name}:{stage.command}`"
        return f"prompt_contains: {quoted(named)}, subagent: false"
    match = f"command: {quoted(f'{draft.plugin_name}:{stage.command}')}"
    if stage.shared:
        match += f', prompt_contains: "ci-evals stage {stage.name}:"'
    return match


def render_fixture(stage: StagePlan) -> str:
    return (
        f"Placeholder output of stage {stage.name}: replace this folder with a curated,\n"
        f"known-good output of stage {stage.number} (what stage {stage.number + 1} starts from).\n"
    )


def render_precommit(
    map_arg: str | None, *, fixtures: bool = False, suite_arg: str | None = None
) -> str:
    """The hooks a suite needs: its stage map covers every plugin file and, for a suite
    with fixtures, they hold the stages' contracts (`suite_arg`: the suite's path when
    it is not at the repository's top, where check-fixtures looks)."""
    args = f"\n        args: [--map, {quoted(map_arg)}]" if map_arg else ""
    fixtures_hook = ""
    if fixtures:
        suite = f"\n        args: [--suite, {quoted(suite_arg)}]" if suite_arg else ""
        fixtures_hook = f"""\
      - id: ci-evals-fixtures
        name: fixtures hold the stages' contracts
        entry: ci-evals check-fixtures --contracts-only{suite}
        language: system
        pass_filenames: false
        always_run: true
"""
    return f"""\
# Drafted by `ci-evals init`: every commit checks that the stage map covers every
# plugin file (and the fixtures, that they hold the stages' contracts).
# `language: system` runs the ci-evals you installed; to pin ci-evals' own hooks
# instead (docs/stage-map.md, check-coverage), use `repo:` its repository URL, `rev:`
# a full commit SHA (`pre-commit autoupdate --freeze`) and the same hook ids.
repos:
  - repo: local
    hooks:
      - id: ci-evals-coverage
        name: stage map covers every plugin file
        entry: ci-evals check-coverage{args}
        language: system
        pass_filenames: false
        always_run: true
{fixtures_hook}"""
