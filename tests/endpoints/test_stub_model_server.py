"""The stub server over real HTTP, with requests shaped like the Claude Code CLI's.

These talk to the server with http.client (fast); tests/endpoints/test_stub_model_cli.py
drives it with the real CLI.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ci_evals.endpoints.stub_model import StubServer, loads_script

CWD = "/work/space"
SESSION = "session-1"


def env_block(cwd: str = CWD) -> dict[str, Any]:
    text = f"# Environment\n - Primary working directory: {cwd}\n - Platform: linux\n"
    return {"role": "system", "content": [{"type": "text", "text": text}]}


def user(*texts: str) -> dict[str, Any]:
    reminder = {"type": "text", "text": "<system-reminder>\nbe nice\n</system-reminder>\n"}
    return {"role": "user", "content": [reminder, *({"type": "text", "text": t} for t in texts)]}


def command_prompt(command: str, args: str) -> dict[str, Any]:
    tags = (
        f"<command-message>{command}</command-message>\n<command-name>/{command}</command-name>\n"
        f"<command-args>{args}</command-args>\n"
    )
    return user(tags, f"Do the {command} step for {args}.\n")


def body(
    messages: list[dict[str, Any]],
    system: str = "You are a Claude agent.",
    tools: bool = True,
    stream: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "model": "claude-test-1",
        "system": [{"type": "text", "text": system}],
        "messages": messages,
        "tools": [{"name": "Write"}, {"name": "Agent"}] if tools else [],
        "stream": stream,
        "max_tokens": 1000,
        **extra,
    }


class Response:
    def __init__(self, status: int, headers: dict[str, str], raw: bytes) -> None:
        self.status = status
        self.headers = headers
        self.raw = raw

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """Parse the SSE body into (event name, data) pairs."""
        parsed = []
        for chunk in self.raw.decode().split("\n\n"):
            if not chunk.strip():
                continue
            lines = dict(line.split(": ", 1) for line in chunk.splitlines())
            parsed.append((lines["event"], json.loads(lines["data"])))
        return parsed

    def message(self) -> dict[str, Any]:
        """Rebuild the assistant message from the events, as a client would."""
        content: list[dict[str, Any]] = []
        partial: dict[int, str] = {}
        message: dict[str, Any] = {}
        for name, data in self.events():
            if name == "message_start":
                message = data["message"]
            elif name == "content_block_start":
                content.append(dict(data["content_block"]))
                partial[data["index"]] = ""
            elif name == "content_block_delta":
                delta = data["delta"]
                if delta["type"] == "text_delta":
                    content[data["index"]]["text"] += delta["text"]
                else:
                    partial[data["index"]] += delta["partial_json"]
            elif name == "content_block_stop" and content[data["index"]]["type"] == "tool_use":
                content[data["index"]]["input"] = json.loads(partial[data["index"]])
            elif name == "message_delta":
                message["stop_reason"] = data["delta"]["stop_reason"]
                message["usage"] = data["usage"]
        message["content"] = content
        return message

    def text(self) -> str:
        return "".join(b["text"] for b in self.message()["content"] if b["type"] == "text")


def post(
    server: StubServer,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
    timeout: float = 10,
) -> Response:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(
            "POST",
            "/v1/messages?beta=true",
            body=json.dumps(payload),
            headers={
                "Content-Type": "application/json",
                "X-Claude-Code-Session-Id": SESSION,
                **(headers or {}),
            },
        )
        response = conn.getresponse()
        return Response(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()


@pytest.fixture
def serve():  # type: ignore[no-untyped-def]
    """Start a server for a script text; stopped (and checked for leaks) at the end."""
    started: list[StubServer] = []
    threads_before = set(threading.enumerate())

    def start(text: str) -> StubServer:
        server = StubServer(loads_script(text, "stub.yaml", base_dir=Path.cwd())).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    leaked = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    assert not leaked, f"threads left behind: {leaked}"


PLAN = """
rules:
  - name: plan
    match: {command: labsmith:plan-lab}
    turns:
      - text: "Planning for {args} ({arg1}) in {cwd}; json stays {\\"a\\": 1}"
        tools:
          - write: {path: plan/lab.md, content: "# Lab for {args}\\n"}
          - agent: {name: labsmith:researcher, prompt: "Research {args}"}
        usage: {input_tokens: 1200, output_tokens: 300}
      - text: "Done (turn {turn})."
  - name: researcher
    match: {agent: labsmith:researcher}
    turns:
      - text: "researching"
