"""The sub-tests: each one a function of a fresh server session, passing or not, with a reason.

Which ones run depends on the era of the revision checked (`revisions`):
the handshake era starts every session with `initialize` and
`notifications/initialized`; the stateless era sends `_meta` with every
request instead and asks `server/discover`. `stdout-clean` is not here: it is
judged over the stdout of every session (`check`).

A sub-test that waits for "no reply" sends a marker request right after
(`ping`, or `server/discover`) and takes the marker's reply, plus a short
grace, as the end of the wait: a server that answers in order is not made to
cost a whole timeout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ci_evals.mcp import revisions
from ci_evals.mcp.framing import Message
from ci_evals.mcp.schemas import example_arguments, instance_problem, schema_problem
from ci_evals.mcp.session import NoReply, Session, same_id

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

UNKNOWN_TOOL = "ci-evals-no-such-tool"
UNKNOWN_METHOD = "ci-evals/no-such-method"
MALFORMED_LINE = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"'  # cut off: not JSON
_GRACE_S = 0.1  # after the marker's reply, how long an out-of-order answer may take
_SHOWN = 160  # characters of a server's answer quoted in a reason


@dataclass(frozen=True)
class Options:
    revision: str
    timeout_s: float = 10.0  # every wait for a reply
    # Whether a `tools/call` of an unknown tool may be answered with a result
    # carrying `isError: true` (what the TypeScript and Python SDKs do), or
    # must be a JSON-RPC error (the spec's example: -32602).
    unknown_tool_is_error_result: bool = True
    tool: str | None = None  # the tool `tools-call` calls (default: see `tools_call`)
    arguments: dict[str, Any] | None = field(default=None, hash=False)  # default: from its schema
    # Whether the user named the revision (`--protocol`, the grader's `protocol:`):
    # then "does not serve it" fails `serves-revision`; else the check goes on in the
    # revision the server negotiated.
    explicit: bool = False

    @property
    def named_call(self) -> bool:
        """A tool and its arguments were named: the call must succeed (`tools-call-success`)."""
        return self.tool is not None and self.arguments is not None


@dataclass(frozen=True)
class SubTestOutcome:
    passed: bool
    reason: str
    # More sub-tests judged from the same exchange (`tools-call-success`).
    also: tuple[tuple[str, SubTestOutcome], ...] = ()


SubTest = Callable[[Session, Options], SubTestOutcome]


# -- talking to a session in its era -------------------------------------------


def start(session: Session, opts: Options) -> None:
    """Open the session as the era does (nothing to do for a stateless one, nor for a
    session already opened: sub-tests that share one process call it each)."""
    if revisions.is_stateless(opts.revision) or session.started:
        return
    result = _result(
        session.request("initialize", revisions.initialize_params(opts.revision), opts.timeout_s),
        "initialize",
    )
    if not isinstance(result, dict):
        raise NoReply("initialize was not answered with a result object")
    session.notify("notifications/initialized")
    session.started = True


def call(session: Session, opts: Options, method: str, params: dict[str, Any] | None) -> Message:
    """A request in the session's era (stateless: with `_meta`)."""
    if revisions.is_stateless(opts.revision):
        params = {**(params or {}), "_meta": revisions.meta(opts.revision)}
    return session.request(method, params, opts.timeout_s)


def _marker(session: Session, opts: Options) -> int:
    """Send the marker request; its id."""
    request_id = session.new_id()
    method = "server/discover" if revisions.is_stateless(opts.revision) else "ping"
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if revisions.is_stateless(opts.revision):
        body["params"] = {"_meta": revisions.meta(opts.revision)}
    session.send(body)
    return request_id


