"""Load and validate a stub script: rules that map requests to scripted turns.

The format is documented for users in docs/stub-model.md. Everything is
checked here, once, with `file:line:col: field` errors, so the server never
meets a malformed script. The records are frozen; tool inputs stay as plain
JSON-like data with placeholders, filled in per request by `responder`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ci_evals.config import yaml_source
from ci_evals.config.yaml_source import ANY_KEY, LocatedNode
from ci_evals.errors import UserError
from ci_evals.fs.copyable import confinement, escape_problem, named_problem
from ci_evals.text import display_path

STOP_REASONS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal")
USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


@dataclass(frozen=True)
class StubUsage:
    """Token counts reported for one turn; the CLI prices them into `total_cost_usd`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass(frozen=True)
class ToolCall:
    """One `tool_use` block: the CLI tool `name` and its `input` (with placeholders).

    `path_keys` name the input keys holding a path relative to the working
    directory; they are made absolute per request.
    """

    name: str
    input: dict[str, Any]
    path_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault:
    """A failure served instead of the turn's answer.

    `kind` is one of `http_status`, `malformed_sse`, `disconnect`, `hang`.
    `hang_seconds` None means until the server stops. `times` None means always.
    """

    kind: str
    http_status: int = 0
    message: str | None = None
    hang_seconds: float | None = None
    times: int | None = None
    # What `times` counts in: each CLI session apart (a retry inside the CLI), or
    # every request the server sees (a new CLI process retrying the whole stage).
    scope: str = "session"


@dataclass(frozen=True)
class Turn:
    text: str | None
    tools: tuple[ToolCall, ...]
    usage: StubUsage
    stop_reason: str | None  # None: tool_use when there are tools, else end_turn
    delay: float
    fault: Fault | None
    where: str  # "FILE:LINE", for records and messages


@dataclass(frozen=True)
class RequestMatch:
    """Conditions on a request; all given ones must hold. All None matches everything."""

    command: str | None = None
    agent: str | None = None
    prompt_contains: str | None = None
    system_contains: str | None = None
    # In the request's context (`ParsedRequest.context`): the system prompt, system
    # messages and system reminders, where the plugin's skills and agents are listed.
    context_contains: str | None = None
    context_lacks: str | None = None
    model: str | None = None
    subagent: bool | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    match: RequestMatch
    turns: tuple[Turn, ...]  # with `variants`: the first variant
    repeat_last: bool
    where: str
    # Alternative turn lists: each new conversation this rule serves takes the
    # next one, cycling (per-call variation, e.g. a reviewer scoring repeats differently).
    variants: tuple[tuple[Turn, ...], ...] = ()

    @property
    def all_turns(self) -> tuple[Turn, ...]:
        return tuple(turn for variant in self.variants for turn in variant) or self.turns


@dataclass(frozen=True)
class Script:
    rules: tuple[Rule, ...]
    path: str = "<script>"
    usage: StubUsage = field(default_factory=StubUsage)


@dataclass(frozen=True)
class _Beside:
    """Where the files a script names (`content_file`, `input_files`) are: `folder`
    (the script's), and the real folder they must resolve inside (`within`, the
    repository holding it: `fs.copyable.confinement`), outside .git."""

    folder: Path
    within: Path

    @classmethod
    def of(cls, folder: Path) -> _Beside:
        return cls(folder, confinement(folder))


def load_script(path: Path, display: str | None = None) -> Script:
    """Read and validate a stub script file; raises `UserError` with file:line on problems.

    The script, and every file it names, lies in the repository holding its
    folder (links followed), outside .git: a pull request writes scripts too.
    """
    path = Path(os.path.abspath(path))
    beside = _Beside.of(path.parent)
    if (problem := escape_problem(str(path), beside.within)) is not None:
        shown = display if display is not None else display_path(path)
        raise UserError(f"stub script {shown} {problem}", field="--model")
    root = yaml_source.load(path, display)
    return _parse_script(root, base_dir=beside)


def loads_script(text: str, name: str = "<script>", base_dir: Path | None = None) -> Script:
    """Like `load_script`, from a string (`content_file` paths resolve against `base_dir`)."""
    folder = Path(os.path.abspath(base_dir or Path.cwd()))
    return _parse_script(yaml_source.loads(text, name), base_dir=_Beside.of(folder))


