"""A case's MCP mocks (`<eval dir>/mocks/<server>/`), read as `claude plugin eval` reads them.

The CLI's rules (its bundled code, 2.1.337): the `mocks/` folders of the eval
folder, of each case group on the way down and of the case all apply, later
layers overriding earlier ones tool by tool; `<tool>.md` is a fixed responder or
an agent, `_server.md` one agent answering `tools: [...]`, `_tools.json` a saved
`tools/list`, `.replay/<server>/<tool>-<sha256>.json` an adopted agent answer
pinned by its content's SHA-256; what the CLI refuses (a stub body, a bad name,
a key on the wrong kind of file) is refused.

ci-evals adds: one `file:line:col` line per mistake; a folder under `mocks/`
holding a `case.yaml` or `prompt.md` (a case the CLI never runs) is refused; a
link in a mocks folder that leads out of the repository is refused
(`fs.copyable.escaping_link`). Serving them is `workspace.mocks`'. Every rule
and limit: docs/plugin-evals.md (*MCP mocks*).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml

from ci_evals.config.front_matter import read_front_matter
from ci_evals.config.yaml_source import LocatedNode, loads
from ci_evals.errors import UserError
from ci_evals.fs.copyable import escaping_link
from ci_evals.text import display_path

MOCKS_DIR = "mocks"
REPLAY_DIR = ".replay"
SERVER_FILE = "_server.md"
TOOLS_FILE = "_tools.json"
STUB_BODY = "TODO: replace with the canned result this tool should return"
MAX_ENTRIES = 256  # a mocks/ or mocks/<server>/ folder
MAX_FILE_BYTES = 1 << 20
MAX_RECORDINGS = 2000  # pinned per replay folder
MAX_RECORDING_BYTES = 256 << 10
MAX_GUARDS = 32
SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
RECORDING = re.compile(r"[A-Za-z0-9_-]+-[0-9a-f]{64}\.json")
_KEYS = ("type", "expect", "error", "tools", "abort_when")
_DIALECT = (
    'expect: /regex/ guards use a small dialect \u2014 literals, ".", escapes, character '
    "classes, and quantifiers (* + ? {m,n}) on single atoms, with optional ^ and $; no "
    'groups "(\u2026)", alternation "|", backreferences, or lookaround'
)

Kind = Literal["fixed", "agent"]


@dataclass(frozen=True)
class MockResponder:
    """One `<tool>.md` or `_server.md`: what answers a mocked tool's calls."""

    kind: Kind
    body: str  # fixed: the canned result; agent: the author's description of the server
    source: Path  # the file
    source_hash: str  # the CLI's: SHA-256 of its text (CRLF as LF), first 16 hex digits
    expect: Mapping[str, Any] | None = None
    is_error: bool = False  # fixed only: `error: true`
    abort_when: str | None = None  # agent only

    @property
    def replay_dir(self) -> Path:
        """Where this responder's adopted recordings lie: `<its mocks/>/.replay/`."""
        return self.source.parent.parent / REPLAY_DIR


@dataclass(frozen=True)
class MockServer:
    """One `mocks/<server>/` folder, every layer merged."""

    name: str  # the folder's name: the server's key in the plugin's .mcp.json
    tools: Mapping[str, MockResponder]  # tool name -> its responder, sorted by name
    listings: Mapping[str, Mapping[str, Any]]  # `_tools.json` entries by tool name
    # Adopted recordings by replay folder: file name -> its SHA-256 (what was read at load).
    pinned: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def agent(self) -> bool:
        return any(r.kind == "agent" for r in self.tools.values())


def load_mocks(
    case_folder: Path, eval_dir: Path, within: Path, warnings: list[str]
) -> tuple[MockServer, ...]:
    """The mocks that apply to the case in `case_folder`: every `mocks/` folder from
    `eval_dir` down to it, merged as the CLI merges them, sorted by server."""
    layers: list[dict[str, _Layer]] = []
    folder = eval_dir
    chain = [eval_dir]
    for part in case_folder.relative_to(eval_dir).parts:
        folder = folder / part
        chain.append(folder)
    for layer_dir in chain:
        mocks = layer_dir / MOCKS_DIR
        if os.path.lexists(mocks):
            layers.append(_read_layer(mocks, within, warnings))
    servers = []
    for name in sorted({n for layer in layers for n in layer}):
        server = _merge(name, [layer[name] for layer in layers if name in layer], warnings)
        if server is not None:
            servers.append(server)
    return tuple(servers)