"""


def test_a_scripted_turn_is_streamed_per_the_spec(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(PLAN)
    response = post(server, body([command_prompt("labsmith:plan-lab", "Acme Corp"), env_block()]))
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    names = [name for name, _ in response.events()]
    assert names == [
        "message_start",
        *["content_block_start", "content_block_delta", "content_block_stop"] * 3,
        "message_delta",
        "message_stop",
    ]
    message = response.message()
    assert message["model"] == "claude-test-1"
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["input_tokens"] == 1200
    assert message["usage"]["output_tokens"] == 300
    text, write, agent = message["content"]
    assert text["text"] == 'Planning for Acme Corp (Acme) in /work/space; json stays {"a": 1}'
    assert write["name"] == "Write"
    assert write["input"] == {
        "file_path": "/work/space/plan/lab.md",
        "content": "# Lab for Acme Corp\n",
    }
    assert agent["input"]["subagent_type"] == "labsmith:researcher"
    assert agent["input"]["prompt"] == "Research Acme Corp"
    assert write["id"] != agent["id"]


def test_the_turn_is_the_number_of_assistant_messages(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(PLAN)
    messages = [
        command_prompt("labsmith:plan-lab", "Acme"),
        env_block(),
        {"role": "assistant", "content": [{"type": "text", "text": "earlier"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
    ]
    response = post(server, body(messages))
    assert response.text() == "Done (turn 2)."
    assert response.message()["stop_reason"] == "end_turn"
    assert response.message()["usage"]["output_tokens"] == 0  # the default usage is zero
    # Past the last turn: a clear text answer that ends the conversation.
    more = [*messages, {"role": "assistant", "content": "x"}, user("go on")]
    assert post(server, body(more)).text() == "stub: rule 'plan' has no turn 3 (it scripts 2)"
    assert [(r.rule, r.turn, r.outcome) for r in server.requests] == [
        ("plan", 2, "turn"),
        ("plan", 3, "exhausted"),
    ]


def test_a_subagent_the_stub_launched_is_matched_by_name(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(PLAN)
    post(server, body([command_prompt("labsmith:plan-lab", "Acme"), env_block()]))
    subagent_headers = {"x-claude-code-agent-id": "a123"}
    sub = post(
        server,
        body([user("Research Acme"), env_block()], system="You are the researcher."),
        headers=subagent_headers,
    )
    assert sub.text() == "researching"
    # The same prompt from another session is not that subagent.
    other = post(
        server,
        body([user("Research Acme"), env_block()]),
        headers={**subagent_headers, "X-Claude-Code-Session-Id": "session-2"},
    )
    assert other.text().startswith("stub: no rule matched this request")
    records = server.requests
    assert [(r.rule, r.agent, r.subagent) for r in records] == [
        ("plan", None, False),
        ("researcher", "labsmith:researcher", True),
        (None, None, True),
    ]
    assert server.unmatched() == [records[2]]


def test_match_on_system_prompt_prompt_text_model_and_subagent(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(
        """
rules:
  - name: reviewer
    match: {system_contains: "You grade lab plans", subagent: true}
    turns: [{text: reviewer}]
  - name: hello
    match: {prompt_contains: "say hello", model: claude-test-1}
    turns: [{text: "hello: {prompt}"}]
  - name: fallback
    turns: [{text: fallback}]
"""
    )
    reviewer = post(
        server,
        body([user("review it")], system="You grade lab plans."),
        headers={"x-claude-code-agent-id": "b1"},
    )
    assert reviewer.text() == "reviewer"
    assert post(server, body([user("please say hello")])).text() == "hello: please say hello"
    assert post(server, body([user("something else")])).text() == "fallback"


def test_context_conditions_tell_a_run_with_the_plugin_from_one_without(serve) -> None:  # type: ignore[no-untyped-def]
    """The skill and agent listings arrive in system reminders of the user messages
    (or a system-role message): `context_contains` / `context_lacks` read them, the
    system prompt too; `prompt_contains` does not (the reminders are dropped there)."""
    server = serve(
        """
