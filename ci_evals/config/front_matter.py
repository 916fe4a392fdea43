"""The one reader of a Markdown file's YAML front matter, by Claude Code's rule.

Rubrics, the `front_matter` check, `suite draft` (a command's `argument-hint`),
a case's `prompt.md` and its mocks (`plugin_evals:`) all read front matter here,
so a file means the same to each and to Claude Code, whose loader (bundled CLI 2.1.x, the pattern
`^---\\s*\\n([\\s\\S]*?)---\\s*\\n?`) it follows: a leading byte-order mark is
ignored; the file opens with `---` and nothing but whitespace on that line
(CRLF included); the block ends at the first `---` after that, even inside a
line (`a---b`); no closing `---` means no front matter, all of it body (not an
error); an empty block is an empty mapping.

YAML that does not parse is read again as Claude Code reads it again: a
`key: value` line (the key letters, `_` and `-` only) whose plain value holds one
of ``{}[]*&#!|>%@` `` or `: ` gets that value quoted, unless it is a flow list
that parses, and leading tabs become two spaces each (`argument-hint: [pr]
[branch]` is not valid YAML, yet every command uses it), so is a line ending in
`\\r` (left out), not a key with a digit. If it still fails, or is a list or a
scalar, the file has no fields and `problem` says why at `file:line`. A caller decides
whether that is an error (a rubric, our own config) or a finding (an agent's
output); a plugin's file is never refused for it, as Claude Code does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

_BOM = "\ufeff"
# Claude Code's pattern, as it is: the block ends at the first `---`, even mid-line.
_BLOCK = re.compile(r"---\s*\n(.*?)---\s*\n?", re.DOTALL)
# Claude Code's second reading, as the bundled CLI (2.1.337, claude-agent-sdk
# 0.2.190) does it: a line `([a-zA-Z_-]+):\s+(\S.*)` whose value holds one of
# these is quoted; a CRLF line's `\r` is no part of the value (the CLI reads
# `description: a: b\r` as `a: b`; earlier builds left such a line as written).
_QUOTABLE_PAIR = re.compile(r"([a-zA-Z_-]+):\s+(\S[^\r\u2028\u2029]*)\r?")
_NEEDS_QUOTES = re.compile(r"[{}\[\]*&#!|>%@`]|: ")
_LEADING_TABS = re.compile(r"^\t+", re.MULTILINE)


@dataclass(frozen=True)
class ParsedFrontMatter:
    """What a file's front matter says. `present`: a closed block was found."""

    present: bool = False
    fields: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    body_line: int = 1  # the 1-based line the body starts on
    problem: str | None = None  # why `fields` is empty though the block is there
    problem_line: int | None = None  # the 1-based line of the file it points at
    # The block as written (without its `---` lines), and the line it starts on: for a
    # caller that parses it again to point at a field (`config.yaml_source`).
    block: str = ""
    block_line: int = 1

    def where(self, file: str) -> str:
        """`file:line` of the problem (or of the file's first line)."""
        return f"{file}:{self.problem_line or 1}"


def read_front_matter(text: str) -> ParsedFrontMatter:
    """Split `text` into its front matter (by Claude Code's rule) and body."""
    text = text.removeprefix(_BOM)
    match = _BLOCK.match(text)
    if match is None:
        return ParsedFrontMatter(body=text)
    block = match.group(1)
    body = text[match.end() :]
    first_line = text.count("\n", 0, match.start(1)) + 1  # the block's first line
    body_line = text.count("\n", 0, match.end()) + 1
    found = ParsedFrontMatter(
        present=True, body=body, body_line=body_line, block=block, block_line=first_line
    )
    try:
        data = _load(block)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + (mark.line if mark is not None else 0)
        reason = getattr(exc, "problem", None) or "not valid YAML"
        return _with_problem(found, f"front matter is not valid YAML ({reason})", line)
    if data is None:
        return found
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else "a single value"
        return _with_problem(found, f"front matter is {kind}, not a mapping", first_line)
    return replace(found, fields=data)


def _load(block: str) -> object:
    try:
        return yaml.safe_load(block)
    except yaml.YAMLError:
        again = _LEADING_TABS.sub(lambda m: "  " * len(m.group(0)), _quote_values(block))
        if again == block:
            raise
        try:
            return yaml.safe_load(again)
        except yaml.YAMLError:
            pass
        return yaml.safe_load(block)  # raise the error of the file as written


def _quote_values(block: str) -> str:
    """Each line's value quoted where Claude Code's second reading quotes it."""
    lines = []
    for line in block.split("\n"):
        match = _QUOTABLE_PAIR.fullmatch(line)
        if match is not None and _needs_quotes(match.group(2)):
            value = match.group(2).replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'{match.group(1)}: "{value}"')
        else:
            lines.append(line)
    return "\n".join(lines)


def _needs_quotes(value: str) -> bool:
    if value[:1] == value[-1:] and value[:1] in ("'", '"') and len(value) > 1:
        return False  # already quoted
    if value.startswith("[") and value.endswith("]"):
        try:
            if isinstance(yaml.safe_load(value), list):
                return False  # a flow list: `tools: [Read, Write]`
        except yaml.YAMLError:
            pass
    return _NEEDS_QUOTES.search(value) is not None


def _with_problem(found: ParsedFrontMatter, problem: str, line: int) -> ParsedFrontMatter:
    return replace(found, problem=problem, problem_line=line)
