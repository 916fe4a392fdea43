"""Prompt and cwd templates: `{name}` placeholders, `{{`/`}}` escapes, nothing else.

`str.format` is not used: it also accepts `{0}`, `{a.b}`, `{a[0]}` and format
specs, which in a prompt are almost always typos, and it reports a missing name
only when it renders. A `Template` knows its placeholder names at load time, so
the suite can check every template against every scenario before a run starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ci_evals.config.yaml_source import LocatedNode
from ci_evals.errors import UserError

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


@dataclass(frozen=True)
class Template:
    """A parsed template. `pieces` alternates literal text and placeholder names."""

    text: str
    pieces: tuple[tuple[bool, str], ...]  # (is_placeholder, literal text or name)
    # Where it was written, for error messages; not part of equality.
    file: str | None = field(default=None, compare=False)
    line: int | None = field(default=None, compare=False)
    column: int | None = field(default=None, compare=False)
    field_name: str | None = field(default=None, compare=False)

    @property
    def names(self) -> frozenset[str]:
        """The placeholder names the template uses."""
        return frozenset(value for is_name, value in self.pieces if is_name)

    def error(self, message: str, hint: str | None = None) -> UserError:
        return UserError(
            message,
            file=self.file,
            line=self.line,
            column=self.column,
            field=self.field_name,
            hint=hint,
        )

    def render(self, values: Mapping[str, str]) -> str:
        """Fill in every placeholder; a missing value is a `UserError` at the template."""
        out: list[str] = []
        for is_name, value in self.pieces:
            if not is_name:
                out.append(value)
            elif value in values:
                out.append(values[value])
            else:
                known = ", ".join(sorted(values)) or "none"
                raise self.error(f"unknown placeholder {{{value}}}", hint=f"known: {known}")
        return "".join(out)


def parse_template(text: str, where: LocatedNode | None = None) -> Template:
    """Parse `text`; a lone brace or a bad placeholder is an error at `where`."""
    pieces: list[tuple[bool, str]] = []
    literal: list[str] = []
    position = 0
    for match in _TOKEN.finditer(text):
        literal.append(text[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            literal.append(token[0])
            continue
        name = match.group(1)
        if name is None:
            problem = f"unmatched {token!r} at character {match.start() + 1}"
            raise _error(where, problem, "write {{ or }} for a literal brace")
        if not NAME.fullmatch(name):
            raise _error(
                where,
                f"bad placeholder {token!r}",
                "placeholders are plain names such as {company}; write {{ for a literal brace",
            )
        if literal:
            pieces.append((False, "".join(literal)))
            literal = []
        pieces.append((True, name))
    literal.append(text[position:])
    if "".join(literal):
        pieces.append((False, "".join(literal)))
    if where is None:
        return Template(text, tuple(pieces))
    return Template(
        text,
        tuple(pieces),
        file=where.file,
        line=where.line,
        column=where.column,
        field_name=where.path or None,
    )


def _error(where: LocatedNode | None, message: str, hint: str) -> UserError:
    if where is None:
        return UserError(message, hint=hint)
    return where.error(message, hint=hint)