def _after_marker(
    session: Session,
    opts: Options,
    what: str,
    wanted: Callable[[Message], bool],
    *,
    keeps_serving: bool = False,
) -> Message | None:
    """The first message `wanted` holds for, waiting until the marker is answered (+ grace).

    Raises `NoReply` when neither it nor the marker's reply came, or, with
    `keeps_serving`, when the marker's reply never came after it.
    """
    marker = _marker(session, opts)

    def answered(m: Message) -> bool:
        return m.is_reply and same_id(m.body.get("id"), marker)

    found = session.wait_for(lambda m: wanted(m) or answered(m), opts.timeout_s)
    if found is None:
        raise NoReply(
            session.why_silent(f"no reply to {what} nor to the request after it", opts.timeout_s)
        )
    if not wanted(found):
        return session.wait_for(wanted, _GRACE_S)
    if keeps_serving and session.wait_for(answered, opts.timeout_s) is None:
        raise NoReply(
            session.why_silent(
                f"answered {what}, then no reply to the request after it", opts.timeout_s
            )
        )
    return found


def _result(message: Message, what: str) -> Any:
    if "error" in message.body:
        raise NoReply(f"{what} was answered with an error: {_shown(message.body['error'])}")
    return message.body.get("result")


def _id_in(message: Message, ids: Iterable[object]) -> bool:
    return any(same_id(message.body.get("id"), i) for i in ids)


def _error_code(message: Message) -> object:
    error = message.body.get("error")
    return error.get("code") if isinstance(error, dict) else None


def _shown(value: object) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


# -- the handshake era ---------------------------------------------------------


