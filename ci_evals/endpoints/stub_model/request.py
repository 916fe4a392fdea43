"""Read what the stub needs out of one Messages API request from the Claude Code CLI.

Observed with the CLI bundled in claude-agent-sdk 0.2.189 (CLI 2.1.332):
- the "Primary working directory" is in an environment block sent as a
  `role: "system"` entry inside `messages` (the top-level `system` is short);
- a slash command arrives expanded in the first user message, tagged
  `<command-name>/PLUGIN:cmd</command-name>` and `<command-args>...</command-args>`;
- the first user message also carries `<system-reminder>` blocks, which we drop;
- a Stop hook that refuses to let the turn end sends its reason back as a user
  message `Stop hook feedback:\n\n<reason>` (up to 9 times in a row);
- the plugin's skills, agents and deferred tools are listed in `<system-reminder>`
  blocks of the user messages (older CLIs: in a `role: "system"` message), so a
  request's `context` -- everything but the conversation's own words -- is where
  a run with the plugin differs from one without it;
- a subagent's request has the agent's markdown body in the top-level `system`,
  `cc_is_subagent=true` in its billing line, an `x-claude-code-agent-id`
  header, and the same `X-Claude-Code-Session-Id` as its parent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_CWD = re.compile(r"Primary working directory: ([^\n]+)")
_COMMAND_NAME = re.compile(r"<command-name>/?([^<]*)</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_HOOK_FEEDBACK = re.compile(r"(?:^|\n)(\w+) hook feedback:\s*(.*)", re.DOTALL)


@dataclass(frozen=True)
class ParsedRequest:
    """The observable facts of one request that rules can match on."""

    model: str
    cwd: str | None
    prompt: str  # the first user message's text, without <system-reminder> blocks
    command: str | None  # "PLUGIN:cmd" when the conversation started with a slash command
    args: str  # the command's arguments ('' without a command)
    system: str  # the top-level system prompt, text blocks joined
    subagent: bool
    # The top-level system prompt, every `role: "system"` message and every
    # `<system-reminder>` block of the user messages, joined: the skill, agent and
    # deferred-tool listings (what a run without the plugin lacks).
    session_id: str
    assistant_turns: int  # assistant messages already in the conversation
    has_tools: bool
    stream: bool  # False for the CLI's non-streaming fallback request
    output_format: Mapping[str, Any] | None  # output_config.format, if any
    # (event, what it said) when the last user message is a hook's feedback: the
    # CLI went on because a hook (Stop) refused to let the turn end.
    hook_feedback: tuple[str, str] | None = None
    context: str = ""

    @property
    def nonessential(self) -> bool:
        """A title-generation style request: no tools, a JSON output format asked for."""
        return not self.has_tools and self.output_format is not None


def parse_request(body: Mapping[str, Any], headers: Mapping[str, str]) -> ParsedRequest:
    """Extract the facts from a decoded request body and its (case-insensitive) headers."""
    messages = [m for m in body.get("messages", []) if isinstance(m, Mapping)]
    system = _text_of(body.get("system"))
    prompt = ""
    for message in messages:
        if message.get("role") == "user":
            prompt = _text_of(message.get("content"), drop_reminders=True)
            break
    command_match = _COMMAND_NAME.search(prompt)
    args_match = _COMMAND_ARGS.search(prompt)
    output_config = body.get("output_config")
    output_format = output_config.get("format") if isinstance(output_config, Mapping) else None
    lowered = {key.lower(): value for key, value in headers.items()}
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    feedback = _HOOK_FEEDBACK.search(_text_of(last_user.get("content"))) if last_user else None
    return ParsedRequest(
        model=str(body.get("model", "")),
        cwd=_find_cwd(messages, system),
        prompt=prompt,
        command=command_match.group(1).strip() if command_match else None,
        args=args_match.group(1).strip() if args_match and command_match else "",
        system=system,
        subagent="x-claude-code-agent-id" in lowered or "cc_is_subagent=true" in system,
        session_id=lowered.get("x-claude-code-session-id", ""),
        assistant_turns=sum(1 for m in messages if m.get("role") == "assistant"),
        has_tools=bool(body.get("tools")),
        stream=body.get("stream") is True,
        output_format=output_format if isinstance(output_format, Mapping) else None,
        hook_feedback=(feedback.group(1), _untagged(feedback.group(2))) if feedback else None,
        context=_context(messages, system),
    )


def _text_of(content: Any, drop_reminders: bool = False) -> str:
    """The text of a message `content` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "text":
            continue
        text = str(block.get("text", ""))
        if drop_reminders and text.lstrip().startswith("<system-reminder>"):
            continue
        parts.append(text)
    return "\n".join(parts)


def _context(messages: list[Mapping[str, Any]], system: str) -> str:
    """What the CLI tells the model besides the conversation (`ParsedRequest.context`)."""
    parts = [system]
    for message in messages:
        role = message.get("role")
        if role == "system":
            parts.append(_text_of(message.get("content")))
        elif role == "user":
            parts += _REMINDER.findall(_text_of(message.get("content")))
    return "\n".join(parts)


def _untagged(text: str) -> str:
    """The feedback without the `<system-reminder>` tags the CLI wraps it in."""
    return re.sub(r"</?system-reminder>", " ", text).strip()


def _find_cwd(messages: list[Mapping[str, Any]], system: str) -> str | None:
    # The environment block is a system-role message; older CLIs put it in `system`.
    candidates = [_text_of(m.get("content")) for m in messages if m.get("role") == "system"]
    candidates.append(system)
    for text in candidates:
        found = _CWD.search(text)
        if found:
            return found.group(1).strip()
    return None