# -- parsing ------------------------------------------------------------------


def _parse_script(root: LocatedNode, base_dir: _Beside) -> Script:
    keys = root.mapping({"version", "usage", "rules"}, required=("rules",), what="stub script")
    if "version" in keys:
        keys["version"].as_int(minimum=1, maximum=1)
    default_usage = _parse_usage(keys["usage"], StubUsage()) if "usage" in keys else StubUsage()
    rule_fields = keys["rules"].sequence(allow_empty=False)
    rules = tuple(
        _parse_rule(item, index, default_usage, base_dir) for index, item in enumerate(rule_fields)
    )
    _check_rules(rules, rule_fields)
    return Script(rules=rules, path=root.file, usage=default_usage)


def _check_rules(rules: tuple[Rule, ...], fields: list[LocatedNode]) -> None:
    """Mistakes that load fine but could never work: duplicates, dead rules, unlaunched agents."""
    launched = {
        str(call.input.get("subagent_type"))
        for rule in rules
        for turn in rule.all_turns
        for call in turn.tools
        if call.name == "Agent"
    }
    seen: set[str] = set()
    catch_all: Rule | None = None
    for rule, item in zip(rules, fields, strict=True):
        if rule.name in seen:
            raise item.error(f"duplicate rule name {rule.name!r}")
        seen.add(rule.name)
        if catch_all is not None:
            raise item.error(
                f"rule {rule.name!r} can never match",
                hint=f"{catch_all.name!r} ({catch_all.where}) has no 'match' and takes every "
                "request; move it last",
            )
        if rule.match == RequestMatch():
            catch_all = rule
        agent = rule.match.agent
        if agent is not None and agent not in launched and "{" not in agent:
            raise item.error(
                f"no turn launches agent {agent!r} with an 'agent:' call, so this rule can "
                "never match",
                hint="match a subagent the stub did not launch with 'system_contains'",
            )


def _where(f: LocatedNode) -> str:
    return f"{f.file}:{f.line}"


def _parse_rule(item: LocatedNode, index: int, usage: StubUsage, base_dir: _Beside) -> Rule:
    keys = item.mapping({"name", "match", "turns", "variants", "repeat_last"}, what="rule")
    if "turns" not in keys and "variants" not in keys:
        raise item.error("missing required key 'turns'")
    if "turns" in keys and "variants" in keys:
        raise keys["variants"].error("a rule has 'turns' or 'variants', not both")
    name = keys["name"].as_str() if "name" in keys else f"rules[{index}]"
    match = _parse_match(keys["match"]) if "match" in keys else RequestMatch()

    def turn_list(f: LocatedNode) -> tuple[Turn, ...]:
        return tuple(_parse_turn(turn, usage, base_dir) for turn in f.sequence(allow_empty=False))

    variants: tuple[tuple[Turn, ...], ...] = ()
    if "variants" in keys:
        variants = tuple(turn_list(v) for v in keys["variants"].sequence(allow_empty=False))
        turns = variants[0]
    else:
        turns = turn_list(keys["turns"])
    repeat_last = keys["repeat_last"].as_bool() if "repeat_last" in keys else False
    return Rule(
        name=name,
        match=match,
        turns=turns,
        repeat_last=repeat_last,
        where=_where(item),
        variants=variants,
    )


def _parse_match(f: LocatedNode) -> RequestMatch:
    if f.is_null():
        return RequestMatch()
    keys = f.mapping(
        {
            "command",
            "agent",
            "prompt_contains",
            "system_contains",
            "context_contains",
            "context_lacks",
            "model",
            "subagent",
        },
        what="match",
    )

    def text(key: str) -> str | None:
        return keys[key].as_str() if key in keys else None

    command = text("command")
    return RequestMatch(
        command=command.lstrip("/") if command is not None else None,
        agent=text("agent"),
        prompt_contains=text("prompt_contains"),
        system_contains=text("system_contains"),
        context_contains=text("context_contains"),
        context_lacks=text("context_lacks"),
        model=text("model"),
        subagent=keys["subagent"].as_bool() if "subagent" in keys else None,
    )


def _parse_usage(f: LocatedNode, base: StubUsage) -> StubUsage:
    keys = f.mapping(USAGE_KEYS, what="usage mapping")
    values = {key: keys[key].as_int(minimum=0) for key in keys}
    return StubUsage(**{key: values.get(key, getattr(base, key)) for key in USAGE_KEYS})


