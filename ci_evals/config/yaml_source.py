"""Read YAML config files keeping every value's line and column.

PyYAML's composed node tree carries positions; `LocatedNode` wraps a node with the
file it came from and the dotted path of the key (`entries[3].stage`), so every
validation error can name file, line, column and field in one line. Loaders
(`stage_map`, `suite`) walk `LocatedNode`s and build frozen records; nothing else
should touch raw YAML.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import yaml

from ci_evals.errors import UserError
from ci_evals.text import display_path

try:  # the C loader is ~10x faster; fall back where libyaml is missing
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on the PyYAML build
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"

_KIND_NAMES = {
    _STR: "a string",
    _INT: "an integer",
    _FLOAT: "a number",
    _BOOL: "a boolean",
    _NULL: "null",
}


def _describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return _KIND_NAMES.get(node.tag, f"a value tagged {node.tag}")


class LocatedNode:
    """One YAML node, where it is, and how to complain about it."""

    def __init__(self, node: yaml.Node, file: str, path: str) -> None:
        self.node = node
        self.file = file
        self.path = path

    @property
    def line(self) -> int:
        return int(self.node.start_mark.line) + 1

    @property
    def column(self) -> int:
        return int(self.node.start_mark.column) + 1

    def error(self, message: str, hint: str | None = None) -> UserError:
        return UserError(
            message,
            file=self.file,
            line=self.line,
            column=self.column,
            field=self.path or None,
            hint=hint,
        )

    def child(self, node: yaml.Node, key: str | int) -> LocatedNode:
        if isinstance(key, int):
            path = f"{self.path}[{key}]"
        else:
            path = f"{self.path}.{key}" if self.path else key
        return LocatedNode(node, self.file, path)

    # -- containers ---------------------------------------------------------

    def mapping(
        self,
        allowed: Collection[str],
        required: Collection[str] = (),
        what: str = "mapping",
    ) -> dict[str, LocatedNode]:
        """The mapping's fields by key. Unknown, duplicate and missing keys are errors."""
        if not isinstance(self.node, yaml.MappingNode):
            raise self.error(f"expected a {what}, got {_describe(self.node)}")
        fields: dict[str, LocatedNode] = {}
        for key_node, value_node in self.node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR:
                raise LocatedNode(key_node, self.file, self.path).error(
                    f"keys must be strings, got {_describe(key_node)}"
                )
            key = str(key_node.value)
            key_field = self.child(key_node, key)
            if key not in allowed:
                known = ", ".join(sorted(allowed))
                raise key_field.error(f"unknown key {key!r}", hint=f"known keys: {known}")
            if key in fields:
                raise key_field.error(f"duplicate key {key!r}")
            fields[key] = self.child(value_node, key)
        missing = [key for key in required if key not in fields]
        if missing:
            raise self.error(f"missing required key {missing[0]!r}")
        return fields

    def sequence(self, allow_empty: bool = True) -> list[LocatedNode]:
        if not isinstance(self.node, yaml.SequenceNode):
            raise self.error(f"expected a list, got {_describe(self.node)}")
        items = [self.child(node, index) for index, node in enumerate(self.node.value)]
        if not items and not allow_empty:
            raise self.error("must not be empty")
        return items

    def is_null(self) -> bool:
        return isinstance(self.node, yaml.ScalarNode) and self.node.tag == _NULL

    # -- scalars ------------------------------------------------------------

    def _scalar(self, tag: str) -> Any:
        if not isinstance(self.node, yaml.ScalarNode) or self.node.tag != tag:
            raise self.error(f"expected {_KIND_NAMES[tag]}, got {_describe(self.node)}")
        return _constructor().construct_object(self.node, deep=True)

    def as_str(self, allow_empty: bool = False) -> str:
        value = str(self._scalar(_STR))
        if not allow_empty and not value.strip():
            raise self.error("must not be empty")
        return value

    def as_int(self, minimum: int | None = None, maximum: int | None = None) -> int:
        value = int(self._scalar(_INT))
        if minimum is not None and value < minimum:
            raise self.error(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.error(f"must be at most {maximum}, got {value}")
        return value

    def as_number(self, minimum: float | None = None) -> float:
        """A finite number: `.nan`, `.inf` and values too big for a float are errors
        (a NaN compares false with every bound, so it would slip through all of them)."""
        if isinstance(self.node, yaml.ScalarNode) and self.node.tag == _INT:
            try:
                value = float(self.as_int())
            except OverflowError:
                raise _non_finite(self) from None
        else:
            value = float(self._scalar(_FLOAT))
        if not math.isfinite(value):
            raise _non_finite(self)
        if minimum is not None and value < minimum:
            raise self.error(f"must be at least {minimum}, got {value}")
        return value

    def as_bool(self) -> bool:
        return bool(self._scalar(_BOOL))

    def as_str_list(self, allow_empty: bool = True) -> list[str]:
        return [item.as_str() for item in self.sequence(allow_empty=allow_empty)]

    def plain(self) -> Any:
        """The node as plain Python data (for free-form values such as a JSON Schema).

        JSON has no NaN or infinity, and every free-form value ends up as JSON
        (a schema, a tool's input) or text, so `.nan`/`.inf` are refused here too.
        """
        _reject_non_finite(self.node, self)
        return _constructor().construct_document(self.node)


class _AnyKey:
    """A `Collection` that admits every key, for `LocatedNode.mapping` of free-form keys
    (criterion ids, environment variable names, file names)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


ANY_KEY = _AnyKey()


def _reject_non_finite(node: yaml.Node, where: LocatedNode) -> None:
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:  # an alias, possibly of its own parent
            continue
        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            stack.extend(value for pair in current.value for value in pair)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif (
            isinstance(current, yaml.ScalarNode)
            and current.tag == _FLOAT
            and not math.isfinite(float(_constructor().construct_object(current)))
        ):
            raise _non_finite(
                LocatedNode(current, where.file, where.path), "; quote it to mean text"
            )


def _non_finite(field: LocatedNode, more: str = "") -> UserError:
    written = str(field.node.value)
    if "inf" in written.lower() or "nan" in written.lower():
        return field.error(
            f"must be a finite number, got {written}",
            hint=f"NaN and infinities are not allowed{more}",
        )
    shown = written if len(written) <= 40 else written[:37] + "..."
    return field.error(f"number too large: {shown}")


def _constructor() -> yaml.constructor.SafeConstructor:
    return yaml.constructor.SafeConstructor()


def load(path: Path, display: str | None = None) -> LocatedNode:
    """Parse one YAML document into a root `LocatedNode`; syntax errors become `UserError`s.

    `display` is the name used in error messages (default: `path` as seen from
    the current folder, `text.display_path`).
    """
    name = display if display is not None else display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("file not found", file=name) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason})", file=name) from None
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", file=name) from None
    return loads(text, name)


def loads(text: str, name: str) -> LocatedNode:
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, text, name) from None
    except yaml.YAMLError as exc:
        raise UserError(f"YAML error: {exc}", file=name) from None
    if not nodes or nodes[0] is None:
        raise UserError("file is empty", file=name, line=1)
    if len(nodes) > 1:
        second = nodes[1]
        raise UserError(
            "expected one YAML document, found several",
            file=name,
            line=second.start_mark.line + 1 if second is not None else None,
        )
    return LocatedNode(nodes[0], name, "")


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, name: str) -> UserError:
    """The parser's complaint at a position inside the file.

    At the end of the input the parser's mark sits on the line after the last
    one (`43:1` for a 42-line file), which no editor can go to: such a mark is
    moved to the end of the last line, and the message says it is the end and
    where the unfinished construct began (the parser's context mark).
    """
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    if mark is None:
        return UserError(f"YAML syntax error: {problem}", file=name)
    line, column = mark.line + 1, mark.column + 1
    lines = text.splitlines()
    end = len(text.rstrip())
    if mark.index >= end and lines:
        # Blank lines at the end are not where the mistake is either.
        while len(lines) > 1 and not lines[-1].strip():
            lines.pop()
        line, column = len(lines), len(lines[-1]) + 1
        if "end of stream" not in problem:
            problem = f"{problem} at the end of the file"
        context = exc.context_mark
        if exc.context and context is not None and context.index < end:
            problem = f"{problem} ({exc.context} at {context.line + 1}:{context.column + 1})"
    return UserError(f"YAML syntax error: {problem}", file=name, line=line, column=column)