def initialize(session: Session, opts: Options) -> SubTestOutcome:  # noqa: PLR0911 - one per failure
    """The handshake; records the revision the server answered (`session.negotiated`)."""
    params = revisions.initialize_params(opts.revision)
    sent = f"initialize (protocolVersion {opts.revision})"
    result = _result(session.request("initialize", params, opts.timeout_s), sent)
    if not isinstance(result, dict):
        return SubTestOutcome(False, f"{sent} answered {_shown(result)}, not an object")
    version = result.get("protocolVersion")
    if not isinstance(version, str):
        return SubTestOutcome(False, f"{sent}: no protocolVersion string in {_shown(result)}")
    if version not in revisions.HANDSHAKE:
        return SubTestOutcome(
            False,
            f"{sent} answered protocolVersion {version!r}, which is no handshake revision "
            f"({', '.join(revisions.HANDSHAKE)})",
        )
    session.negotiated = version
    session.notify("notifications/initialized")
    session.started = True
    if not isinstance(result.get("capabilities"), dict):
        return SubTestOutcome(False, f"{sent}: no capabilities object in {_shown(result)}")
    info = result.get("serverInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return SubTestOutcome(False, f"{sent}: no serverInfo with a name in {_shown(result)}")
    if not isinstance(info.get("version"), str):
        return SubTestOutcome(False, f"{sent}: serverInfo has no version string: {_shown(info)}")
    said = f"protocolVersion {version}, serverInfo {info['name']} {info['version']}".rstrip()
    if version != opts.revision:
        said += f" (asked for {opts.revision}; the server negotiated {version})"
    return SubTestOutcome(True, said)


def version_negotiation(session: Session, opts: Options) -> SubTestOutcome:
    if revisions.is_stateless(opts.revision):
        return _stateless_version(session, opts)
    params = revisions.initialize_params(revisions.UNSERVED)
    answer = session.request("initialize", params, opts.timeout_s)
    if "error" in answer.body:
        return SubTestOutcome(
            False,
            f"asked for {revisions.UNSERVED}, it answered an error "
            f"({_shown(answer.body['error'])}) instead of a version it supports",
        )
    result = answer.body.get("result")
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    if not isinstance(version, str) or not version:
        return SubTestOutcome(
            False, f"asked for {revisions.UNSERVED}, no protocolVersion in {_shown(result)}"
        )
    if version == revisions.UNSERVED:
        return SubTestOutcome(
            False, f"claims to serve {revisions.UNSERVED}, a version no server serves"
        )
    # As a client goes on in the version offered: the session is left as `start` leaves it.
    session.negotiated = version
    session.notify("notifications/initialized")
    session.started = True
    return SubTestOutcome(True, f"asked for {revisions.UNSERVED}, offered {version}")


def initialized_notification(session: Session, opts: Options) -> SubTestOutcome:
    start(session, opts)  # sends notifications/initialized
    return _no_stray_reply(session, opts, "notifications/initialized")


def _no_stray_reply(session: Session, opts: Options, what: str) -> SubTestOutcome:
    stray = _after_marker(
        session, opts, what, lambda m: m.is_reply and not _id_in(m, session.sent_ids)
    )
    if stray is not None:
        return SubTestOutcome(False, f"{what} got a reply: {_shown(stray.body)}")
    return SubTestOutcome(True, f"no reply to {what}")


# -- the stateless era -----------------------------------------------------------


def discover(session: Session, opts: Options) -> SubTestOutcome:
    result = _result(call(session, opts, "server/discover", None), "server/discover")
    if not isinstance(result, dict):
        return SubTestOutcome(False, f"server/discover answered {_shown(result)}, not an object")
    versions = result.get("supportedVersions")
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        return SubTestOutcome(False, f"no supportedVersions list in {_shown(result)}")
    session.supported = tuple(versions)  # `serves-revision` is judged from it
    if not isinstance(result.get("capabilities"), dict):
        return SubTestOutcome(False, f"no capabilities object in {_shown(result)}")
    if result.get("resultType") != "complete":  # every 2026-07-28 result MUST carry one
        return SubTestOutcome(False, f'no "resultType": "complete" in {_shown(result)}')
    meta = result.get("_meta")
    info = meta.get(revisions.SERVER_INFO_KEY) if isinstance(meta, dict) else None
    named = f", serverInfo {info.get('name')}" if isinstance(info, dict) else " (no serverInfo)"
    return SubTestOutcome(True, f"supportedVersions {', '.join(versions)}{named}")


def _stateless_version(session: Session, opts: Options) -> SubTestOutcome:
    """A request for an unserved version, first in the process and again after one it
    serves: a server that judged only the first request, and remembered it, is caught."""
    first = _unserved_request(session, opts, "the first request")
    if first is not None:
        return first
    served = call(session, opts, "tools/list", None)
    if "error" in served.body:
        return SubTestOutcome(
            False,
            f"after refusing {revisions.UNSERVED}, tools/list for {opts.revision} got an "
            f"error: {_shown(served.body['error'])} (each request stands alone)",
        )
    again = _unserved_request(session, opts, f"a request after one for {opts.revision}")
    if again is not None:
        return again
    return SubTestOutcome(
        True,
        f"tools/list for {revisions.UNSERVED} got error {revisions.UNSUPPORTED_VERSION} "
        f"with data.supported, first and after a request for {opts.revision}",
    )


def _unserved_request(session: Session, opts: Options, which: str) -> SubTestOutcome | None:
    """A failing outcome when `tools/list` for an unserved version is not refused right."""
    params = {"_meta": {**revisions.meta(opts.revision), revisions.VERSION_KEY: revisions.UNSERVED}}
    answer = session.request("tools/list", params, opts.timeout_s)
    sent = f"tools/list with _meta protocolVersion {revisions.UNSERVED} ({which})"
    if "error" not in answer.body:
        return SubTestOutcome(False, f"{sent} was served: {_shown(answer.body)}")
    code = _error_code(answer)
    if code != revisions.UNSUPPORTED_VERSION:
        return SubTestOutcome(
            False,
            f"{sent} got error {_shown(answer.body['error'])}, not {revisions.UNSUPPORTED_VERSION}",
        )
    data = answer.body["error"].get("data")
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list) or not supported:
        return SubTestOutcome(
            False, f"{sent} got error {code} without data.supported: {_shown(answer.body['error'])}"
        )
    return None


def meta_required(session: Session, opts: Options) -> SubTestOutcome:
    answer = session.request("tools/list", {}, opts.timeout_s)
    code = _error_code(answer)
    if code == INVALID_PARAMS:
        return SubTestOutcome(True, f"a request without _meta got error {code}")
    return SubTestOutcome(
        False,
        f"tools/list without _meta (a request without _meta) got {_shown(answer.body)}, "
        f"not error {INVALID_PARAMS}",
    )


def notification_no_reply(session: Session, opts: Options) -> SubTestOutcome:
    params = {
        "requestId": UNKNOWN_TOOL,
        "reason": "ci-evals check",
        "_meta": revisions.meta(opts.revision),
    }
    session.notify("notifications/cancelled", params)
    return _no_stray_reply(session, opts, "notifications/cancelled")


