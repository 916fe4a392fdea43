"""A case's MCP mocks served inside the sandbox in place of the plugin's real servers.

For a case unit (`plugin_evals:`), before anything runs (`serve_mocks`, called
by `create_workspace`, so the change is part of the plugin copy as made), the
plugin copy's MCP declarations are replaced by one `.mcp.json` holding only the
mocked servers, under their own keys, each the stand-in `mock_server.py`: Claude
Code registers them as the plugin's, so the model sees the CLI's tool names; a
server with no mock is not started, and a mock folder the plugin does not
declare is a standalone server (`StageRequest.mcp_servers`). Each stand-in's spec
and the server script go to `<parent>/mocks/spec/` (mounted read-only), its call
log to `<parent>/mocks/log/`.

After the stage the runner reads the log back (`read_calls`) as what it is:
text the agent could have written. Bounded, line by line, each record checked
for shape and this run's nonce; what is kept goes to `mock-calls.jsonl` beside
the stage, new agent answers to `mock-recordings/` with the CLI's `ADOPT.txt`.
docs/plugin-evals.md (*MCP mocks*).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ci_evals.agents import StageRequest
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.checkpoint import FolderCheckpoint
from ci_evals.fs.walk import walk
from ci_evals.grading.kinds.plugin_eval import ABORT_MARK, MOCKS_FILE
from ci_evals.suite.plugin_eval_mocks import (
    MAX_RECORDING_BYTES,
    REPLAY_DIR,
    MockResponder,
    MockServer,
    declared_servers,
    registered_name,
    segment,
    tool_name,
)
from ci_evals.text import display_path
from ci_evals.workspace.mock_server import unforgeable, violation

MOCKS_PARENT = "mocks"  # under the workspace's parent folder
CALLS_FILE = "mock-calls.jsonl"  # beside the stage: the stand-ins' records, as read back
RECORDINGS_DIR = "mock-recordings"  # beside the stage: new agent answers to adopt
ADOPT_FILE = "ADOPT.txt"
AGENT_CALLS_PER_TURN = 4  # the CLI's budget: 4 x max_turns agent-answered calls a run
AGENT_MAX_TOKENS = 4096
MAX_LOG_BYTES = 8 << 20  # more than this in the log: the run's mock records are not trusted
MAX_FIELD = 16384 + 64  # a logged input or output as the stand-in cuts it, with its mark
MAX_ANSWER = 49152 + 64
_SCRIPT = Path(__file__).with_name("mock_server.py")
_FILE_CAP = 1 << 20
_FILES_CAP = 16 << 20


@dataclass(frozen=True)
class ServedMocks:
    """What `serve_mocks` set up for one case unit's run."""

    spec_dir: Path  # read-only in the sandbox
    log_dir: Path  # writable in the sandbox: the call log
    nonce: str
    # The mocked tools' names as the model calls them -> (server folder, tool, responder kind).
    tools: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    standalone: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # --mcp-config
    replay_dirs: Mapping[str, str] = field(default_factory=dict)  # server -> its .replay/<server>
    withheld: tuple[str, ...] = ()  # the plugin's servers with no mock: not started
    agent_budget: int = 0
    judge_model: str = ""  # what answers agent mocks (recorded with each answer)
    # The `expect:` of each mocked tool, by the name the model calls it.
    expects: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def call_log(self) -> Path:
        return self.log_dir / "calls.jsonl"

    def description(self) -> dict[str, Any]:
        """What `grading.kinds.plugin_eval` reads (`MOCKS_FILE`): names and nonce."""
        return {
            "nonce": self.nonce,
            "tools": sorted(self.tools),
            "servers": sorted({server for server, _, _ in self.tools.values()}),
            "withheld": list(self.withheld),
            "agent_budget": self.agent_budget,
        }