def _parse_turn(f: LocatedNode, usage: StubUsage, base_dir: _Beside) -> Turn:
    keys = f.mapping(
        {"text", "tools", "usage", "stop_reason", "delay", "fault"},
        what="turn (text, tools, usage, stop_reason, delay, fault)",
    )
    if not {"text", "tools", "fault"} & keys.keys():
        raise f.error("a turn needs at least one of 'text', 'tools', 'fault'")
    tools = (
        tuple(_parse_tool(item, base_dir) for item in keys["tools"].sequence(allow_empty=False))
        if "tools" in keys
        else ()
    )
    stop_reason = None
    if "stop_reason" in keys:
        stop_reason = keys["stop_reason"].as_str()
        if stop_reason not in STOP_REASONS:
            raise keys["stop_reason"].error(
                f"unknown stop_reason {stop_reason!r}", hint="one of " + ", ".join(STOP_REASONS)
            )
    return Turn(
        text=keys["text"].as_str(allow_empty=True) if "text" in keys else None,
        tools=tools,
        usage=_parse_usage(keys["usage"], usage) if "usage" in keys else usage,
        stop_reason=stop_reason,
        delay=keys["delay"].as_number(minimum=0) if "delay" in keys else 0.0,
        fault=_parse_fault(keys["fault"]) if "fault" in keys else None,
        where=_where(f),
    )


# -- tool calls -----------------------------------------------------------------

_TOOL_KINDS = ("write", "edit", "read", "bash", "agent", "skill", "tool")


def _parse_tool(f: LocatedNode, base_dir: _Beside) -> ToolCall:
    keys = f.mapping(_TOOL_KINDS, what=f"tool call (one of: {', '.join(_TOOL_KINDS)})")
    if len(keys) != 1:
        raise f.error(f"a tool call has exactly one key, got {len(keys)}: {', '.join(keys)}")
    kind, body = next(iter(keys.items()))
    return _TOOL_PARSERS[kind](body, base_dir)


def _shorthand(body: LocatedNode, key: str) -> dict[str, LocatedNode] | None:
    """`read: PATH` is short for `read: {path: PATH}`; None when `body` is a mapping."""
    if isinstance(body.node, yaml.ScalarNode):
        return {key: body}
    return None


def _write(body: LocatedNode, base_dir: _Beside) -> ToolCall:
    keys = body.mapping({"path", "content", "content_file"}, required=("path",), what="write")
    if ("content" in keys) == ("content_file" in keys):
        raise body.error("write needs exactly one of 'content' or 'content_file'")
    if "content" in keys:
        content = keys["content"].as_str(allow_empty=True)
    else:
        content = _read_beside(keys["content_file"], base_dir)
    return ToolCall(
        "Write", {"file_path": keys["path"].as_str(), "content": content}, path_keys=("file_path",)
    )


def _edit(body: LocatedNode, _base_dir: _Beside) -> ToolCall:
    keys = body.mapping(
        {"path", "old", "new", "replace_all"}, required=("path", "old", "new"), what="edit"
    )
    tool_input: dict[str, Any] = {
        "file_path": keys["path"].as_str(),
        "old_string": keys["old"].as_str(allow_empty=True),
        "new_string": keys["new"].as_str(allow_empty=True),
    }
    if "replace_all" in keys:
        tool_input["replace_all"] = keys["replace_all"].as_bool()
    return ToolCall("Edit", tool_input, path_keys=("file_path",))


def _read(body: LocatedNode, _base_dir: _Beside) -> ToolCall:
    keys = _shorthand(body, "path") or body.mapping({"path"}, required=("path",), what="read")
    return ToolCall("Read", {"file_path": keys["path"].as_str()}, path_keys=("file_path",))


def _bash(body: LocatedNode, _base_dir: _Beside) -> ToolCall:
    keys = _shorthand(body, "command") or body.mapping(
        {"command", "description", "timeout_ms"}, required=("command",), what="bash"
    )
    tool_input: dict[str, Any] = {"command": keys["command"].as_str()}
    if "description" in keys:
        tool_input["description"] = keys["description"].as_str()
    if "timeout_ms" in keys:
        tool_input["timeout"] = keys["timeout_ms"].as_int(minimum=1)
    return ToolCall("Bash", tool_input)