# -- both eras -------------------------------------------------------------------


def _tools(session: Session, opts: Options) -> list[Any]:
    result = _result(call(session, opts, "tools/list", None), "tools/list")
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        raise NoReply(f"tools/list answered without a tools list: {_shown(result)}")
    return tools


def tools_list(session: Session, opts: Options) -> SubTestOutcome:
    start(session, opts)
    tools = _tools(session, opts)
    if not tools:
        return SubTestOutcome(False, "tools/list answered an empty tools list")
    names = []
    for index, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not name:
            return SubTestOutcome(False, f"tools/list: tool {index} has no name: {_shown(tool)}")
        assert isinstance(tool, dict)
        problem = schema_problem(tool.get("inputSchema"))
        if problem is not None:
            return SubTestOutcome(False, f"tools/list: tool {name}: inputSchema {problem}")
        names.append(name)
    return SubTestOutcome(True, f"{len(names)} tool(s): {', '.join(names)}")


def tools_call(session: Session, opts: Options) -> SubTestOutcome:
    """Call a tool and judge the *shape* of the answer.

    The tool is the one named, else the first that requires no argument, else the
    first listed; the arguments are the ones given, else built from its inputSchema.
    A tool-level failure (`isError: true`) or a JSON-RPC error is how a correct
    server answers arguments it cannot use (server/tools §Error Handling), so it
    fails nothing here. Whether the call *succeeded* is `tools-call-success`, judged
    only for a call the user named (required) or a tool that takes no required
    argument (advisory by default); otherwise that sub-test is not reported.
    """
    start(session, opts)
    listed = [t for t in _tools(session, opts) if isinstance(t, dict)]
    tools = {t.get("name"): t for t in listed}
    if not tools:
        return SubTestOutcome(False, "tools/list lists no tools to call")
    if opts.tool is not None:
        tool = tools.get(opts.tool)
        if tool is None:
            listed_names = ", ".join(map(str, tools))
            return SubTestOutcome(False, f"tool {opts.tool} is not listed (tools: {listed_names})")
    else:  # one that needs no arguments, and whose schema is sound, is the fair try
        easy = [t for t in listed if not _required(t) and not schema_problem(t.get("inputSchema"))]
        tool = (easy or listed)[0]
    name = tool.get("name")
    schema = tool.get("inputSchema")
    arguments = opts.arguments if opts.tool is not None else None
    built = ""
    if arguments is None:
        arguments = example_arguments(schema) if isinstance(schema, dict) else None
        built = " (built from its inputSchema)"
    if arguments is None:
        arguments, built = {}, " (no arguments could be built from its inputSchema)"
    shown = f"tools/call {name}({_shown(arguments)}){built}"
    answer = call(session, opts, "tools/call", {"name": name, "arguments": arguments})
    shape = _call_shape(answer, tool, shown)
    judged = opts.named_call or (not _required(tool) and not arguments)
    if not judged:
        return shape
    success = _call_success(answer, shown)
    return SubTestOutcome(shape.passed, shape.reason, also=(("tools-call-success", success),))


def _required(tool: dict[str, Any]) -> list[Any]:
    schema = tool.get("inputSchema")
    required = schema.get("required") if isinstance(schema, dict) else None
    return required if isinstance(required, list) else []