@dataclass
class _Layer:
    tools: dict[str, MockResponder]
    server_agent: tuple[MockResponder, tuple[str, ...]] | None
    listings: dict[str, Mapping[str, Any]]


def _read_layer(mocks: Path, within: Path, warnings: list[str]) -> dict[str, _Layer]:
    shown = display_path(mocks)
    found = escaping_link(mocks, within)
    if found is not None:
        raise UserError(f"{display_path(Path(found[0]))} {found[1]}", file=shown)
    if not mocks.is_dir():
        raise UserError("mocks is not a directory", file=shown)
    entries = _entries(mocks)
    servers: dict[str, _Layer] = {}
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        layer = _read_server(Path(entry.path), warnings)
        if layer is not None:
            servers[entry.name] = layer
    return servers


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise UserError(f"cannot list it: {exc.strerror}", file=display_path(folder)) from None
    if len(entries) > MAX_ENTRIES:
        raise UserError(
            f"{len(entries)} entries (cap: {MAX_ENTRIES}, as claude plugin eval's)",
            file=display_path(folder),
        )
    return entries


def _read_server(folder: Path, warnings: list[str]) -> _Layer | None:
    name = folder.name
    shown = display_path(folder)
    if not SEGMENT.fullmatch(name):
        raise UserError(
            "name the folder after the server's key in .mcp.json "
            '(letters, digits, "_" and "-" only)',
            file=shown,
        )
    if "__" in name:
        raise UserError('"__" is the tool-name separator and cannot appear in a mock folder name',
                        file=shown)  # fmt: skip
    entries = _entries(folder)
    if any(e.name in ("case.yaml", "prompt.md") for e in entries):
        raise UserError(
            "a case under mocks/ is never run (claude plugin eval skips mocks/)",
            file=shown,
            hint="move the case out of mocks/",
        )
    layer = _Layer({}, None, {})
    for entry in entries:
        path = Path(entry.path)
        if entry.name == TOOLS_FILE:
            layer.listings = _listings(path)
            continue
        if entry.name.startswith(".") or not entry.name.endswith(".md") or entry.is_dir():
            continue
        stem = entry.name[: -len(".md")]
        if entry.name != SERVER_FILE and (not SEGMENT.fullmatch(stem) or "__" in stem):
            raise UserError(
                'name a responder file after its tool (letters, digits, "_" and "-" '
                'only, no "__"), e.g. list_issues.md',
                file=display_path(path),
            )
        responder, tools, where = _read_responder(path)
        if entry.name == SERVER_FILE:
            if responder.kind != "agent":
                raise where.error(
                    f"only `type: agent` is meaningful in {SERVER_FILE} (one agent answering "
                    "several tools)",
                    hint="put a fixed answer in <tool>.md",
                )
            if not tools:
                raise where.error(
                    f"{SERVER_FILE}: an agent answering several tools needs `tools: [...]`"
                )
            if responder.expect is not None and len(tools) > 1:
                raise where.error(
                    f"`expect:` here would guard all {len(tools)} tools it answers",
                    hint=f"put the guard on the one tool it is meant for as mocks/{name}/<tool>.md",
                )
            layer.server_agent = (responder, tools)
            continue
        layer.tools[stem] = responder
    if not layer.tools and layer.server_agent is None and not layer.listings:
        warnings.append(f"{shown}: no <tool>.md responders \u2014 nothing is mocked for {name}")
        return None
    return layer