def serve_mocks(
    plugin_copy: Path,
    plugin_name: str,
    parent: Path,
    servers: Sequence[MockServer],
    *,
    max_turns: int,
    judge_model: str,
) -> ServedMocks:
    """Replace the plugin copy's MCP servers by `servers`' stand-ins (see the module)."""
    declared = declared_servers(plugin_copy)
    top = parent / MOCKS_PARENT
    spec_dir, log_dir = top / "spec", top / "log"
    spec_dir.mkdir(parents=True)
    log_dir.mkdir()
    log_dir.chmod(0o777)  # the CLI may run as another user in the sandbox
    script = spec_dir / "mock_server.py"
    shutil.copyfile(_SCRIPT, script)
    nonce = secrets.token_hex(6)
    budget = AGENT_CALLS_PER_TURN * max_turns if any(s.agent for s in servers) else 0
    shadows: dict[str, Any] = {}
    standalone: dict[str, Any] = {}
    tools: dict[str, tuple[str, str, str]] = {}
    replay_dirs: dict[str, str] = {}
    expects: dict[str, Mapping[str, Any]] = {}
    for index, server in enumerate(servers):
        registered = registered_name(plugin_name, server.name, list(declared))
        files = spec_dir / f"files-{index}"
        spec = _spec(server, registered, nonce, log_dir, files, judge_model, budget)
        data = json.dumps(spec, ensure_ascii=False).encode("utf-8")
        path = spec_dir / f"{segment(registered)}.json"
        path.write_bytes(data)
        command = {
            "type": "stdio",
            "command": "python3",
            "args": [str(script), str(path), hashlib.sha256(data).hexdigest()],
        }
        if registered.startswith(f"plugin:{plugin_name}:"):
            shadows[registered.split(":", 2)[2]] = command
        else:
            standalone[registered] = command
        for tool, responder in server.tools.items():
            tools[tool_name(registered, tool)] = (server.name, tool, responder.kind)
            if responder.expect is not None:
                expects[tool_name(registered, tool)] = responder.expect
            if responder.kind == "agent":
                replay_dirs[server.name] = str(responder.replay_dir / server.name)
    _rewrite_declarations(plugin_copy, shadows)
    for folder in (spec_dir, *spec_dir.iterdir()):
        if folder.is_dir():
            folder.chmod(0o755)
    withheld = tuple(sorted(k for k in declared if k not in shadows))
    return ServedMocks(spec_dir, log_dir, nonce, tools, standalone, replay_dirs, withheld, budget)


def _spec(  # noqa: PLR0917 - one private call site
    server: MockServer,
    registered: str,
    nonce: str,
    log_dir: Path,
    files: Path,
    judge_model: str,
    budget: int,
) -> dict[str, Any]:
    listings = [
        {
            "name": tool,
            "description": str(server.listings.get(tool, {}).get("description", "")),
            "inputSchema": {
                "type": "object",
                **dict(server.listings[tool]["inputSchema"] if tool in server.listings
                       else {"additionalProperties": True}),
            },
        }
        for tool in server.tools
    ]  # fmt: skip
    bases: dict[Path, str] = {}
    responders = {}
    for tool, responder in server.tools.items():
        folder = responder.source.parent
        if folder not in bases:
            copy = files / str(len(bases))
            _copy_files(folder, copy)
            bases[folder] = str(copy)
        responders[tool] = _responder(responder, bases[folder], server)
    return {
        "registeredName": registered,
        "server": server.name,
        "nonce": nonce,
        "callLog": str(log_dir / "calls.jsonl"),
        "tools": listings,
        "responders": responders,
        "agent": {"model": judge_model, "budget": budget, "max_tokens": AGENT_MAX_TOKENS},
    }


def _responder(responder: MockResponder, base: str, server: MockServer) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "kind": responder.kind,
        "body": responder.body,
        "isError": responder.is_error,
        "expect": dict(responder.expect) if responder.expect is not None else None,
        "baseDir": base,
    }
    if responder.kind == "agent":
        folder = responder.replay_dir / server.name
        spec["abortWhen"] = responder.abort_when
        spec["mockHash"] = responder.source_hash
        spec["pinned"] = _recordings(folder, server.pinned.get(str(folder), {}))
    return spec


def _recordings(folder: Path, pinned: Mapping[str, str]) -> dict[str, Any]:
    """The adopted recordings still as they were pinned at load (`{verdict, output}`)."""
    found: dict[str, Any] = {}
    for name, digest in pinned.items():
        try:
            with open(folder / name, "rb") as handle:
                data = handle.read(MAX_RECORDING_BYTES + 1)
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() != digest:
            continue
        try:
            document = json.loads(data)
        except ValueError:
            continue
        if not isinstance(document, dict):
            continue
        if _replayable(document):
            found[name] = {"verdict": document["verdict"], "output": document["output"]}
    return found