def _call_shape(answer: Message, tool: dict[str, Any], shown: str) -> SubTestOutcome:  # noqa: PLR0911
    if "error" in answer.body:  # a protocol error (well formed: the session checked it)
        return SubTestOutcome(True, f"{shown} -> JSON-RPC error {_shown(answer.body['error'])}")
    result = answer.body.get("result")
    if not isinstance(result, dict):
        return SubTestOutcome(
            False, f"{shown} answered {_shown(result)}, not a CallToolResult object"
        )
    content = result.get("content")
    if not isinstance(content, list):
        return SubTestOutcome(False, f"{shown} answered without a content list: {_shown(result)}")
    for index, item in enumerate(content):
        problem = content_problem(item)
        if problem is not None:
            return SubTestOutcome(False, f"{shown}: content[{index}] {problem}: {_shown(item)}")
    if "isError" in result and not isinstance(result["isError"], bool):
        return SubTestOutcome(
            False, f"{shown}: isError is {_shown(result['isError'])}, not a boolean"
        )
    structured = result.get("structuredContent")
    if structured is not None and not isinstance(structured, dict):
        return SubTestOutcome(
            False, f"{shown}: structuredContent is {_shown(structured)}, not an object"
        )
    output_schema = tool.get("outputSchema")
    failed = result.get("isError") is True
    if isinstance(output_schema, dict) and not failed:  # an error result carries no output
        if structured is None:
            return SubTestOutcome(
                False, f"{shown}: an outputSchema is declared but no structuredContent came"
            )
        problem = instance_problem(structured, output_schema)
        if problem is not None:
            return SubTestOutcome(
                False, f"{shown}: structuredContent does not match the outputSchema at {problem}"
            )
    kind = "a tool-level error (isError: true)" if failed else "a result"
    return SubTestOutcome(True, f"{shown} -> {kind}: {_shown(content)}")


def _call_success(answer: Message, shown: str) -> SubTestOutcome:
    if "error" in answer.body:
        return SubTestOutcome(False, f"{shown} got JSON-RPC error {_shown(answer.body['error'])}")
    result = answer.body.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return SubTestOutcome(
            False, f"{shown} failed (isError: true): {_shown(result.get('content'))}"
        )
    return SubTestOutcome(True, f"{shown} succeeded")


# ContentBlock (schema.ts): each type and the fields it must carry as strings.
_CONTENT_FIELDS = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
    "resource": (),
}


def content_problem(item: object) -> str | None:
    """Why `item` is no ContentBlock; None when it is one."""
    if not isinstance(item, dict):
        return "is not an object"
    kind = item.get("type")
    if kind not in _CONTENT_FIELDS:
        return f"has type {_shown(kind)}, none of {', '.join(_CONTENT_FIELDS)}"
    for key in _CONTENT_FIELDS[kind]:
        if not isinstance(item.get(key), str):
            return f"({kind}) has no {key} string"
    if kind == "resource":
        resource = item.get("resource")
        if not isinstance(resource, dict) or not isinstance(resource.get("uri"), str):
            return "(resource) has no resource object with a uri"
    return None


def tools_call_unknown(session: Session, opts: Options) -> SubTestOutcome:
    start(session, opts)
    answer = call(session, opts, "tools/call", {"name": UNKNOWN_TOOL, "arguments": {}})
    if "error" in answer.body:
        return SubTestOutcome(True, f"a JSON-RPC error: {_shown(answer.body['error'])}")
    result = answer.body.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        if opts.unknown_tool_is_error_result:
            return SubTestOutcome(
                True, "a result with isError: true (accepted; the spec's example is -32602)"
            )
        return SubTestOutcome(
            False, "a result with isError: true, where a JSON-RPC error (-32602) is required"
        )
    return SubTestOutcome(False, f"calling an unknown tool succeeded: {_shown(result)}")


def parse_error(session: Session, opts: Options) -> SubTestOutcome:
    start(session, opts)
    session.send_raw(MALFORMED_LINE)
    return _expect_error(session, opts, PARSE_ERROR, "a malformed JSON line", ids=(None,))


def invalid_request(session: Session, opts: Options) -> SubTestOutcome:
    start(session, opts)
    request_id = session.new_id()
    session.send({"jsonrpc": "2.0", "id": request_id, "method": 42})  # the method is not a string
    return _expect_error(
        session, opts, INVALID_REQUEST, "a request whose method is a number", ids=(None, request_id)
    )