def _read_responder(path: Path) -> tuple[MockResponder, tuple[str, ...], LocatedNode]:
    text = _text(path)
    keys, where, body = _front(path, text)
    kind_text = keys["type"].as_str() if "type" in keys else "fixed"
    if kind_text not in ("fixed", "agent"):
        raise keys["type"].error(f'type: must be "fixed" or "agent", got {kind_text!r}')
    kind: Kind = "agent" if kind_text == "agent" else "fixed"
    expect = _expect(keys["expect"]) if "expect" in keys else None
    tools = _tools(keys["tools"], path) if "tools" in keys else ()
    body = re.sub(r"\s+$", "", body.lstrip("\n"))
    source_hash = hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()[:16]
    if kind == "agent":
        if "error" in keys:
            raise keys["error"].error("`error:` applies to fixed responders only")
        if not body or STUB_BODY in body:
            raise where.error(
                "an agent responder needs a description of the server it plays as its body"
                + (" (it still holds the scaffolded placeholder)" if body else "")
            )
        abort = keys["abort_when"].as_str(allow_empty=True) if "abort_when" in keys else None
        responder = MockResponder(
            "agent", body, path, source_hash, expect,
            abort_when=abort if abort is not None and abort.strip() else None,
        )  # fmt: skip
        return responder, tools, where
    if "abort_when" in keys:
        raise keys["abort_when"].error(
            "`abort_when:` needs `type: agent`",
            hint="a fixed responder guards its input with `expect:`",
        )
    if STUB_BODY in body:
        raise where.error(
            "still holds the scaffolded placeholder",
            hint="write the tool's canned answer as the body",
        )
    is_error = keys["error"].as_bool() if "error" in keys else False
    return MockResponder("fixed", body, path, source_hash, expect, is_error=is_error), tools, where


def _front(path: Path, text: str) -> tuple[dict[str, LocatedNode], LocatedNode, str]:
    """The front matter's keys (strict), where to point at the file, and the body."""
    shown = display_path(path)
    found = read_front_matter(text)
    where = loads("{}", shown)
    if not found.present:
        return {}, where, text
    if not found.block.strip():
        return {}, where, found.body
    where = loads("\n" * (found.block_line - 1) + found.block, shown)
    if not isinstance(where.node, yaml.MappingNode):
        raise where.error("frontmatter must be a YAML object")
    return _strict(where), where, found.body


def _tools(value: LocatedNode, path: Path) -> tuple[str, ...]:
    if path.name != SERVER_FILE:
        raise value.error(
            f"`tools:` belongs in {SERVER_FILE} (a <tool>.md answers the tool it is named after)"
        )
    tools = tuple(value.as_str_list())
    for tool in tools:
        if not SEGMENT.fullmatch(tool):
            raise value.error(f'tool names may contain only letters, digits, "_" and "-": {tool!r}')
    return tools


def _strict(where: LocatedNode) -> dict[str, LocatedNode]:
    written = [str(k.value) for k, _ in where.node.value if isinstance(k, yaml.ScalarNode)]
    for key in written:
        if key not in _KEYS:
            raise where.mapping(written)[key].error(
                f"unknown key {key!r}", hint=f"keys: {', '.join(_KEYS)}"
            )
    return where.mapping(_KEYS)


def _text(path: Path) -> str:
    shown = display_path(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", file=shown) from None
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"larger than {MAX_FILE_BYTES} bytes", file=shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason})", file=shown) from None


def _listings(path: Path) -> dict[str, Mapping[str, Any]]:
    shown = display_path(path)
    try:
        data: Any = json.loads(_text(path))
    except ValueError as exc:
        raise UserError(f"not valid JSON ({exc})", file=shown) from None
    if isinstance(data, dict) and "result" in data:
        data = data["result"]
    tools = data.get("tools") if isinstance(data, dict) else None
    listings: dict[str, Mapping[str, Any]] = {}
    ok = isinstance(tools, list)
    for tool in tools if isinstance(tools, list) else []:
        name = tool.get("name") if isinstance(tool, dict) else None
        schema = tool.get("inputSchema", {"type": "object"}) if isinstance(tool, dict) else None
        description = tool.get("description", "") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not name or not isinstance(schema, dict):
            ok = False
            break
        if not isinstance(description, str):
            ok = False
            break
        listings[name] = MappingProxyType(
            {"name": name, "description": description, "inputSchema": schema}
        )
    if not ok:
        raise UserError(
            'expected a saved tools/list response ({"tools": [{"name", "description", '
            '"inputSchema"}]})',
            file=shown,
        )
    return listings


