"""Decide the answer to one request: which rule, which turn, what content.

Pure logic plus two small pieces of per-server memory, both keyed by the CLI's
session id so parallel scenarios do not disturb each other:
- the subagents this stub launched (`agent:` calls), so a later request from
  that subagent can be matched by agent name;
- how often a faulty turn was served, for `fault.times`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ci_evals.endpoints.stub_model.request import ParsedRequest
from ci_evals.endpoints.stub_model.script import (
    Fault,
    RequestMatch,
    Rule,
    Script,
    StubUsage,
    ToolCall,
    Turn,
)

NONESSENTIAL_RULE = "(non-essential)"
_PLACEHOLDER = re.compile(r"\{(cwd|args|arg[1-9]|prompt|turn|model)\}")
_COMMAND_TAGS = re.compile(r"<command-(message|name|args)>.*?</command-\1>", re.DOTALL)


@dataclass(frozen=True)
class Reply:
    """What to send back, and how to record it.

    `outcome`: `turn` (a scripted turn), `fault` (a scripted failure),
    `exhausted` (the rule ran out of turns), `unmatched` (no rule fit),
    `nonessential` (title generation and the like).
    """

    outcome: str
    rule: str | None
    turn: int | None  # 1-based index into the rule's turns
    agent: str | None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = "end_turn"
    usage: StubUsage = field(default_factory=StubUsage)
    delay: float = 0.0
    fault: Fault | None = None


class Responder:
    """Maps parsed requests to replies for one script; safe to call from many threads."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._launched: dict[tuple[str, str], str] = {}  # (session, prompt) -> agent name
        self._served: dict[tuple[str, str, str, int], int] = {}  # fault counters
        # (session, agent, rule) -> the variant that conversation got, and the
        # place in the plan of the unit it belonged to (None: not told)
        self._variant: dict[tuple[str, str, str], tuple[int, int | None]] = {}
        self._tool_ids = itertools.count(1)

    def reply(self, request: ParsedRequest, place: int | None = None) -> Reply:
        """The answer to `request`; `place`: the place in the run's plan of the unit
        (scenario and repeat) it belongs to, which picks a rule's variant."""
        agent = self._agent_of(request)
        if request.nonessential:
            return _nonessential(request)
        for rule in self.script.rules:
            if _fits(rule.match, request, agent):
                return self._from_rule(rule, request, agent, place)
        return Reply(
            "unmatched",
            rule=None,
            turn=None,
            agent=agent,
            blocks=[_text_block(_unmatched_text(request, agent))],
        )

    # -- internals -------------------------------------------------------------

    def _agent_of(self, request: ParsedRequest) -> str | None:
        if not request.subagent:
            return None
        prompt = request.prompt.strip()
        with self._lock:
            exact = self._launched.get((request.session_id, prompt))
            if exact is not None:
                return exact
            # The CLI may wrap the prompt (e.g. reminders in the same block): the
            # longest prompt this session launched that the message contains.
            candidates = [
                (len(sent), name)
                for (session, sent), name in self._launched.items()
                if session == request.session_id and sent and sent in prompt
            ]
        return max(candidates)[1] if candidates else None

    def _from_rule(
        self, rule: Rule, request: ParsedRequest, agent: str | None, place: int | None
    ) -> Reply:
        index = request.assistant_turns
        turns = self._turns_of(rule, request, agent, place)
        if index >= len(turns):
            if not rule.repeat_last:
                text = f"stub: rule {rule.name!r} has no turn {index + 1} (it scripts {len(turns)})"
                text += _past_the_script(request)
                return Reply("exhausted", rule.name, index + 1, agent, blocks=[_text_block(text)])
            index = len(turns) - 1
        turn = turns[index]
        if turn.fault is not None and self._fault_due(rule, request, agent, index, turn.fault):
            return Reply("fault", rule.name, index + 1, agent, delay=turn.delay, fault=turn.fault)
        return self._render(rule, turn, index, request, agent)

    def _turns_of(
        self, rule: Rule, request: ParsedRequest, agent: str | None, place: int | None
    ) -> tuple[Turn, ...]:
        """The rule's turns; with `variants`, the one this conversation was given: the
        next after the rule's last new conversation in the same unit, starting at the
        unit's place in the plan. So a split of the plan into shards, each with its own
        stub, answers every unit as the whole run does. Not told a place (a stub
        served alone), each new conversation gets the next variant."""
        if not rule.variants:
            return rule.turns
        key = (request.session_id, agent or "", rule.name)
        with self._lock:
            if key not in self._variant:
                before = sum(
                    1 for k, (_, p) in self._variant.items() if k[2] == rule.name and p == place
                )
                self._variant[key] = ((place or 0) + before, place)
            chosen = self._variant[key][0]
        return rule.variants[chosen % len(rule.variants)]

    def _fault_due(
        self, rule: Rule, request: ParsedRequest, agent: str | None, index: int, fault: Fault
    ) -> bool:
        if fault.times is None:
            return True
        session = request.session_id if fault.scope == "session" else ""
        key = (session, agent or "", rule.name, index)
        with self._lock:
            count = self._served.get(key, 0)
            self._served[key] = count + 1
        return count < fault.times

    def _render(
        self, rule: Rule, turn: Turn, index: int, request: ParsedRequest, agent: str | None
    ) -> Reply:
        values = _template_values(request, index)
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append(_text_block(fill(turn.text, values)))
        for call in turn.tools:
            blocks.append(self._tool_block(call, values, request))
        if turn.fault is not None and not blocks:
            # A fault with `times` whose failures are used up, and nothing else scripted.
            blocks.append(_text_block(f"stub: rule {rule.name!r} turn {index + 1} recovered"))
        has_tools = any(block["type"] == "tool_use" for block in blocks)
        stop_reason = turn.stop_reason or ("tool_use" if has_tools else "end_turn")
        return Reply(
            "turn",
            rule.name,
            index + 1,
            agent,
            blocks=blocks,
            stop_reason=stop_reason,
            usage=turn.usage,
            delay=turn.delay,
        )

    def _tool_block(
        self, call: ToolCall, values: Mapping[str, str], request: ParsedRequest
    ) -> dict[str, Any]:
        tool_input = fill_data(call.input, values)
        for key in call.path_keys:
            tool_input[key] = _absolute(str(tool_input[key]), request.cwd)
        if call.name == "Agent" and isinstance(tool_input.get("prompt"), str):
            name = tool_input.get("subagent_type")
            if isinstance(name, str):
                with self._lock:
                    self._launched[(request.session_id, tool_input["prompt"].strip())] = name
        return {
            "type": "tool_use",
            "id": f"toolu_stub_{next(self._tool_ids):06d}",
            "name": call.name,
            "input": tool_input,
        }