rules:
  - name: with
    match: {prompt_contains: "greet", context_contains: "greeter:greet"}
    turns: [{text: with}]
  - name: without
    match: {prompt_contains: "greet", context_lacks: "greeter:"}
    turns: [{text: without}]
  - name: other
    turns: [{text: other}]
"""
    )
    listing = {
        "type": "text",
        "text": "<system-reminder>\nSkills:\n- greeter:greet: greets\n</system-reminder>\n",
    }
    with_plugin = {"role": "user", "content": [listing, {"type": "text", "text": "greet Alex"}]}
    assert post(server, body([env_block(), with_plugin])).text() == "with"
    as_system = {"role": "system", "content": [listing]}
    assert post(server, body([as_system, user("greet Alex")])).text() == "with"
    assert post(server, body([user("greet Alex")], system="greeter:greet")).text() == "with"
    assert post(server, body([env_block(), user("greet Alex")])).text() == "without"
    # A user's own words naming the plugin are no listing: the prompt is not context.
    assert post(server, body([user("greet greeter:greet")])).text() == "without"


def test_no_rule_matched_is_an_answer_and_a_record(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - match: {command: a:b}\n    turns: [{text: x}]\n")
    response = post(server, body([command_prompt("other:cmd", "x"), env_block()]))
    assert response.status == 200
    assert response.text() == (
        "stub: no rule matched this request (command='other:cmd', agent=None, "
        "subagent=False, prompt='Do the other:cmd step for x.')"
    )
    assert response.message()["stop_reason"] == "end_turn"
    (record,) = server.unmatched()
    assert (record.rule, record.outcome, record.command) == (None, "unmatched", "other:cmd")


def test_title_generation_gets_json_that_fits_its_schema(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - turns: [{text: scripted}]\n")
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    payload = body(
        [user("Generate a title")],
        tools=False,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    assert json.loads(post(server, payload).text()) == {"title": "stub"}
    assert server.requests[0].rule == "(non-essential)"


def test_http_status_fault_then_recovery(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(
        "rules:\n  - turns:\n      - fault: {http_status: 529, times: 1}\n        text: back\n"
    )
    first = post(server, body([user("hi")]))
    assert first.status == 529
    assert json.loads(first.raw)["error"]["type"] == "overloaded_error"
    second = post(server, body([user("hi")]))
    assert (second.status, second.text()) == (200, "back")
    assert [(r.outcome, r.status) for r in server.requests] == [("fault", 529), ("turn", 200)]


def test_malformed_sse_and_the_non_streaming_fallback(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(
        "rules:\n  - turns:\n      - fault: {malformed_sse: true, times: 1}\n        text: ok\n"
    )
    broken = post(server, body([user("hi")]))
    assert broken.status == 200
    assert b"data: {this is not json" in broken.raw
    # The CLI retries a stream it cannot parse as one `stream: false` request.
    fallback = post(server, body([user("hi")], stream=False))
    assert fallback.headers["Content-Type"] == "application/json"
    message = json.loads(fallback.raw)
    assert (message["type"], message["content"]) == ("message", [{"type": "text", "text": "ok"}])


def test_disconnect_cuts_the_stream(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - turns: [{fault: {disconnect: true}}]\n")
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        post(server, body([user("hi")]))


def test_stop_releases_a_hanging_request_promptly(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - turns: [{fault: {hang: forever}}]\n")
    failures: list[BaseException] = []

    def client() -> None:
        try:
            post(server, body([user("hi")]), timeout=30)
        except (OSError, http.client.HTTPException) as exc:
            failures.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.requests[0].outcome == "fault"
    server.stop()  # must not wait for the hang
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert failures, "the hanging request should end without an answer"


def test_delay_then_answer(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - turns: [{text: slow, delay: 0.3}]\n")
    started = time.monotonic()
    assert post(server, body([user("hi")])).text() == "slow"
    assert time.monotonic() - started >= 0.3


def test_probe_and_unknown_paths_are_answered_and_recorded(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - turns: [{text: x}]\n")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("HEAD", "/api/hello")
    assert conn.getresponse().status == 200
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", "/v1/other", body=b"{}")
    assert conn.getresponse().status == 404
    conn.close()
    assert [(r.method, r.path, r.outcome) for r in server.requests] == [
        ("HEAD", "/api/hello", "other"),
        ("POST", "/v1/other", "other"),
    ]


def test_cli_env_points_at_the_server(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - turns: [{text: x}]\n")
    env = server.cli_env()
    assert env["ANTHROPIC_BASE_URL"] == server.url
    assert server.url.startswith("http://127.0.0.1:")
    assert env["ANTHROPIC_API_KEY"]
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_stop_closes_the_port() -> None:
    server = StubServer(loads_script("rules:\n  - turns: [{text: x}]\n"))
    with server:
        port = server.port
        post(server, body([user("hi")]))
    with pytest.raises(ConnectionRefusedError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()
    server.stop()  # a second stop is harmless


def test_a_subagent_prompt_wrapped_by_the_cli_is_still_recognised(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(PLAN)
    post(server, body([command_prompt("labsmith:plan-lab", "Acme"), env_block()]))
    wrapped = "Research Acme\n\n(Reminder: answer with absolute paths.)"
    sub = post(server, body([user(wrapped)]), headers={"x-claude-code-agent-id": "a9"})
    assert sub.text() == "researching"


def test_serve_a_script_from_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "stub.yaml"
    script.write_text("rules:\n  - name: only\n    turns: [{text: from the command line}]\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "ci_evals.endpoints.stub_model", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        port = int(url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/messages", body=json.dumps(body([user("hi")])))
        answer = Response(200, {}, conn.getresponse().read())
        conn.close()
        assert answer.text() == "from the command line"
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=10)
    assert process.returncode == 130
    assert "ANTHROPIC_BASE_URL=" in stderr
    assert "rule='only' turn=1 -> turn" in stderr


def test_a_bad_script_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "stub.yaml"
    script.write_text("rules:\n  - turns: [{txt: typo}]\n")
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals.endpoints.stub_model", str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"stub-model: error: {script}:2:14: rules[0].turns[0].txt: unknown key 'txt' "
        "(known keys: delay, fault, stop_reason, text, tools, usage)\n"
    )


def test_a_watch_sees_only_its_own_callers_misses(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve("rules:\n  - match: {command: a:b}\n    turns: [{tools: [{read: x}]}]\n")
    first, second = server.new_caller(), server.new_caller()
    assert first.env["ANTHROPIC_API_KEY"] != second.env["ANTHROPIC_API_KEY"]
    assert first.env["ANTHROPIC_BASE_URL"] == server.url

    def ask(caller, prompt: dict[str, Any], turns: int = 0) -> None:  # type: ignore[no-untyped-def]
        messages = [prompt, env_block()]
        payload = body(messages)
        payload["messages"] += [{"role": "assistant", "content": "x"}] * turns
        post(server, payload, {"x-api-key": caller.env["ANTHROPIC_API_KEY"]})

    ask(first, command_prompt("a:b", "x"))  # answered
    ask(first, command_prompt("other:cmd", "x"))  # no rule
    ask(second, command_prompt("a:b", "x"), turns=1)  # past the rule's one turn
    post(server, body([command_prompt("other:cmd", "y"), env_block()]))  # no tag: nobody's

    (miss,) = first.misses()
    assert (miss.outcome, miss.rule, miss.turn) == ("unmatched", None, None)
    assert miss.text.startswith("stub: no rule matched this request (command='other:cmd'")
    (miss,) = second.misses()
    assert (miss.outcome, miss.rule, miss.turn) == ("exhausted", "rules[0]", 2)
    assert miss.text == "stub: rule 'rules[0]' has no turn 2 (it scripts 1)"
    assert len(server.unmatched()) == 3
    assert {r.caller for r in server.requests} == {first.caller, second.caller, ""}