def _replayable(document: dict[str, Any]) -> bool:
    """The CLI's shape of a recording (`{input, output, verdict, recordedAt, model}`, as
    `save_calls` writes one): a file lacking `input`, `recordedAt` or `model` is not
    replayed by the CLI, which asks the model instead, so ci-evals does not replay it
    either. `input` may hold anything (null too), `model` a string or null."""
    output, verdict = document.get("output"), document.get("verdict")
    model = document.get("model", 0)  # the key is required, its value may be null
    return (
        "input" in document
        and isinstance(output, str)
        and len(output) <= 49152
        and verdict in ("ok", "tool_error", "abort")
        and isinstance(document.get("recordedAt"), str)
        and (model is None or isinstance(model, str))
    )


def _copy_files(source: Path, target: Path) -> None:
    """The regular files of a mock's folder (what `{{file:...}}` reads), no links, bounded."""
    target.mkdir(parents=True)
    total = 0
    for rel, kind, entry in walk(source, skip_vanished=True, skip_unreadable=True):
        if kind != "file":  # a link (to a file or a folder) is neither copied nor entered
            continue
        size = os.path.getsize(entry.path)
        if size > _FILE_CAP or total + size > _FILES_CAP:
            continue
        total += size
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(entry.path, out)


def _rewrite_declarations(plugin_copy: Path, shadows: Mapping[str, Any]) -> None:
    """Only the stand-ins are declared: the manifest loses `mcpServers`, `.mcp.json`
    holds them (or is removed: no server of the plugin starts)."""
    manifest_path = plugin_copy / ".claude-plugin" / "plugin.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if isinstance(manifest, dict) and "mcpServers" in manifest:
        del manifest["mcpServers"]
        _write(manifest_path, json.dumps(manifest, indent=2) + "\n")
    dot = plugin_copy / ".mcp.json"
    if os.path.lexists(dot):
        dot.unlink()
    if shadows:
        dot.write_text(json.dumps({"mcpServers": dict(shadows)}, indent=2) + "\n")


# -- around the stage --------------------------------------------------------------


def mock_request(
    request: StageRequest, served: ServedMocks | None, stage_dir: Path
) -> StageRequest:
    """The stage's request (as it is without `served`) with the stand-ins reachable
    in its sandbox (the spec read-only, the log writable, the standalone ones given
    to the CLI) and the abort mark to stop on; `MOCKS_FILE` written beside the
    stage for the `mock_calls` target."""
    if served is None:
        return request
    if served.tools:
        _write(stage_dir / MOCKS_FILE, json.dumps(served.description(), indent=2) + "\n")
    checkpoint = request.checkpoint
    if isinstance(checkpoint, FolderCheckpoint):
        # A retried attempt starts with an empty log, as the first did.
        checkpoint = FolderCheckpoint((*checkpoint.folders, served.log_dir), checkpoint.store)
    return replace(
        request,
        readonly=(*request.readonly, served.spec_dir),
        writable=(*request.writable, served.log_dir),
        mcp_servers=served.standalone,
        stop=_Stop(served),
        checkpoint=checkpoint,
    )


class _Stop:
    """When a case's run stops, as the CLI's harness stops it: a call of a mocked
    tool whose input breaks its `expect:` (seen as the model makes it, before the
    stand-in answers), or a stand-in's abort answer. The CLI then grades nothing:
    the run scores 0, `aborted: {server, tool, reason}` (`grading.kinds.plugin_eval`)."""

    def __init__(self, served: ServedMocks) -> None:
        self.served = served
        self.mark = f"{ABORT_MARK} {served.nonce}:"

    def __call__(self, record: Mapping[str, Any]) -> bool:
        return self.why(record) is not None

    def why(self, record: Mapping[str, Any]) -> dict[str, str] | None:
        """The abort a trajectory record shows (`{server, tool, reason}`), or None."""
        blocks = record.get("content")
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            name = str(block.get("name"))
            if record.get("type") == "AssistantMessage" and name in self.served.expects:
                broken = violation(block.get("input") or {}, dict(self.served.expects[name]))
                if broken is not None:
                    server, tool, _ = self.served.tools[name]
                    reason = f"the model's call violates expect: {broken}"
                    return {"server": server, "tool": tool, "reason": reason}
            if record.get("type") == "UserMessage" and block.get("is_error") is True:
                content = block.get("content")
                text = content if isinstance(content, str) else ""
                if isinstance(content, list):
                    text = "".join(str(i.get("text", "")) for i in content if isinstance(i, dict))
                if text.startswith(self.mark):
                    return _said(text[len(self.mark) :].strip())
        return None