def _expect_error(
    session: Session, opts: Options, code: int, what: str, ids: tuple[object, ...]
) -> SubTestOutcome:
    # Only an error can answer it: a stray result (to a notification) is another sub-test's.
    answer = _after_marker(
        session,
        opts,
        what,
        lambda m: "error" in m.body and (_id_in(m, ids) or _error_code(m) == code),
        # An error reply is how a server goes on after a bad line: one that stops there fails.
        keeps_serving=True,
    )
    if answer is None:
        return SubTestOutcome(False, f"no reply to {what} (the request after it was answered)")
    if answer.reply_problem is not None:
        return SubTestOutcome(False, f"the reply to {what} is not JSON-RPC: {answer.reply_problem}")
    got = _error_code(answer)
    if got != code:
        return SubTestOutcome(False, f"{what} got {_shown(answer.body)}, not error {code}")
    if "id" not in answer.body or not _id_in(answer, ids):
        shown = json.dumps(answer.body.get("id")) if "id" in answer.body else "missing"
        allowed = " or ".join(json.dumps(i) for i in ids)
        return SubTestOutcome(False, f"error {code} with id {shown}, where it must be {allowed}")
    return SubTestOutcome(True, f"error {code}, id {json.dumps(answer.body['id'])}")


def unknown_method(session: Session, opts: Options) -> SubTestOutcome:
    start(session, opts)
    answer = call(session, opts, UNKNOWN_METHOD, None)
    got = _error_code(answer)
    if got == METHOD_NOT_FOUND:
        return SubTestOutcome(True, f"error {got}")
    return SubTestOutcome(
        False, f"{UNKNOWN_METHOD} got {_shown(answer.body)}, not error {METHOD_NOT_FOUND}"
    )


HANDSHAKE: dict[str, SubTest] = {
    "initialize": initialize,
    "version-negotiation": version_negotiation,
    "initialized-notification": initialized_notification,
}
STATELESS: dict[str, SubTest] = {
    "discover": discover,
    "version-negotiation": version_negotiation,
    "meta-required": meta_required,
    "notification-no-reply": notification_no_reply,
}
COMMON: dict[str, SubTest] = {
    "tools-list": tools_list,
    "tools-call": tools_call,
    "tools-call-unknown": tools_call_unknown,
    "parse-error": parse_error,
    "invalid-request": invalid_request,
    "unknown-method": unknown_method,
}
# Which sub-tests share a server process, in the order they run there (`check`).
# The first chain's first sub-test opens the session and decides the revision.
# Before a sub-test in a chain, only well-formed traffic the server answered
# right has gone (each earlier sub-test passed): what a correct server must take
# in its stride. What may break or lock a session ends a chain: a malformed line
# (parse-error), an invalid request, a request without _meta; a tool call, which
# may change state or hang, comes just before. `version-negotiation` opens a
# process of its own (its request must be the first) and leaves it as `start` would.
_HANDSHAKE_CHAINS = (
    (
        "initialize",
        "initialized-notification",
        "tools-list",
        "tools-call-unknown",
        "unknown-method",
        "tools-call",
        "parse-error",
    ),
    ("version-negotiation", "invalid-request"),
)
_STATELESS_CHAINS = (
    (
        "discover",
        "notification-no-reply",
        "tools-list",
        "tools-call-unknown",
        "unknown-method",
        "tools-call",
        "parse-error",
    ),
    ("version-negotiation", "meta-required"),
    ("invalid-request",),
)
# Judged by `check` from what other sub-tests saw, not by a function of their own.
SERVES_REVISION = "serves-revision"
TOOLS_CALL_SUCCESS = "tools-call-success"
CACHE_HINTS = "cache-hints"
STDOUT_CLEAN = "stdout-clean"
ALL_IDS = tuple(
    dict.fromkeys(
        [
            *HANDSHAKE,
            *STATELESS,
            *COMMON,
            SERVES_REVISION,
            TOOLS_CALL_SUCCESS,
            CACHE_HINTS,
            STDOUT_CLEAN,
        ]
    )
)


def chains(revision: str) -> tuple[tuple[str, ...], ...]:
    """The sub-tests of `revision` grouped by the server process they share."""
    return _STATELESS_CHAINS if revisions.is_stateless(revision) else _HANDSHAKE_CHAINS


def for_revision(revision: str) -> dict[str, SubTest]:
    """The sub-tests with a function of their own for `revision`, in report order."""
    first = STATELESS if revisions.is_stateless(revision) else HANDSHAKE
    return {**first, **COMMON}