def _past_the_script(request: ParsedRequest) -> str:
    """Why the CLI asked for a turn the script does not have, when a hook made it."""
    if request.hook_feedback is None:
        return ""
    event, said = request.hook_feedback
    said = " ".join(said.split())
    said = said if len(said) <= 60 else said[:59] + "…"
    return (
        f": the CLI went on past the script's last turn because the plugin's {event} hook "
        f"refused to let the turn end and fed back {said!r} (script the turns it asks for, "
        "or repeat_last: true)"
    )


def _fits(match: RequestMatch, request: ParsedRequest, agent: str | None) -> bool:
    checks = (
        match.command is None or request.command == match.command,
        match.agent is None or agent == match.agent,
        match.prompt_contains is None or match.prompt_contains in request.prompt,
        match.system_contains is None or match.system_contains in request.system,
        match.context_contains is None or match.context_contains in request.context,
        match.context_lacks is None or match.context_lacks not in request.context,
        match.model is None or request.model == match.model,
        match.subagent is None or request.subagent == match.subagent,
    )
    return all(checks)


def _template_values(request: ParsedRequest, index: int) -> dict[str, str]:
    words = request.args.split()
    values = {
        "cwd": request.cwd or "",
        "args": request.args,
        "prompt": request.prompt,
        "turn": str(index + 1),
        "model": request.model,
    }
    for position in range(1, 10):
        values[f"arg{position}"] = words[position - 1] if position <= len(words) else ""
    return values


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace the known `{name}` placeholders; leave every other brace alone."""
    return _PLACEHOLDER.sub(lambda found: values[found.group(1)], text)


def fill_data(data: Any, values: Mapping[str, str]) -> Any:
    """`fill` applied to every string inside JSON-like data (a fresh copy)."""
    if isinstance(data, str):
        return fill(data, values)
    if isinstance(data, dict):
        return {key: fill_data(value, values) for key, value in data.items()}
    if isinstance(data, list):
        return [fill_data(item, values) for item in data]
    return data


def _absolute(path: str, cwd: str | None) -> str:
    if os.path.isabs(path) or cwd is None:
        return path
    return os.path.normpath(os.path.join(cwd, path))


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _unmatched_text(request: ParsedRequest, agent: str | None) -> str:
    head = " ".join(_COMMAND_TAGS.sub(" ", request.prompt).split())[:80]
    text = (
        f"stub: no rule matched this request (command={request.command!r}, "
        f"agent={agent!r}, subagent={request.subagent}, prompt={head!r})"
    )
    if request.command is None and head.startswith("/"):
        # Wiring mistake worth naming: the CLI did not expand this slash command.
        text += "; the CLI did not expand this slash command (plugin commands are /PLUGIN:cmd)"
    return text


def _nonessential(request: ParsedRequest) -> Reply:
    schema = request.output_format.get("schema") if request.output_format else None
    text = json.dumps(example_for(schema if isinstance(schema, Mapping) else {}))
    return Reply("nonessential", NONESSENTIAL_RULE, None, None, blocks=[_text_block(text)])


_SCALAR_EXAMPLES: dict[Any, Any] = {
    "array": [],
    "number": 0,
    "integer": 0,
    "boolean": False,
    "null": None,
}


def example_for(schema: Mapping[str, Any]) -> Any:
    """A small value that fits a simple JSON Schema (objects, strings, numbers, lists)."""
    kind = schema.get("type")
    if isinstance(kind, list):  # e.g. ["string", "null"]
        kind = kind[0] if kind else None
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {
            key: example_for(sub if isinstance(sub, Mapping) else {})
            for key, sub in properties.items()
        }
    return _SCALAR_EXAMPLES.get(kind, "stub")
