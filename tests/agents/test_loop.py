"""The loop backend on the stub model (faked only at HTTP) through real sandboxes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ci_evals.agents import Abort, StageOutcome, StageRequest
from ci_evals.agents.environment import agent_environment
from ci_evals.agents.loop.config import LoopConfig
from ci_evals.agents.registry import get_agent
from ci_evals.endpoints.proxy import ForwardingProxy, ProxySettings
from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.grading.kinds.trajectory import count_calls, read_tool_uses
from ci_evals.sandbox.base import ON_HOST, SandboxConfig
from tests.sandbox_helpers import needs, ready_sandbox

# A sandbox missing here fails its test saying why (docs/isolation.md says how to install).
SANDBOXES = ["local", "bwrap", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture
def sandbox(request: pytest.FixtureRequest) -> SandboxConfig:
    """The sandbox of a parametrized test, ready: docker gets the test image."""
    return ready_sandbox(str(request.param), request)


PROMPT = "Build the thing."


def tool(name: str, **given: Any) -> dict[str, Any]:
    return {"tools": [{"tool": {"name": name, "input": given}}]}


def script(*turns: dict[str, Any], repeat_last: bool = False) -> str:
    rule = {"match": {"prompt_contains": PROMPT}, "turns": list(turns)}
    if repeat_last:
        rule["repeat_last"] = True
    return json.dumps({"rules": [rule]})  # JSON is YAML


def run_loop(
    tmp_path: Path,
    text: str,
    *,
    sandbox: SandboxConfig = ON_HOST,
    config: LoopConfig | None = None,
    abort: Abort | None = None,
    timeout_s: float = 60,
    max_budget_usd: float | None = None,
    record: Path | None = None,
) -> tuple[StageOutcome, list[dict[str, Any]], StubServer]:
    """Run the loop on the stub serving `text`; with `record`, through the forwarding
    proxy recording every exchange there (what the model was sent)."""
    stage_dir = tmp_path / "stage"
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(StubServer(loads_script(text)))
        endpoint = server.cli_env()
        if record is not None:
            settings = ProxySettings(upstream=server.url, api_key="sk-test", record_path=record)
            endpoint = stack.enter_context(ForwardingProxy(settings)).cli_env()
        env = agent_environment(
            os.environ, private_root=tmp_path / "agent", endpoint=endpoint, offline=False
        )
        request = StageRequest(
            prompt=PROMPT,
            cwd=workspace,
            plugin_dir=workspace,
            env=env,
            trajectory_path=stage_dir / "trajectory.jsonl",
            stderr_path=stage_dir / "stderr.log",
            timeout_s=timeout_s,
            max_budget_usd=max_budget_usd,
            sandbox=sandbox,
            writable=(tmp_path / "agent",),
            options=config,
        )
        outcome = asyncio.run(get_agent("loop").run_stage(request, abort=abort or Abort()))
    lines = (stage_dir / "trajectory.jsonl").read_text().splitlines()
    return outcome, [json.loads(line) for line in lines], server


def results_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "ToolResult"]


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_completed_with_every_tool_recorded(tmp_path: Path, sandbox: SandboxConfig) -> None:
    text = script(
        tool("write_file", path="pkg/hello.txt", content="hello\n"),
        tool("run_command", command="cat pkg/hello.txt | tr a-z A-Z"),
        tool("read_file", path="pkg/hello.txt"),
        tool("list_directory", path="."),
        tool("final_submit", summary="built it"),
    )
    outcome, records, _ = run_loop(tmp_path, text, sandbox=sandbox)
    assert outcome.status == "completed", outcome.error
    assert outcome.turns == 5 and outcome.final_text == "built it"
    assert outcome.result_subtypes == ["completed"]
    assert (tmp_path / "ws" / "pkg" / "hello.txt").read_text() == "hello\n"
    outputs = [r["output"] for r in results_of(records)]
    assert outputs[0] == "wrote 6 bytes to ./pkg/hello.txt"
    assert "exit code: 0" in outputs[1] and "HELLO" in outputs[1]
    assert outputs[2] == "hello\n"
    assert "./pkg/hello.txt" in outputs[3].splitlines()
    assert records[-1]["type"] == "ResultMessage" and records[-1]["subtype"] == "completed"
    # grading.trajectory reads the calls with their arguments.
    uses = read_tool_uses(tmp_path / "stage" / "trajectory.jsonl")
    assert [u.name for u in uses] == [
        "write_file", "run_command", "read_file", "list_directory", "final_submit",
    ]  # fmt: skip
    assert uses[1].input == {"command": "cat pkg/hello.txt | tr a-z A-Z"}
    assert count_calls(uses, "tool", "final_submit") == 1


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_halted_at_the_step_ceiling(tmp_path: Path, sandbox: SandboxConfig) -> None:
    text = script(tool("run_command", command="echo again"), repeat_last=True)
    outcome, records, server = run_loop(
        tmp_path, text, sandbox=sandbox, config=LoopConfig(max_steps=3)
    )
    assert outcome.status == "limit" and outcome.limit == "turns"
    assert outcome.result_subtypes == ["halted"]
    assert "step ceiling (3 steps)" in (outcome.error or "")
    assert outcome.turns == 3 and len(results_of(records)) == 3
    assert len([r for r in server.requests if r.outcome == "turn"]) == 3
    assert records[-1]["subtype"] == "halted"


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_a_failing_tool_is_output_the_model_reads(tmp_path: Path, sandbox: SandboxConfig) -> None:
    text = script(
        tool("run_command", command="echo to-out; echo compile error >&2; exit 3"),
        tool("read_file", path="missing.txt"),
        tool("run_command"),  # no command at all
        tool("no_such_tool", x=1),
        tool("final_submit"),
    )
    exchanges = tmp_path / "exchanges.jsonl"
    outcome, records, _ = run_loop(tmp_path, text, sandbox=sandbox, record=exchanges)
    assert outcome.status == "completed"
    failed = results_of(records)
    assert all(r["is_error"] for r in failed[:4])
    assert failed[0]["exit_code"] == 3
    assert "to-out" in failed[0]["output"] and "compile error" in failed[0]["output"]
    assert "No such file" in failed[1]["output"]
    assert "bad input for run_command" in failed[2]["output"]
    assert "no tool named 'no_such_tool'" in failed[3]["output"]
    # The model got each of them back, as an error tool_result with that output.
    bodies = [json.loads(line)["request_body"] for line in exchanges.read_text().splitlines()]
    sent = [
        block
        for message in bodies[-1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [(b["is_error"], b["content"]) for b in sent] == [
        (True, r["output"]) for r in failed[:4]
    ]


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_an_argv_that_cannot_start_is_output_not_a_crash(
    tmp_path: Path, sandbox: SandboxConfig
) -> None:
    # The local sandbox raises OSError for a program it cannot start (the Protocol
    # says so); the model chose the argv, so that is its error to read.
    text = script(
        tool("run_command", argv=["no-such-program-here", "x"]),
        tool("run_command", argv=["/"]),
        tool("final_submit"),
    )
    outcome, records, _ = run_loop(tmp_path, text, sandbox=sandbox)
    assert outcome.status == "completed", outcome.error
    failed = results_of(records)
    assert [r["is_error"] for r in failed[:2]] == [True, True]
    assert "no-such-program-here" in failed[0]["output"]


@pytest.mark.parametrize("sandbox", SANDBOXES, indirect=True)
def test_hostile_strings_stay_data_inside_the_sandbox(
    tmp_path: Path, sandbox: SandboxConfig
) -> None:
    canary = tmp_path / "host-canary"
    evil_name = f"we ird;$(touch {canary})`touch {canary}`'\"\n.txt"
    evil_content = f"EVAL_EOF\n$(touch {canary})\n'; touch {canary}; '"
    text = script(
        tool("write_file", path=evil_name, content=evil_content),
        tool("read_file", path=evil_name),
        tool("run_command", command="printf '%s' \"$HOME\" > home.txt; echo $(echo inner)"),
        tool("list_directory", path="-rf"),
        tool("final_submit"),
    )
    outcome, records, _ = run_loop(tmp_path, text, sandbox=sandbox)
    assert outcome.status == "completed"
    assert not canary.exists()
    assert (tmp_path / "ws" / evil_name).read_text() == evil_content
    out = results_of(records)
    assert out[1]["output"] == evil_content
    assert "inner" in out[2]["output"]  # the shell ran, inside the sandbox
    assert "-rf" in out[3]["output"] and out[3]["is_error"]  # a path, not an option
    # The tools' environment has no way to the model.
    home = (tmp_path / "ws" / "home.txt").read_text()
    assert home == str(tmp_path / "agent" / "home")


def test_commands_get_no_model_credentials(tmp_path: Path) -> None:
    text = script(tool("run_command", command="env > env.txt"), tool("final_submit"))
    outcome, _, _ = run_loop(tmp_path, text)
    assert outcome.status == "completed"
    seen = (tmp_path / "ws" / "env.txt").read_text()
    assert "ANTHROPIC_BASE_URL" not in seen and "ANTHROPIC_API_KEY" not in seen


def test_calls_after_final_submit_in_one_answer_are_not_run(tmp_path: Path) -> None:
    text = script(
        {
            "tools": [
                {"tool": {"name": "write_file", "input": {"path": "a.txt", "content": "a"}}},
                {"tool": {"name": "final_submit", "input": {}}},
                {"tool": {"name": "run_command", "input": {"command": "touch b.txt"}}},
            ]
        }
    )
    outcome, records, _ = run_loop(tmp_path, text)
    assert outcome.status == "completed" and outcome.turns == 1
    assert (tmp_path / "ws" / "a.txt").exists() and not (tmp_path / "ws" / "b.txt").exists()
    assert [r["tool"] for r in results_of(records)] == ["write_file", "final_submit"]


def test_bwrap_tools_cannot_write_outside(tmp_path: Path) -> None:
    needs("bwrap")
    # Outside the bound folders a path lands in the sandbox's own /tmp (gone with it)
    # or on the read-only system, never on the host.
    outside = tmp_path / "outside.txt"
    system = Path("/usr/lib/ci-evals-loop-test.txt")
    text = script(
        tool("write_file", path=str(outside), content="x"),
        tool("run_command", command=f"echo x > {outside}.2"),
        tool("write_file", path=str(system), content="x"),
        tool("final_submit"),
    )
    outcome, records, _ = run_loop(tmp_path, text, sandbox=SandboxConfig("bwrap"))
    assert outcome.status == "completed"
    assert not outside.exists() and not Path(f"{outside}.2").exists()
    assert not system.exists()
    assert results_of(records)[2]["is_error"]
    assert "Read-only file system" in results_of(records)[2]["output"]


def test_a_long_tool_output_is_cut_head_and_tail(tmp_path: Path) -> None:
    text = script(tool("run_command", command="seq 1 100000"), tool("final_submit"))
    _, records, _ = run_loop(tmp_path, text, config=LoopConfig(output_chars=1000))
    output = results_of(records)[0]["output"]
    assert len(output) < 1200 and "characters cut" in output
    assert output.rstrip().endswith("100000")


def test_time_limit_kills_the_running_command(tmp_path: Path) -> None:
    # The command marks its natural end, 100 s on (within run_command's own 120 s
    # ceiling): killed at the stage's 3 s, it never does; waited for, it would.
    text = script(tool("run_command", command="sleep 100; touch ended"))
    outcome, records, _ = run_loop(tmp_path, text, timeout_s=3)
    assert not (tmp_path / "ws" / "ended").exists()
    assert outcome.status == "limit" and outcome.limit == "time"
    assert records[-1]["type"] == "ResultMessage"


def test_abort_interrupts(tmp_path: Path) -> None:
    text = script(tool("run_command", command="sleep 300"))
    abort = Abort()
    threading.Timer(1.5, abort.set).start()
    outcome, _, _ = run_loop(tmp_path, text, abort=abort, timeout_s=120)
    assert outcome.status == "interrupted"


def test_budget_limit(tmp_path: Path) -> None:
    turn = {**tool("run_command", command="true"), "usage": {"input_tokens": 1_000_000}}
    text = script(turn, repeat_last=True)
    outcome, _, _ = run_loop(tmp_path, text, max_budget_usd=0.5)
    assert outcome.status == "limit" and outcome.limit == "budget"
    assert outcome.turns == 1 and outcome.cost_usd > 0.5


def test_context_strategies_shrink_only_older_steps(tmp_path: Path) -> None:
    turns = [tool("run_command", command=f"seq 1 {400 + i}") for i in range(4)]
    text = script(*turns, tool("final_submit"))
    sent: dict[str, list[int]] = {}
    for strategy in ("full", "window", "summary"):
        config = LoopConfig(context=strategy, keep_last=1)  # type: ignore[arg-type]
        outcome, records, _ = run_loop(tmp_path / strategy, text, config=config)
        assert outcome.status == "completed"  # the stub's turns line up under every strategy
        sent[strategy] = [r["sent_chars"] for r in records if r["type"] == "AssistantMessage"]
    assert sent["window"][-1] < sent["summary"][-1] < sent["full"][-1]
    assert sent["window"][:2] == sent["full"][:2]  # nothing old yet to shrink


@pytest.mark.slow
def test_a_90_second_command_returns_its_output(tmp_path: Path) -> None:
    text = script(
        tool("run_command", command="sleep 90; echo finished-late", timeout_s=200),
        tool("final_submit"),
    )
    config = LoopConfig(command_timeout_s=200)
    outcome, records, _ = run_loop(tmp_path, text, config=config, timeout_s=300)
    assert outcome.status == "completed"
    assert "finished-late" in results_of(records)[0]["output"]


def test_no_endpoint_is_one_clear_error(tmp_path: Path) -> None:
    request = StageRequest(
        prompt=PROMPT,
        cwd=tmp_path / "ws",
        plugin_dir=tmp_path / "ws",
        env={"HOME": str(tmp_path)},
        trajectory_path=tmp_path / "t.jsonl",
        stderr_path=tmp_path / "stderr.log",
    )
    outcome = asyncio.run(get_agent("loop").run_stage(request, abort=Abort()))
    assert outcome.status == "error" and "no model endpoint" in (outcome.error or "")