def _agent(body: LocatedNode, _base_dir: _Beside) -> ToolCall:
    keys = body.mapping(
        {"name", "prompt", "description", "background"}, required=("name", "prompt"), what="agent"
    )
    name = keys["name"].as_str()
    description = keys["description"].as_str() if "description" in keys else f"Run {name}"
    background = keys["background"].as_bool() if "background" in keys else False
    return ToolCall(
        "Agent",
        {
            "description": description,
            "prompt": keys["prompt"].as_str(),
            "subagent_type": name,
            "run_in_background": background,
        },
    )


def _skill(body: LocatedNode, _base_dir: _Beside) -> ToolCall:
    keys = _shorthand(body, "name") or body.mapping(
        {"name", "args"}, required=("name",), what="skill"
    )
    tool_input: dict[str, Any] = {"skill": keys["name"].as_str()}
    if "args" in keys:
        tool_input["args"] = keys["args"].as_str(allow_empty=True)
    return ToolCall("Skill", tool_input)


def _raw_tool(body: LocatedNode, base_dir: _Beside) -> ToolCall:
    keys = body.mapping({"name", "input", "input_files"}, required=("name",), what="tool")
    tool_input: Any = keys["input"].plain() if "input" in keys else {}
    if not isinstance(tool_input, dict):
        raise keys["input"].error("expected a mapping (the tool's input object)")
    if "input_files" in keys:  # {KEY: PATH}: input KEY is that file's text
        files = keys["input_files"].mapping(ANY_KEY, what="mapping of input keys to files")
        for key, path in files.items():
            tool_input[key] = _read_beside(path, base_dir)
    return ToolCall(keys["name"].as_str(), tool_input)


def _read_beside(value: LocatedNode, base_dir: _Beside) -> str:
    """The text of the file `value` names, relative to the script's folder (read at
    load), which must lie in the repository (`fs.copyable.named_problem`)."""
    text = value.as_str()
    problem = named_problem(text, base_dir.folder, base_dir.within)
    if problem is not None:
        raise value.error(f"{text} {problem}")
    source = base_dir.folder / text
    try:
        return source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise value.error(f"cannot read {display_path(source)}: {exc}") from None


_TOOL_PARSERS = {
    "write": _write,
    "edit": _edit,
    "read": _read,
    "bash": _bash,
    "agent": _agent,
    "skill": _skill,
    "tool": _raw_tool,
}


# -- faults -----------------------------------------------------------------------

_ERROR_STATUSES = range(400, 600)
FAULT_SCOPES = ("session", "server")


def _parse_fault(f: LocatedNode) -> Fault:
    kinds = ("http_status", "malformed_sse", "disconnect", "hang")
    keys = f.mapping({*kinds, "message", "times", "scope"}, what="fault")
    chosen = [kind for kind in kinds if kind in keys]
    if len(chosen) != 1:
        raise f.error("a fault needs exactly one of " + ", ".join(kinds))
    kind = chosen[0]
    times = keys["times"].as_int(minimum=1) if "times" in keys else None
    scope = keys["scope"].as_str() if "scope" in keys else "session"
    if scope not in FAULT_SCOPES:
        raise keys["scope"].error(f"unknown scope {scope!r}", hint="session or server")
    if "scope" in keys and times is None:
        raise keys["scope"].error("'scope' counts 'times': give 'times' too")
    message = keys["message"].as_str() if "message" in keys else None
    if message is not None and kind != "http_status":
        raise keys["message"].error("'message' goes with 'http_status' only")
    if kind == "http_status":
        status = keys["http_status"].as_int(minimum=400, maximum=599)
        return Fault(kind, http_status=status, message=message, times=times, scope=scope)
    if kind == "hang":
        return Fault(kind, hang_seconds=_parse_hang(keys["hang"]), times=times, scope=scope)
    if not keys[kind].as_bool():
        raise keys[kind].error(f"write '{kind}: true', or leave the fault out")
    return Fault(kind, times=times, scope=scope)


def _parse_hang(f: LocatedNode) -> float | None:
    node = f.node
    if isinstance(node, yaml.ScalarNode) and node.value == "forever":
        return None
    try:
        return f.as_number(minimum=0)
    except UserError:
        raise f.error("expected a number of seconds or 'forever'") from None
