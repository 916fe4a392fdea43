"""The suite's `agent:` and `sandbox:`: a kind from its registry and the options
that kind's own `load` reads from its block, at their file:line.

```yaml
agent: claude                                  # a bare name: that kind, no options
agent: {kind: loop, max_steps: 20}             # a kind and its options
sandbox: {kind: docker, image: python-mcp, network: true}
sandbox: {kind: bwrap, docker: {image: python-mcp}}   # docker's, for --isolation docker
```

A `sandbox:` block may also hold, under a kind's name, the options of a kind
other than its own: each is loaded (checked by that kind, at its file:line)
and kept for `--isolation K` (`Suite.sandbox_options`). The older forms (a
top-level `loop:`, `image:`, `network:`: `OLD_SANDBOX_KEYS`) still load, each
with one warning naming its file:line and the form to write instead. No kind
is named here: what a kind accepts is its own `load`. docs/suite.md (*Backend
options: the old forms*).
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
from ci_evals.config.yaml_source import ANY_KEY, LocatedNode
from ci_evals.errors import UserError
from ci_evals.registry import Registry
from ci_evals.sandbox.base import SandboxConfig, SandboxKind, SandboxOptions
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


def load_agent(keys: Mapping[str, LocatedNode], root: LocatedNode) -> tuple[AgentConfig, AgentKind]:
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


def load_sandbox(
    keys: Mapping[str, LocatedNode], root: LocatedNode, suite_dir: Path
) -> tuple[SandboxConfig, dict[str, SandboxOptions]]:
    """The suite's sandbox (default `bwrap`), and by kind name the options its
    `sandbox:` gives other kinds (what `--isolation K` uses)."""
    name_field, block = _split(keys.get("sandbox"), root, DEFAULT_SANDBOX, "sandbox")
    if name_field.as_str() == NO_ISOLATION:
        name_field = _scalar(HOST, name_field)
    kind = _kind(SANDBOX_KINDS, name_field)
    others: dict[str, LocatedNode] = {}
    if block is not None:
        block, others = _others(block, kind.name)
    old = [(key, keys[key]) for key in OLD_SANDBOX_KEYS if key in keys]
    if old:
        if block is not None or others:
            raise old[0][1].error(
                "and sandbox: {kind: ...} both configure the sandbox",
                hint=f"move {old[0][0]}: into sandbox:",
            )
        block, others = _old_form(old, kind, name_field)
    with _at(name_field):
        config = SandboxConfig(kind.name, _load_own(kind, block, suite_dir))
    loaded: dict[str, SandboxOptions] = {}
    for name, other in others.items():  # each kind reads its own block
        with _at(other):
            loaded[name] = SANDBOX_KINDS.get(name).load(other, suite_dir)
    return config, loaded


def _old_form(
    old: list[tuple[str, LocatedNode]], kind: SandboxKind, name: LocatedNode
) -> tuple[LocatedNode | None, dict[str, LocatedNode]]:
    """The top-level `image:`/`network:` as the block they meant: the options of the
    kind that runs images, the suite's own or (`--isolation`) another's; one warning."""
    owner = _image_kind(kind)
    written = ", ".join(f"{key}: {_yaml(field.plain())}" for key, field in old)
    new = written if owner is kind else f"{owner.name}: {{{written}}}"
    _warn(
        old[0][1],
        f"top-level {written} is the old form; write sandbox: {{kind: {kind.name}, {new}}}",
    )
    if owner is kind:
        return _block(name, old, ""), {}
    return None, {owner.name: _block(_scalar(owner.name, old[0][1]), old, "")}


def _others(block: LocatedNode, chosen: str) -> tuple[LocatedNode, dict[str, LocatedNode]]:
    """`block` less its keys that name another sandbox kind, and each of those as a
    block of its own (`{kind: NAME, <its keys>}`, at the lines they are written)."""
    assert isinstance(block.node, yaml.MappingNode)  # _split returns only a mapping
    own: list[tuple[yaml.Node, yaml.Node]] = []
    others: dict[str, LocatedNode] = {}
    for key, value in block.node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) and key.tag == _STR else ""
        if not _names_a_kind(name, value):
            own.append((key, value))  # the chosen kind's (its load checks them)
            continue
        field = block.child(value, name)
        at = LocatedNode(key, block.file, field.path)
        if name == chosen:
            raise at.error(
                f"names the suite's own kind, whose options sit beside kind: {name}",
                hint=f"write sandbox: {{kind: {name}, <its keys>}}",
            )
        if name in others:
            raise at.error(f"duplicate key {name!r}")
        field.mapping(ANY_KEY, what=f"mapping (sandbox {name}'s options)")
        assert isinstance(value, yaml.MappingNode)  # as `mapping` checked
        others[name] = _with_kind(_scalar(name, at), value.value, field.path)
    node = yaml.MappingNode(_MAP, own, block.node.start_mark, block.node.end_mark)
    return LocatedNode(node, block.file, block.path), others


def _names_a_kind(key: str, value: yaml.Node) -> bool:
    """A built-in kind's name, or a mapping under a name a package registers (entry
    points are read only then: a kind's own scalar options never cost a lookup)."""
    if key in SANDBOX_KINDS.builtin:
        return True
    return key not in ("", "kind") and isinstance(value, yaml.MappingNode) and key in SANDBOX_KINDS


