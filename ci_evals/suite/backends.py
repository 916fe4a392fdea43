"""The suite's `agent:` and `sandbox:`: a kind from its registry and the options
that kind's own `load` reads from its block, at their file:line.

```yaml
agent: claude                                  # a bare name: that kind, no options
agent: {kind: loop, max_steps: 20}             # a kind and its options
sandbox: {kind: docker, image: python-mcp, network: true}
```

The older forms still load, each with one warning naming its file:line and
the form to write instead: the options of agent kind K under a top-level `K:`
key (`loop:`), and a sandbox's under top-level keys of their own (`image:`,
`network:`, `OLD_SANDBOX_KEYS`). A bare name is the documented form for a kind
without options, so it never warns. No kind is named here: what a kind
accepts is its own `load`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import yaml

from ci_evals.agents.base import AgentConfig, AgentKind
from ci_evals.agents.registry import DEFAULT_AGENT
from ci_evals.agents.registry import KINDS as AGENT_KINDS
from ci_evals.config.yaml_source import ANY_KEY, Field
from ci_evals.errors import UserError
from ci_evals.registry import Registry
from ci_evals.sandbox.base import SandboxConfig
from ci_evals.sandbox.registry import DEFAULT_SANDBOX, HOST
from ci_evals.sandbox.registry import KINDS as SANDBOX_KINDS

# Top-level keys that once held a sandbox's options (now inside `sandbox:`).
OLD_SANDBOX_KEYS = ("image", "network")
# The top-level keys that once held an agent kind's options: the built-in kinds' names.
OLD_AGENT_KEYS = AGENT_KINDS.builtin
# `sandbox: none` is `local`, as `--isolation none` is.
NO_ISOLATION = "none"

K = TypeVar("K")
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"


def load_agent(keys: Mapping[str, Field], root: Field) -> tuple[AgentConfig, AgentKind]:
    """The suite's agent (default `claude`) and its kind."""
    name_field, block = _split(keys.get("agent"), root, DEFAULT_AGENT, "agent")
    kind = _kind(AGENT_KINDS, name_field)
    for old in OLD_AGENT_KEYS:
        if old not in keys:
            continue
        if old != kind.name:
            raise keys[old].error(
                f"configures agent {old}, but this suite's agent is {kind.name}",
                hint="remove it",
            )
        if block is not None:
            raise keys[old].error(
                f"and agent: {{kind: {old}, ...}} both configure it",
                hint=f"move its keys into agent: and remove {old}:",
            )
        warning = f"{old}: is the old form; write agent: {{kind: {old}, <its keys>}}"
        _warn(_key(root, old) or keys[old], warning)
        block = _block(name_field, list(keys[old].mapping(ANY_KEY).items()), keys[old].path)
    with _at(name_field):
        return AgentConfig(kind.name, kind.load(block)), kind


def load_sandbox(keys: Mapping[str, Field], root: Field, suite_dir: Path) -> SandboxConfig:
    """The suite's sandbox (default `bwrap`; `--isolation` may choose another)."""
    name_field, block = _split(keys.get("sandbox"), root, DEFAULT_SANDBOX, "sandbox")
    if name_field.as_str() == NO_ISOLATION:
        name_field = _scalar(HOST, name_field)
    kind = _kind(SANDBOX_KINDS, name_field)
    old = [(key, keys[key]) for key in OLD_SANDBOX_KEYS if key in keys]
    if old:
        if block is not None:
            raise old[0][1].error(
                "and sandbox: {kind: ...} both configure the sandbox",
                hint=f"move {old[0][0]}: into sandbox:",
            )
        written = ", ".join(f"{key}: {_yaml(field.plain())}" for key, field in old)
        _warn(
            old[0][1],
            f"top-level {written} is the old form; write sandbox: {{kind: {kind.name}, {written}}}",
        )
        block = _block(name_field, old, "")
    with _at(name_field):
        return SandboxConfig(kind.name, kind.load(block, suite_dir))


@contextmanager
def _at(name: Field) -> Iterator[None]:
    """A kind's error that names no place (its block is missing) at the kind's name."""
    try:
        yield
    except UserError as exc:
        if exc.file is not None:
            raise
        raise name.error(exc.message, hint=exc.hint) from None


def _split(value: Field | None, root: Field, default: str, key: str) -> tuple[Field, Field | None]:
    """The field naming the kind and the block of its options (None: none written)."""
    if value is None:
        return _scalar(default, root, key), None
    if isinstance(value.node, yaml.MappingNode):
        kind = value.mapping(ANY_KEY).get("kind")
        if kind is None:
            raise value.error("needs a kind", hint=f"write {key}: {{kind: NAME, ...}}")
        return kind, value
    return value, None


def _kind(registry: Registry[K], name: Field) -> K:
    try:
        return registry.get(name.as_str())
    except UserError as exc:
        raise name.error(exc.message, hint=exc.hint) from None


def _scalar(text: str, where: Field, path: str | None = None) -> Field:
    node = yaml.ScalarNode(_STR, text, where.node.start_mark, where.node.end_mark)
    return Field(node, where.file, where.path if path is None else path)


def _block(kind: Field, items: list[tuple[str, Field]], path: str) -> Field:
    """`{kind: NAME, KEY: VALUE, ...}` made of the nodes where they are written, under
    `path` (so an error in an old-form option still names its own line and key)."""
    pairs = [(yaml.ScalarNode(_STR, "kind", kind.node.start_mark, kind.node.end_mark), kind.node)]
    for key, field in items:
        mark = field.node.start_mark
        pairs.append((yaml.ScalarNode(_STR, key, mark, field.node.end_mark), field.node))
    node = yaml.MappingNode(_MAP, pairs, kind.node.start_mark, kind.node.end_mark)
    return Field(node, kind.file, path)


def _yaml(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _key(root: Field, name: str) -> Field | None:
    """The field of the key `name:` itself in the suite's mapping: a block value
    (`loop:` then its keys below) starts on the next line, the key on its own."""
    if isinstance(root.node, yaml.MappingNode):
        for key, _ in root.node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == name:
                return Field(key, root.file, name)
    return None


def _warn(where: Field, text: str) -> None:
    print(f"ci-evals: warning: {where.file}:{where.line}: {text}", file=sys.stderr, flush=True)
