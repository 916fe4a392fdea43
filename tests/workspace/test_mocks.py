"""A case's mocks served (`workspace.mocks`): the plugin copy's declarations rewritten,
the stand-in (`workspace/mock_server.py`, run as the CLI runs it: a `python3`
process speaking MCP on stdio) answering as the CLI's does, and its call log
read back as what it is: a file the agent could write."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ci_evals.suite.plugin_eval_mocks import load_mocks
from ci_evals.workspace.mocks import MAX_LOG_BYTES, read_calls, serve_mocks
from tests.run_helpers import write_files

PLUGIN = {
    ".claude-plugin/plugin.json": '{"name": "tix", "mcpServers": "./.mcp.json"}',
    ".mcp.json": '{"mcpServers": {"tracker": {"command": "x"}, "other": {"command": "y"}}}',
}
EVALS = {
    "c/prompt.md": "x",
    "mocks/tracker/get.md": (
        '---\nexpect: {id: "/^T-\\\\d+$/", flags: {dry: [true]}}\n---\n'
        '{"id": "{{input.id}}", "page": "{{file:{input.page}}}"}\n'
    ),
    "mocks/tracker/page-1": "the first page",
    "mocks/tracker/fail.md": '---\nerror: true\n---\nMCP server "x" said no\n',
    "mocks/notes/read.md": "notes",
}


def _served(tmp_path: Path) -> Any:
    evals = write_files(tmp_path / "evals", EVALS)
    plugin = write_files(tmp_path / "copy", PLUGIN)
    servers = load_mocks(evals / "c", evals, tmp_path, [])
    return serve_mocks(plugin, "tix", tmp_path / "parent", servers, max_turns=5, judge_model="m")


def test_only_the_stand_ins_are_declared_in_the_plugin_copy(tmp_path: Path) -> None:
    served = _served(tmp_path)
    copy = tmp_path / "copy"
    manifest = json.loads((copy / ".claude-plugin" / "plugin.json").read_text())
    assert "mcpServers" not in manifest
    declared = json.loads((copy / ".mcp.json").read_text())["mcpServers"]
    assert list(declared) == ["tracker"]
    assert declared["tracker"]["command"] == "python3"
    assert list(served.standalone) == ["notes"]  # --mcp-config: mcp__notes__read
    assert sorted(served.tools) == [
        "mcp__notes__read",
        "mcp__plugin_tix_tracker__fail",
        "mcp__plugin_tix_tracker__get",
    ]
    assert served.withheld == ("other",)
    # The spec folder holds no file the agent may write; the log folder is its only place.
    assert not os.access(served.spec_dir, os.W_OK) or os.geteuid() == 0
    assert served.call_log.parent == served.log_dir


def _talk(served: Any, registered: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    command = (
        served.standalone[registered]
        if registered in served.standalone
        else json.loads((served.spec_dir.parents[2] / "copy" / ".mcp.json").read_text())[
            "mcpServers"
        ][registered]
    )
    lines = "".join(json.dumps({"jsonrpc": "2.0", **m}) + "\n" for m in messages)
    done = subprocess.run(
        [command["command"], *command["args"]],
        input=lines,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _call(i: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": i, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def test_the_stand_in_answers_as_the_clis_does(tmp_path: Path) -> None:
    served = _served(tmp_path)
    answers = _talk(
        served,
        "tracker",
        {"id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        {"method": "notifications/initialized"},
        {"id": 1, "method": "tools/list"},
        _call(2, "get", {"id": "T-7", "page": "page-1", "flags": {"dry": True}}),
        _call(3, "fail", {}),
        _call(4, "get", {"id": "7", "flags": {"dry": True}}),
        _call(5, "get", {"id": "T-8", "page": "../../../etc/passwd", "flags": {"dry": True}}),
        _call(6, "nope", {}),
        {"id": 7, "method": "resources/list"},
    )
    by_id = {a["id"]: a for a in answers}
    assert by_id[0]["result"]["serverInfo"]["name"] == "eval-mock/tracker"
    tools = by_id[1]["result"]["tools"]
    assert [t["name"] for t in tools] == ["fail", "get"]
    assert tools[0]["inputSchema"] == {"type": "object", "additionalProperties": True}
    assert by_id[2]["result"] == {
        "content": [{"type": "text", "text": '{"id": "T-7", "page": "the first page"}'}]
    }
    # `error: true`; an answer that reads like the harness's own words is marked as the CLI does.
    assert by_id[3]["result"]["isError"] is True
    assert by_id[3]["result"]["content"][0]["text"] == '| MCP server "x" said no'
    aborted = by_id[4]["result"]["content"][0]["text"]
    assert by_id[4]["result"]["isError"] is True
    assert aborted == (
        f"eval aborted by mock {served.nonce}: tracker/get \u2014 input violates expect: "
        'id = "7" does not match /^T-\\d+$/'
    )
    assert "not a plain file-name segment" in by_id[5]["result"]["content"][0]["text"]
    assert by_id[6]["result"]["content"][0]["text"] == "no mock for tracker/nope"
    assert by_id[7]["error"]["code"] == -32601
    read = read_calls(served)
    assert [(r["tool"], r["verdict"]) for r in read.records] == [
        ("get", "ok"),
        ("fail", "tool_error"),
        ("get", "abort"),
        ("get", "tool_error"),
    ] and read.problems == ["1 line(s) of the call log are not the stand-ins' records"]
    # (the call of an unmocked tool is logged, and dropped on reading: no such mock)


def test_a_spec_that_does_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    served = _served(tmp_path)
    command = served.standalone["notes"]
    spec = Path(command["args"][1])
    spec.chmod(0o644)
    spec.write_text(spec.read_text().replace('"notes"', '"forged"', 1))
    done = subprocess.run(
        [command["command"], *command["args"]],
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1 and "does not match its digest" in done.stderr


def test_a_forged_call_log_is_bounded_and_read_defensively(tmp_path: Path) -> None:
    served = _served(tmp_path)
    good = {
        "nonce": served.nonce, "seq": 0, "server": "tracker", "tool": "get", "responder": "fixed",
        "verdict": "ok", "output": "x", "ms": 0, "input": {"id": "T-1"},
    }  # fmt: skip
    lines = [
        json.dumps(good),
        json.dumps({**good, "nonce": "other-run"}),
        json.dumps({**good, "server": "../../etc"}),
        json.dumps({**good, "tool": "not-mocked"}),
        json.dumps({**good, "verdict": "passed"}),
        json.dumps({**good, "seq": "0"}),
        json.dumps({**good, "output": "y" * 200_000}),
        json.dumps({**good, "key": "../" * 30, "answer": "z"}),
        "[" * 100_000,
        "not json",
        json.dumps([good]),
    ]
    served.call_log.write_text("\n".join(lines) + "\n")
    read = read_calls(served)
    assert len(read.records) == 2 and "key" not in read.records[1]
    assert read.problems == ["9 line(s) of the call log are not the stand-ins' records"]

    with served.call_log.open("ab") as handle:  # past the bound: nothing is trusted
        handle.truncate(MAX_LOG_BYTES + 1)
    read = read_calls(served)
    assert read.records == [] and "over 8 MiB" in read.problems[0]

    served.call_log.unlink()  # a link the agent planted: never followed
    (tmp_path / "secret").write_text(json.dumps(good) + "\n")
    served.call_log.symlink_to(tmp_path / "secret")
    read = read_calls(served)
    assert read.records == [] and "cannot be opened" in read.problems[0]

    served.call_log.unlink()  # a fifo: never waited on
    os.mkfifo(served.call_log)
    read = read_calls(served)
    assert read.records == [] and "not a regular file" in read.problems[0]