def _load_own(kind: SandboxKind, block: LocatedNode | None, suite_dir: Path) -> SandboxOptions:
    """`kind`'s options from its block. A mapping under a key it does not know is
    likely another kind's options under a misspelt name: the error says both."""
    try:
        return kind.load(block, suite_dir)
    except UserError as exc:
        if block is None or not exc.message.startswith("unknown key"):
            raise
        assert isinstance(block.node, yaml.MappingNode)
        for key, value in block.node.value:
            at = (key.start_mark.line + 1, key.start_mark.column + 1)
            if isinstance(value, yaml.MappingNode) and at == (exc.line, exc.column):
                exc.message += f": neither an option of sandbox {kind.name} nor a sandbox kind"
                exc.hint = f"{exc.hint}; sandbox kinds: {', '.join(SANDBOX_KINDS.names())}"
        raise


def _image_kind(chosen: SandboxKind) -> SandboxKind:
    """The kind a top-level `image:` (the old form) configures: the one that runs images."""
    if chosen.runs_images:
        return chosen
    # Not the host's own kind, which runs no image (and is slower to import).
    for name in (name for name in SANDBOX_KINDS.builtin if name != HOST):
        if SANDBOX_KINDS.get(name).runs_images:
            return SANDBOX_KINDS.get(name)
    raise AssertionError("no built-in sandbox kind runs images")


@contextmanager
def _at(name: LocatedNode) -> Iterator[None]:
    """A kind's error that names no place (its block is missing) at the kind's name."""
    try:
        yield
    except UserError as exc:
        if exc.file is not None:
            raise
        raise name.error(exc.message, hint=exc.hint) from None


def _split(
    value: LocatedNode | None, root: LocatedNode, default: str, key: str
) -> tuple[LocatedNode, LocatedNode | None]:
    """The field naming the kind and the block of its options (None: none written)."""
    if value is None:
        return _scalar(default, root, key), None
    if isinstance(value.node, yaml.MappingNode):
        kind = value.mapping(ANY_KEY).get("kind")
        if kind is None:
            raise value.error("needs a kind", hint=f"write {key}: {{kind: NAME, ...}}")
        return kind, value
    return value, None


def _kind(registry: Registry[K], name: LocatedNode) -> K:
    try:
        return registry.get(name.as_str())
    except UserError as exc:
        raise name.error(exc.message, hint=exc.hint) from None


def _scalar(text: str, where: LocatedNode, path: str | None = None) -> LocatedNode:
    node = yaml.ScalarNode(_STR, text, where.node.start_mark, where.node.end_mark)
    return LocatedNode(node, where.file, where.path if path is None else path)


def _block(kind: LocatedNode, items: list[tuple[str, LocatedNode]], path: str) -> LocatedNode:
    """`{kind: NAME, KEY: VALUE, ...}` made of the nodes where they are written, under
    `path` (so an error in an old-form option still names its own line and key)."""
    pairs: list[tuple[yaml.Node, yaml.Node]] = []
    for key, field in items:
        mark = field.node.start_mark
        pairs.append((yaml.ScalarNode(_STR, key, mark, field.node.end_mark), field.node))
    return _with_kind(kind, pairs, path)


def _with_kind(
    kind: LocatedNode, pairs: list[tuple[yaml.Node, yaml.Node]], path: str
) -> LocatedNode:
    """The mapping of `pairs` led by `kind: NAME`, as a kind's `load` reads its block."""
    key = yaml.ScalarNode(_STR, "kind", kind.node.start_mark, kind.node.end_mark)
    node = yaml.MappingNode(
        _MAP, [(key, kind.node), *pairs], kind.node.start_mark, kind.node.end_mark
    )
    return LocatedNode(node, kind.file, path)


def _yaml(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _key(root: LocatedNode, name: str) -> LocatedNode | None:
    """The field of the key `name:` itself in the suite's mapping: a block value
    (`loop:` then its keys below) starts on the next line, the key on its own."""
    if isinstance(root.node, yaml.MappingNode):
        for key, _ in root.node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == name:
                return LocatedNode(key, root.file, name)
    return None


def _warn(where: LocatedNode, text: str) -> None:
    print(f"ci-evals: warning: {where.file}:{where.line}: {text}", file=sys.stderr, flush=True)