def _expect(value: LocatedNode) -> Mapping[str, Any]:
    data = value.plain()
    if not isinstance(data, dict):
        raise value.error("expect: a mapping of argument names to allowed values")
    problems = _expect_problems(data)
    if problems:
        raise value.error(problems[0])
    return MappingProxyType(data)


def _count(guards: Mapping[str, Any]) -> int:
    total = 0
    for item in guards.values():
        total += _count(item) if isinstance(item, dict) else 1
    return total


def _expect_problems(guards: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The CLI's checks of an `expect:` (its `pYi`): at most 32 guards; no empty list;
    a `/regex/flags` guard in its small dialect, flags `i` and `s` only."""
    problems: list[str] = []
    if not prefix and _count(guards) > MAX_GUARDS:
        return [f"expect: more than the {MAX_GUARDS} guards one responder may carry"]
    for key, item in guards.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(item, list):
            if not item:
                problems.append(
                    f"expect.{name}: an empty list of allowed values can never be satisfied"
                )
            elif any(isinstance(v, (dict, list)) or v is None for v in item):
                problems.append(f"expect.{name}: a list holds plain values only")
            continue
        if isinstance(item, dict):
            problems.extend(_expect_problems(item, name))
            continue
        if item is None:
            problems.append(f"expect.{name}: a value is required")
            continue
        text = str(item) if not isinstance(item, bool) else ("true" if item else "false")
        regex = re.fullmatch(r"/(.+)/([a-z]*)", text, re.DOTALL)
        if regex is not None:
            if set(regex.group(2)) - {"i", "s"}:
                problems.append(
                    f"expect.{name}: {text} \u2014 only the i and s flags are supported"
                )
            elif (problem := _dialect_problem(regex.group(1))) is not None:
                problems.append(f"expect.{name}: {text} \u2014 {problem}")
    return problems


def _dialect_problem(pattern: str) -> str | None:
    """What the CLI's `expect:` regex dialect refuses in `pattern`, or None."""
    i = 0
    atom = False
    while i < len(pattern):
        c = pattern[i]
        if c in "()|" or (c == "^" and i != 0) or (c == "$" and i != len(pattern) - 1):
            return _DIALECT
        if c in {"\\", "["}:
            step, problem = _escape(pattern, i) if c == "\\" else _class(pattern, i)
            if problem is not None:
                return problem
            atom = c == "[" or pattern[i + 1] not in "bB"
            i += step
            continue
        if c in "*+?" and not atom and not (c == "?" and i > 0 and pattern[i - 1] in "*+?}"):
            return "a quantifier must follow a single character, escape, or class"
        atom = c not in "*+?^$"
        i += 1
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regular expression ({exc})"
    return None


def _escape(pattern: str, i: int) -> tuple[int, str | None]:
    if i + 1 >= len(pattern):
        return 1, "pattern ends with a lone backslash"
    return 2, _DIALECT if pattern[i + 1] in "123456789k" else None


def _class(pattern: str, i: int) -> tuple[int, str | None]:
    j = i + 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    if j >= len(pattern):
        return 1, "unterminated character class"
    return j + 1 - i, None


def _merge(name: str, layers: Sequence[_Layer], warnings: list[str]) -> MockServer | None:
    """The CLI's merge (its `Ou`): the deepest `_server.md` agent answers its tools,
    then every layer's `<tool>.md` in order, later ones winning."""
    agent = next((layer.server_agent for layer in reversed(layers) if layer.server_agent), None)
    tools: dict[str, MockResponder] = {}
    if agent is not None:
        for tool in agent[1]:
            tools[tool] = agent[0]
    for layer in layers:
        tools.update(layer.tools)
    if not tools:
        warnings.append(
            f"mocks/{name}/ has no <tool>.md responders in any layer \u2014 nothing is mocked "
            f"for {name}"
        )
        return None
    listings: dict[str, Mapping[str, Any]] = {}
    for layer in layers:
        listings.update(layer.listings)
    pinned: dict[str, Mapping[str, str]] = {}
    for responder in tools.values():
        if responder.kind != "agent":
            continue
        folder = responder.replay_dir / name
        if str(folder) not in pinned:
            pinned[str(folder)] = MappingProxyType(_pin(folder, warnings))
    return MockServer(
        name,
        MappingProxyType(dict(sorted(tools.items()))),
        MappingProxyType(listings),
        MappingProxyType(pinned),
    )


def _pin(folder: Path, warnings: list[str]) -> dict[str, str]:
    """Each adopted recording's SHA-256 as read now (a file changed later is not replayed)."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if RECORDING.fullmatch(e.name))
    except OSError:
        return {}
    if len(names) > MAX_RECORDINGS:
        warnings.append(
            f"{display_path(folder)} holds {len(names)} recordings; only the first "
            f"{MAX_RECORDINGS} are pinned for replay"
        )
    pinned: dict[str, str] = {}
    for name in names[:MAX_RECORDINGS]:
        path = folder / name
        try:
            if path.is_symlink() or not path.is_file():
                continue
            with open(path, "rb") as handle:
                data = handle.read(MAX_RECORDING_BYTES + 1)
        except OSError:
            continue
        if len(data) <= MAX_RECORDING_BYTES:
            pinned[name] = hashlib.sha256(data).hexdigest()
    return pinned


def mocked_tool_names(
    plugin: str, servers: Sequence[MockServer], declared: Sequence[str]
) -> list[str]:
    """The names the model calls a case's mocked tools by, as the CLI mints them:
    `mcp__plugin_<plugin>_<server>__<tool>` for a server the plugin declares
    (in `declared`), `mcp__<server>__<tool>` for a standalone one."""
    names: list[str] = []
    for server in servers:
        registered = registered_name(plugin, server.name, declared)
        names.extend(tool_name(registered, tool) for tool in server.tools)
    return names


def case_mocked_tools(
    plugin_dir: Path, plugin_name: str, servers: Sequence[MockServer]
) -> list[str]:
    """A case's mocked tools by the names the model calls them (`Case.mocks`, the
    plugin's folder and name): what an operator's tool grant grants with no word,
    as the CLI grants mocked tools automatically."""
    return mocked_tool_names(plugin_name, servers, list(declared_servers(plugin_dir)))


def registered_name(plugin: str, server: str, declared: Sequence[str]) -> str:
    """The MCP server name Claude Code registers a mock under: the plugin's own
    `plugin:<plugin>:<server>` when the plugin declares `server`, else `server`."""
    for name in declared:
        if segment(f"plugin:{plugin}:{name}") == server or segment(name) == server:
            return f"plugin:{plugin}:{name}"
    return server


def segment(name: str) -> str:
    """A server name as a tool-name segment (Claude Code's normalisation)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def tool_name(registered: str, tool: str) -> str:
    return f"mcp__{segment(registered)}__{segment(tool)}"


def declared_servers(plugin_dir: Path) -> dict[str, dict[str, Any]]:
    """The MCP servers a plugin folder declares, by key, as Claude Code reads them:
    the manifest's `mcpServers` (an object, or a path or paths of JSON files
    relative to the plugin), else `.mcp.json` (`{"mcpServers": {...}}` or the
    servers themselves). What cannot be read declares nothing."""
    manifest = _json_file(plugin_dir / ".claude-plugin" / "plugin.json")
    named = manifest.get("mcpServers") if isinstance(manifest, dict) else None
    sources: list[Any] = []
    if isinstance(named, dict):
        sources.append(named)
    elif isinstance(named, (str, list)):
        for rel in [named] if isinstance(named, str) else named:
            if isinstance(rel, str) and not os.path.isabs(rel) and ".." not in Path(rel).parts:
                sources.append(_json_file(plugin_dir / rel))
    else:
        sources.append(_json_file(plugin_dir / ".mcp.json"))
    servers: dict[str, dict[str, Any]] = {}
    for source in sources:
        found = source.get("mcpServers") if isinstance(source, dict) else None
        block = found if isinstance(found, dict) else source
        if isinstance(block, dict):
            servers.update({k: v for k, v in block.items() if isinstance(v, dict)})
    return servers


def _json_file(path: Path) -> Any:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, "rb") as handle:
            return json.loads(handle.read(MAX_FILE_BYTES))
    except (OSError, ValueError):
        return None