def _said(text: str) -> dict[str, str]:
    """`<server>/<tool> — <reason>`, as the stand-in writes it (the CLI's `Xf`)."""
    found = re.fullmatch(r"([^/\s]+)/(\S+) \u2014 (.*)", text, re.DOTALL)
    if found is None:
        return {"server": "?", "tool": "?", "reason": text}
    return {"server": found.group(1), "tool": found.group(2), "reason": found.group(3)}


def _aborted(served: ServedMocks, trajectory: Path) -> dict[str, str] | None:
    """The first abort the stage's trajectory (ours, not the agent's) shows."""
    stop = _Stop(served)
    return next(filter(None, map(stop.why, _records(trajectory))), None)


def _records(trajectory: Path) -> Iterator[Mapping[str, Any]]:
    """The trajectory's records (the runner writes it from the SDK's messages)."""
    try:
        with open(trajectory, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(record, dict):
                    yield record
    except OSError:
        return


def _seen(served: ServedMocks, trajectory: Path) -> set[tuple[str, str, str, str]]:
    """(server, tool, input, result text) of every mocked call the model made and was
    answered, as the trajectory shows them: what a recording must match."""
    calls: dict[str, tuple[str, str, str]] = {}
    seen = set()
    for record in _records(trajectory):
        blocks = record.get("content")
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            name = str(block.get("name"))
            if record.get("type") == "AssistantMessage" and name in served.tools:
                server, tool, _ = served.tools[name]
                calls[str(block.get("id"))] = (server, tool, _canonical(block.get("input")))
            call = calls.get(str(block.get("tool_use_id")))
            if record.get("type") == "UserMessage" and call is not None:
                content = block.get("content")
                text = content if isinstance(content, str) else ""
                if isinstance(content, list):
                    text = "".join(str(i.get("text", "")) for i in content if isinstance(i, dict))
                seen.add((*call, text))
    return seen


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ""


def record_calls(served: ServedMocks, stage_dir: Path) -> None:
    """After the stage: the log read back (`read_calls`), saved beside the stage
    (`save_calls`), its counts added to `MOCKS_FILE`; a log that was tampered with
    is said on stderr."""
    read = read_calls(served)
    counts = save_calls(served, read, stage_dir, served.judge_model)
    if served.tools:
        aborted = _aborted(served, stage_dir / "trajectory.jsonl")
        document = dict(served.description(), calls=counts, aborted=aborted)
        _write(stage_dir / MOCKS_FILE, json.dumps(document, indent=2) + "\n")
    for problem in read.problems:
        print(f"ci-evals: warning: {display_path(stage_dir)}: mocks: {problem}", file=sys.stderr)


# -- after the stage -------------------------------------------------------------


@dataclass
class ReadCalls:
    """The call log as read back: its records kept, and what was wrong with it."""

    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


_RECORD_KEYS = {
    "nonce": str, "seq": int, "server": str, "tool": str, "responder": str,
    "verdict": str, "output": str, "ms": int,
}  # fmt: skip


def read_calls(served: ServedMocks) -> ReadCalls:
    """The stand-ins' records of this run: at most `MAX_LOG_BYTES`, read by a
    descriptor opened without following a link, every line checked (shape, sizes,
    this run's nonce, a server and tool that are mocked). A line that fails is
    dropped and counted, never trusted."""
    found = ReadCalls()
    try:
        fd = os.open(served.call_log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return found
    except OSError as exc:
        found.problems.append(f"the call log cannot be opened ({exc.strerror})")
        return found
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            found.problems.append("the call log is not a regular file")
            return found
        data = handle.read(MAX_LOG_BYTES + 1)
    if len(data) > MAX_LOG_BYTES:
        found.problems.append(f"the call log is over {MAX_LOG_BYTES >> 20} MiB: not read")
        return found
    known = {(server, tool) for server, tool, _ in served.tools.values()}
    dropped = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        record = _record(line, served.nonce, known)
        if record is None:
            dropped += 1
        elif "ready" not in record:
            found.records.append(record)
    if dropped:
        found.problems.append(f"{dropped} line(s) of the call log are not the stand-ins' records")
    return found


def _record(line: bytes, nonce: str, known: set[tuple[str, str]]) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("nonce") != nonce:
        return None
    if record.get("ready") is True:
        return record if isinstance(record.get("server"), str) else None
    for key, kind in _RECORD_KEYS.items():
        if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
            return None
    if (record["server"], record["tool"]) not in known or record["verdict"] not in (
        "ok", "tool_error", "abort",
    ) or len(record["output"]) > MAX_FIELD:  # fmt: skip
        return None
    kept: dict[str, Any] = {k: record[k] for k in _RECORD_KEYS}
    kept["responder"] = "agent" if record["responder"] == "agent" else "fixed"
    shown = json.dumps(record.get("input"), ensure_ascii=False)
    kept["input"] = record.get("input") if len(shown) <= MAX_FIELD else shown[:MAX_FIELD]
    if record.get("replay") in ("hit", "miss"):
        kept["replay"] = record["replay"]
    digest, answer = record.get("key"), record.get("answer")
    if isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest):
        kept["key"] = digest
        if isinstance(answer, str) and len(answer) <= MAX_ANSWER:
            kept["answer"] = answer
    return kept


def save_calls(
    served: ServedMocks, read: ReadCalls, stage_dir: Path, judge_model: str
) -> dict[str, Any]:
    """`mock-calls.jsonl` beside the stage, new agent answers under `mock-recordings/`
    with `ADOPT.txt`; the counts (`{total, errors, agent, replay_hits, problems}`)."""
    lines = [
        json.dumps({k: v for k, v in r.items() if k not in ("key", "answer")}, ensure_ascii=False)
        for r in read.records
    ]
    _write(stage_dir / CALLS_FILE, "".join(line + "\n" for line in lines))
    adopt = []
    # The log is the agent's to write: an answer is recorded only as the model got it.
    seen = _seen(served, stage_dir / "trajectory.jsonl")
    mark = f"{ABORT_MARK} {served.nonce}: "
    for record in read.records:
        if record.get("replay") != "miss" or "answer" not in record or "key" not in record:
            continue
        answer, call = record["answer"], (record["server"], record["tool"])
        shown = (
            unforgeable(answer)
            if record["verdict"] != "abort"
            else f"{mark}{record['server']}/{record['tool']} \u2014 {answer}"
        )
        if (*call, _canonical(record["input"]), shown) not in seen:
            read.problems.append(f"{call[0]}/{call[1]}: a logged answer the model never got")
            continue
        if record["verdict"] == "abort" and record["answer"].startswith("mock call budget"):
            continue
        folder = stage_dir / RECORDINGS_DIR / record["server"]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{record['tool']}-{record['key']}.json"
        document = {
            "input": record["input"],
            "output": record["answer"],
            "verdict": record["verdict"],
            "recordedAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
            "model": judge_model,
        }
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if len(text.encode("utf-8")) > MAX_RECORDING_BYTES:
            continue
        _write(path, text)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        into = served.replay_dirs.get(record["server"], f"mocks/{REPLAY_DIR}/{record['server']}")
        adopt.append(
            f"{path.relative_to(stage_dir)} sha256={digest} -> {display_path(Path(into))}/"
        )
    if adopt:
        _write(stage_dir / RECORDINGS_DIR / ADOPT_FILE, "\n".join(adopt) + "\n")
    return {
        "total": len(read.records),
        "errors": sum(1 for r in read.records if r["verdict"] != "ok"),
        "agent": sum(1 for r in read.records if r["responder"] == "agent"),
        "replay_hits": sum(1 for r in read.records if r.get("replay") == "hit"),
        "problems": read.problems,
    }


def _write(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))
