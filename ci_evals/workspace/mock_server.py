"""An MCP stdio server standing in for one mocked server of a `claude plugin eval` case.

Run inside the sandbox by the agent's CLI, with the sandbox's `python3`, as
`python3 mock_server.py SPEC SHA256`: SPEC is the JSON `workspace.mocks` wrote
into a folder the sandbox mounts read-only, SHA256 its digest (a spec that
does not match is refused). Standard library only, Python 3.8+: it is copied
into that folder, never imported from ci-evals there.

It answers as the CLI's own stand-in (`--eval-mock-server`, 2.1.337) does:
`tools/list` from the spec's listings; `tools/call`, one at a time, `expect:`
checked first (a violation is an abort answer), then a fixed responder's body
filled in, an agent responder's model answer (the CLI's system prompt word for
word), or an adopted `.replay/` recording, within the spec's budget of agent
calls. One JSON line per call goes to the spec's call log, the only file it
writes, which the host reads back as untrusted (`workspace.mocks.read_calls`).
It holds no key: an agent responder's request goes to the endpoint the CLI is
given. docs/plugin-evals.md (*MCP mocks*).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not at run time: the sandbox's Python may be 3.8
    from typing import TypeAlias

    Answer: TypeAlias = tuple[str, str, str, Any]  # (responder kind, verdict, text, replay)

ABORT_MARK = "eval aborted by mock"
AGENT_FAILED = "mock agent responder failed"
ERROR_PREFIX = "ERROR:"
ABORT_PREFIX = "ABORT:"
MAX_LOGGED = 16384  # characters of an input or output kept in the call log
MAX_AGENT_OUTPUT = 49152
MAX_INPUT_SHOWN = 16384
MAX_HISTORY = 40
MAX_HISTORY_CHARS = 240000
MAX_FILE = 1 << 20
_PLACEHOLDER = re.compile(
    r"\{\{\s*(input\.[A-Za-z0-9_.-]+|file:(?:[^{}]|\{input\.[A-Za-z0-9_.-]+\})+?)\s*\}\}"
)
_FILE_SEGMENT = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]+$")
_FORGEABLE = re.compile(
    "^(?:"
    + re.escape(ABORT_MARK)
    + '|MCP server "|MCP error -32000: Connection closed|'
    + re.escape(
        "Plugin eval refused this call because the tool is mocked and its name leads "
        "to the real MCP server "
    )
    + ")"
)


def js(value: Any) -> str:
    """JSON as JavaScript's JSON.stringify writes it (compact, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical(value: Any) -> str:
    """The CLI's canonical form: keys sorted at every depth."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def cut(text: str, limit: int) -> str:
    n = len(text)
    return text if n <= limit else f"{text[:limit]}\u2026 [{n - limit} more characters omitted]"


def unforgeable(text: str) -> str:
    """An answer never reads as the harness's own words (the CLI's `ZIr`)."""
    stripped = text.lstrip()
    return "| " + stripped if _FORGEABLE.match(stripped) else text


def lookup(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, list):
            if not part.isdigit() or int(part) >= len(value):
                return None
            value = value[int(part)]
        elif isinstance(value, dict):
            if part not in value:
                return None
            value = value[part]
        else:
            return None
    return value


# -- expect --------------------------------------------------------------------------


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js(value)
    return value if isinstance(value, str) else None


def _equal(actual: Any, wanted: Any) -> bool:
    text = _scalar(actual)
    return text is not None and text == _scalar(wanted)


def _type_of(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def _shown(value: Any) -> str:
    if value is None:
        return "(missing)"
    text = js(value)
    return text if len(text) <= 80 else text[:77] + "..."


def violation(arguments: Any, expect: dict[str, Any], prefix: str = "") -> str | None:
    """The first guard of `expect` the call breaks, said as the CLI says it, or None."""
    for key, wanted in expect.items():
        path = f"{prefix}.{key}" if prefix else key
        actual = lookup(arguments, path)
        if isinstance(wanted, list):
            if not any(_equal(actual, w) for w in wanted):
                shown = ", ".join(str(_scalar(w)) for w in wanted)
                return f"{path} = {_shown(actual)} is not one of [{shown}]"
            continue
        if isinstance(wanted, dict):
            found = violation(arguments, wanted, path)
            if found is not None:
                return found
            continue
        text = _scalar(wanted)
        regex = re.fullmatch(r"/(.+)/([a-z]*)", text or "", re.DOTALL)
        if regex is not None:
            flags = (re.I if "i" in regex.group(2) else 0) | (re.S if "s" in regex.group(2) else 0)
            subject = _scalar(actual) if not isinstance(actual, (dict, list)) else None
            if subject is None or not re.search(regex.group(1), subject, flags):
                return f"{path} = {_shown(actual)} does not match {text}"
            continue
        if text in ("string", "number", "bool", "boolean", "object", "array"):
            if _type_of(actual) != ("bool" if text == "boolean" else text):
                return f"{path} = {_shown(actual)} is not a {text}"
            continue
        if not _equal(actual, text):
            return f'{path} = {_shown(actual)} is not "{text}"'
    return None


# -- answers ---------------------------------------------------------------------------


def fill(
    body: str, arguments: Any, base_dir: str | None, limit: int | None = None
) -> tuple[str | None, str | None]:
    """`{{input.<field>}}` and `{{file:<name>}}` filled in: (text, None) or (None, reason)."""
    out = []
    at = 0
    problem = None
    for found in _PLACEHOLDER.finditer(body):
        out.append(body[at : found.start()])
        at = found.end()
        name = found.group(1)
        if name.startswith("input."):
            value = lookup(arguments, name[6:])
            text = "" if value is None else value if isinstance(value, str) else js(value)
            out.append(cut(text, limit) if limit is not None else text)
            continue
        rel = name[5:].strip()

        def field(match: re.Match[str], arguments: Any = arguments) -> str:
            nonlocal problem
            value = lookup(arguments, match.group(1))
            text = "" if value is None else str(_scalar(value) or value)
            if not _FILE_SEGMENT.match(text) and problem is None:
                problem = (
                    f"{{input.{match.group(1)}}} = {_shown(value)} is not a plain file-name segment"
                )
            return text

        rel = re.sub(r"\{input\.([A-Za-z0-9_.-]+)\}", field, rel)
        if problem is not None:
            continue
        path = os.path.normpath(os.path.join(base_dir, rel)) if base_dir else ""
        if not base_dir or not path.startswith(os.path.normpath(base_dir) + os.sep):
            problem = problem or f"{{{{file:{rel}}}}} names a path outside the mock's directory"
            continue
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE + 1)
        except OSError:
            problem = problem or f"{{{{file:{rel}}}}}: no such fixture"
            continue
        if len(data) > MAX_FILE:
            problem = problem or f"{{{{file:{rel}}}}}: over the {MAX_FILE}-byte fixture limit"
            continue
        out.append(data.decode("utf-8", "replace"))
    out.append(body[at:])
    if problem is not None:
        return None, problem
    return "".join(out), None


def system_prompt(server: str, abort_when: str | None) -> str:
    parts = [
        f'You are standing in for the MCP server "{server}" inside an automated evaluation of '
        "a coding-agent plugin. Each user turn is one tool call the agent under test just "
        "made; earlier calls this run and your answers to them are listed first as history. "
        "Reply with ONLY the tool's result content, exactly as the real server would return "
        "it (JSON when the server returns JSON) \u2014 no commentary, no markdown fences unless "
        "the real result would contain them. Stay consistent with your earlier answers this run.",
        "To return an ordinary tool ERROR the agent should handle (bad arguments, not found, "
        f'rate limited), reply with a single line starting "{ERROR_PREFIX} " followed by the '
        "error text.",
    ]
    if abort_when is not None and abort_when.strip():
        parts.append(
            "The evaluation author listed conditions under which this run must be STOPPED "
            "because the agent has gone off the rails. If \u2014 and only if \u2014 the current "
            f'call meets one of them, reply with a single line starting "{ABORT_PREFIX} " '
            "followed by a short reason naming the condition. The conditions:\n"
            + abort_when.strip()
        )
    else:
        parts.append(f'Never reply with a line starting "{ABORT_PREFIX}".')
    parts.append("The author's description of the server you are playing follows.")
    return "\n\n".join(parts)


def user_prompt(tool: str, arguments: Any, history: list[dict[str, Any]]) -> str:
    recent = history[-MAX_HISTORY:]
    lines: list[str] = []
    total = 0
    for call in reversed(recent):
        shown = call["input"] if isinstance(call["input"], str) else js(call["input"])
        mark = "" if call["verdict"] == "ok" else f"[{call['verdict']}] "
        line = f"- {call['tool']}({shown}) \u2192 {mark}{call['output']}"
        if total + len(line) > MAX_HISTORY_CHARS:
            break
        lines.insert(0, line)
        total += len(line)
    parts = []
    if lines:
        older = len(history) - len(lines)
        note = f" ({older} older omitted)" if older > 0 else ""
        parts.append(f"Earlier calls this run{note}:\n" + "\n".join(lines))
    parts.append(
        f"Current call: {tool}\nArguments:\n"
        + cut(json.dumps(arguments, ensure_ascii=False, indent=2), MAX_INPUT_SHOWN)
    )
    return "\n\n".join(parts)


def verdict_of(text: str, abort_when: str | None) -> tuple[str, str]:
    if text.startswith(ABORT_PREFIX):
        reason = text[len(ABORT_PREFIX) :].strip() or "abort_when condition met"
        ok = abort_when is not None and abort_when.strip() != ""
        return ("abort" if ok else "tool_error"), reason
    if text.startswith(ERROR_PREFIX):
        return "tool_error", text[len(ERROR_PREFIX) :].strip() or "error"
    return "ok", text


def recording_key(  # noqa: PLR0917 - the CLI's parts, in its order
    server: str,
    tool: str,
    arguments: Any,
    mock_hash: str,
    prompt: str,
    history: list[dict[str, Any]],
) -> str:
    lines = "\n".join(
        js([h["tool"], canonical(h["input"]), h["verdict"], h["output"]]) for h in history
    )
    history_hash = hashlib.sha256(lines.encode("utf-8")).hexdigest()
    prompt_hash = hashlib.sha256(prompt.replace("\r\n", "\n").encode("utf-8")).hexdigest()
    key = " ".join([server, tool, canonical(arguments), mock_hash, prompt_hash, history_hash])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def ask_model(spec: dict[str, Any], system: str, prompt: str) -> tuple[str | None, str | None]:
    """One request to the run's endpoint: (text, None) or (None, why)."""
    base = os.environ.get("ANTHROPIC_BASE_URL", "").rstrip("/")
    if not base.startswith(("http://", "https://")):
        return None, "no model endpoint"
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if os.environ.get("ANTHROPIC_API_KEY"):
        headers["x-api-key"] = os.environ["ANTHROPIC_API_KEY"]
    if os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        headers["authorization"] = "Bearer " + os.environ["ANTHROPIC_AUTH_TOKEN"]
    body = {
        "model": spec["agent"]["model"],
        "max_tokens": spec["agent"]["max_tokens"],
        "system": system,
        "messages": [{"role": "user", "content": prompt}],
    }
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
        base + "/v1/messages", data=js(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310 - http(s) only
            document = json.loads(answer.read(8 << 20))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, f"model_call: {exc}"
    blocks = document.get("content") if isinstance(document, dict) else None
    if not isinstance(blocks, list):
        return None, "model_call: no content"
    text = "".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )
    return text.strip(), None


class Server:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.seq = 0
        self.history: list[dict[str, Any]] = []

    def log(self, record: dict[str, Any]) -> bool:
        record = dict(record, nonce=self.spec["nonce"])
        line = (js(record) + "\n").encode("utf-8")
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            # Never through a link the agent planted, never waiting on a fifo.
            fd = os.open(self.spec["callLog"], flags, 0o600)
        except OSError:
            return False
        try:
            return os.write(fd, line) == len(line)
        except OSError:
            return False
        finally:
            os.close(fd)

    def agent_calls(self) -> int:
        """Agent-answered calls this run, every stand-in's (counted from the shared log)."""
        count = 0
        try:
            with open(self.spec["callLog"], "rb") as handle:
                for line in handle.read(64 << 20).split(b"\n"):
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("responder") == "agent":
                        count += 1
        except OSError:
            pass
        return count

    def answer(self, tool: str, arguments: Any) -> Answer:
        responders = self.spec["responders"]
        responder = responders.get(tool)
        if responder is None:
            return "fixed", "tool_error", f"no mock for {self.spec['server']}/{tool}", None
        if responder.get("expect") is not None:
            broken = violation(arguments, responder["expect"])
            if broken is not None:
                return responder["kind"], "abort", f"input violates expect: {broken}", None
        if responder["kind"] == "fixed":
            text, problem = fill(responder["body"], arguments, responder.get("baseDir"))
            if text is None:
                return "fixed", "tool_error", problem or "cannot fill the body", None
            return "fixed", ("tool_error" if responder["isError"] else "ok"), text, None
        return ("agent", *self.agent(tool, arguments, responder))

    def agent(self, tool: str, arguments: Any, responder: dict[str, Any]) -> tuple[str, str, Any]:
        budget = self.spec["agent"]["budget"]
        if self.agent_calls() + 1 > budget:
            return (
                "abort",
                f"mock call budget exceeded ({budget} agent-answered calls this run)",
                None,
            )
        prompt, problem = fill(
            responder["body"], arguments, responder.get("baseDir"), MAX_INPUT_SHOWN
        )
        server = self.spec["server"]
        key = ""
        if prompt is None:
            verdict, text, replay = "tool_error", problem or "cannot fill the description", "miss"
        else:
            key = recording_key(
                server, tool, arguments, responder["mockHash"], prompt, self.history
            )
            verdict, text, replay = self.respond(tool, arguments, responder, prompt, key)
        # Every answer goes into the history the next calls are shown (and keyed by),
        # the last 40 kept, as the CLI keeps them.
        shown_input = js(arguments)
        self.history.append(
            {
                "tool": tool,
                "input": arguments
                if len(shown_input) <= MAX_LOGGED
                else shown_input[:MAX_LOGGED] + "\u2026",
                "verdict": verdict,
                "output": text if len(text) <= MAX_LOGGED else text[:MAX_LOGGED] + "\u2026",
            }
        )
        del self.history[:-MAX_HISTORY]
        return verdict, text, (replay, key) if key else replay

    def respond(
        self, tool: str, arguments: Any, responder: dict[str, Any], prompt: str, key: str
    ) -> tuple[str, str, str]:
        """The adopted recording of this call (`hit`), else the model's answer (`miss`)."""
        recording = responder.get("pinned", {}).get(f"{tool}-{key}.json")
        verdict, text, replay = "ok", "", "miss"
        server = self.spec["server"]
        if recording is not None:
            verdict, text, replay = recording["verdict"], recording["output"], "hit"
        else:
            system = system_prompt(server, responder.get("abortWhen")) + "\n\n" + prompt
            said, why = ask_model(self.spec, system, user_prompt(tool, arguments, self.history))
            if said is None:
                verdict, text = "tool_error", f"{AGENT_FAILED} ({why})"
            else:
                verdict, text = verdict_of(said, responder.get("abortWhen"))
                text = cut(text, MAX_AGENT_OUTPUT)
        return verdict, text, replay

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        tool = str(params.get("name", ""))
        arguments = params.get("arguments") or {}
        started = time.monotonic()
        kind, verdict, text, replay = self.answer(tool, arguments)
        record = {
            "seq": self.seq,
            "server": self.spec["server"],
            "tool": tool,
            "responder": kind,
            "input": arguments,
            "verdict": verdict,
            "output": text if len(text) <= MAX_LOGGED else text[:MAX_LOGGED] + "\u2026[truncated]",
            "ms": int((time.monotonic() - started) * 1000),
        }
        if isinstance(replay, tuple):
            record["replay"], record["key"] = replay
            if replay[0] == "miss" and not text.startswith(AGENT_FAILED):
                record["answer"] = text  # whole, for the host's recording
        self.seq += 1
        self.log(record)
        if verdict == "abort":
            shown = f"{ABORT_MARK} {self.spec['nonce']}: {self.spec['server']}/{tool} \u2014 {text}"
            return {"content": [{"type": "text", "text": shown}], "isError": True}
        result: dict[str, Any] = {"content": [{"type": "text", "text": unforgeable(text)}]}
        if verdict == "tool_error":
            result["isError"] = True
        return result

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        method = message.get("method")
        if method == "initialize":
            version = (message.get("params") or {}).get("protocolVersion", "2025-06-18")
            return {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": f"eval-mock/{self.spec['server']}", "version": "1"},
            }
        if method == "tools/list":
            return {"tools": self.spec["tools"]}
        if method == "tools/call":
            return self.call(message.get("params") or {})
        if method == "ping":
            return {}
        raise LookupError(method)


def main(argv: list[str]) -> int:
    spec_path, digest = argv[1], argv[2]
    with open(spec_path, "rb") as handle:
        data = handle.read(16 << 20)
    if hashlib.sha256(data).hexdigest() != digest:
        sys.stderr.write("mock stand-in: the spec does not match its digest; refusing it\n")
        return 1
    server = Server(json.loads(data))
    if not server.log({"ready": True, "server": server.spec["server"]}):
        sys.stderr.write("mock stand-in: cannot write the call log; refusing to serve\n")
        return 1
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue  # a notification
        try:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": server.handle(message)}
        except LookupError as exc:
            error = {"code": -32601, "message": f"method not found: {exc}"}
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        sys.stdout.write(js(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
