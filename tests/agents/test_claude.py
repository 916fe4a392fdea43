"""The claude backend against the real bundled CLI and the stub model (faked only at HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.agents import Abort, Progress, StageOutcome, StageRequest
from ci_evals.agents.environment import OFFLINE, agent_environment
from ci_evals.agents.registry import get_agent
from ci_evals.endpoints.stub_model import StubServer, loads_script
from ci_evals.errors import UserError
from ci_evals.sandbox.base import SandboxConfig, SandboxOptions
from ci_evals.sandbox.registry import offline
from tests.run_helpers import make_suite, processes_mentioning

pytestmark = pytest.mark.slow

# A command that blocks (the CLI refuses a standalone `sleep N` as a way to wait).
HANG = "python3 -c 'import time; time.sleep(300)'"


def bash_script(command: str) -> str:
    """A stub script whose stage runs one Bash command, then ends."""
    return (
        "rules:\n  - match: {command: demo:s1}\n    turns:\n"
        f"      - tools: [{{bash: {json.dumps(command)}}}]\n"
    )


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    make_suite(tmp_path / "suite")
    return tmp_path / "suite" / "plugin"


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_the_agent")
    monkeypatch.setenv("MY_FAKE_SECRET", "s3cr3t-value")
    yield


def run_stage(
    tmp_path: Path,
    plugin: Path,
    script: str,
    *,
    abort: Abort | None = None,
    extra_env: dict[str, str] | None = None,
    progress: list[Progress] | None = None,
    **limits: float,
) -> tuple[StageOutcome, StubServer, Path]:
    """Run `/demo:s1 Acme` on the stub serving `script`; returns outcome, server, stage dir."""
    stage_dir = tmp_path / "stage"
    with StubServer(loads_script(script)) as server:
        env = agent_environment(
            os.environ, private_root=tmp_path / "agent", endpoint=server.cli_env(), offline=False
        )
        env.update(extra_env or {})
        request = StageRequest(
            prompt="/demo:s1 Acme",
            cwd=tmp_path / "ws",
            plugin_dir=plugin,
            env=env,
            trajectory_path=stage_dir / "trajectory.jsonl",
            stderr_path=stage_dir / "stderr.log",
            max_turns=int(limits.get("max_turns", 10)),
            timeout_s=limits.get("timeout_s", 120),
            max_budget_usd=limits.get("max_budget_usd"),
        )
        outcome = asyncio.run(
            get_agent("claude").run_stage(
                request,
                abort=abort or Abort(),
                on_progress=(progress.append if progress is not None else None),
            )
        )
    return outcome, server, stage_dir


def trajectory(stage_dir: Path) -> list[dict[str, object]]:
    lines = (stage_dir / "trajectory.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_unknown_agent_lists_the_valid_ones() -> None:
    with pytest.raises(UserError, match=r"known: claude, loop; .* group ci_evals.agents"):
        get_agent("gpt")


def test_stage_writes_files_records_trajectory_and_keeps_secrets_out(
    tmp_path: Path, plugin: Path, secrets_in_env: None
) -> None:
    script = """
rules:
  - match: {command: demo:s1}
    turns:
      - tools:
          - write: {path: out1.md, content: "hello {args}\\n"}
          - bash: "env > env.txt"
        usage: {input_tokens: 1000, output_tokens: 200}
      - text: "done"
        usage: {input_tokens: 500, output_tokens: 100}
"""
    progress: list[Progress] = []
    outcome, server, stage_dir = run_stage(tmp_path, plugin, script, progress=progress)

    assert outcome.status == "completed", outcome
    assert (tmp_path / "ws" / "out1.md").read_text() == "hello Acme\n"
    assert outcome.turns >= 2  # the CLI's own count (num_turns)
    assert outcome.usage.input_tokens == 1500 and outcome.usage.output_tokens == 300
    assert outcome.cost_usd > 0
    assert outcome.session_id and outcome.result_subtypes == ["success"]
    assert outcome.final_text == "done"
    assert outcome.duration_ms > 0 and outcome.wall_s > 0
    assert progress and progress[-1].turns >= 2

    # The agent's environment: allow-listed, private folders, no secrets.
    env = dict(
        line.split("=", 1)
        for line in (tmp_path / "ws" / "env.txt").read_text().splitlines()
        if "=" in line
    )
    assert "GITHUB_TOKEN" not in env and "MY_FAKE_SECRET" not in env
    dumped = (tmp_path / "ws" / "env.txt").read_text()
    assert "ghp_not_for_the_agent" not in dumped and "s3cr3t-value" not in dumped
    assert env["HOME"] == str(tmp_path / "agent" / "home")
    assert env["TMPDIR"] == env["CLAUDE_CODE_TMPDIR"] == str(tmp_path / "agent" / "tmp")
    assert env["XDG_RUNTIME_DIR"] == str(tmp_path / "agent" / "run")
    assert env["IS_SANDBOX"] == "1" and env["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["ANTHROPIC_API_KEY"] == "stub-model-key"  # the stub's, never the user's

    # The trajectory: the prompt, then every message, timestamps, tool inputs and results.
    prompt, *records = trajectory(stage_dir)
    assert prompt["type"] == "Prompt" and prompt["text"] == "/demo:s1 Acme"
    assert len(records) == outcome.messages
    assert all("time" in r and "elapsed_s" in r for r in records)
    types = [r["type"] for r in records]
    assert types[0] == "SystemMessage" and types[-1] == "ResultMessage"
    tool_uses = [b for r in records if r["type"] == "AssistantMessage" for b in r["content"]]  # type: ignore[union-attr]
    writes = [b for b in tool_uses if b.get("name") == "Write"]
    assert writes and writes[0]["input"]["content"] == "hello Acme\n"
    results = [
        b for r in records if r["type"] == "UserMessage" for b in r["content"] if "tool_use_id" in b
    ]  # type: ignore[union-attr]
    assert any("File created successfully" in str(b["content"]) for b in results)
    assert all(r.outcome == "turn" for r in server.requests)


def test_background_subagent_second_result_is_read(tmp_path: Path, plugin: Path) -> None:
    (plugin / "agents").mkdir()
    (plugin / "agents" / "helper.md").write_text(
        "---\nname: helper\ndescription: helps\ntools: Write\n---\nYou are the helper.\n"
    )
    script = """
rules:
  - match: {agent: demo:helper}
    turns:
      - tools: [{write: {path: notes.md, content: "notes\\n"}}]
        usage: {input_tokens: 100, output_tokens: 10}
      - text: "helper done"
  - match: {command: demo:s1}
    turns:
      - tools: [{agent: {name: demo:helper, prompt: "help", background: true}}]
        usage: {input_tokens: 1000, output_tokens: 100}
      - text: "started"
      - text: "finished after the helper"
"""
    outcome, _, stage_dir = run_stage(tmp_path, plugin, script)
    assert outcome.status == "completed", outcome
    assert len(outcome.result_subtypes) == 2  # both results read, not just the first
    assert (tmp_path / "ws" / "notes.md").exists()
    assert outcome.usage.input_tokens >= 1100  # the subagent's tokens are counted
    assert trajectory(stage_dir)[-1]["type"] == "ResultMessage"
    assert outcome.final_text == "finished after the helper"


def test_max_turns_is_a_limit(tmp_path: Path, plugin: Path) -> None:
    script = """
rules:
  - match: {command: demo:s1}
    repeat_last: true
    turns:
      - tools: [{bash: "true"}]
"""
    outcome, _, _ = run_stage(tmp_path, plugin, script, max_turns=2)
    assert (outcome.status, outcome.limit) == ("limit", "turns"), outcome
    assert "max_turns (2)" in (outcome.error or "")


def test_budget_is_a_limit(tmp_path: Path, plugin: Path) -> None:
    script = """
rules:
  - match: {command: demo:s1}
    repeat_last: true
    turns:
      - tools: [{bash: "true"}]
        usage: {input_tokens: 200000, output_tokens: 10000}
"""
    outcome, _, _ = run_stage(tmp_path, plugin, script, max_budget_usd=0.5)
    assert (outcome.status, outcome.limit) == ("limit", "budget"), outcome
    assert outcome.cost_usd >= 0.5


def test_timeout_kills_the_cli_and_what_it_started(tmp_path: Path, plugin: Path) -> None:
    # Each command marks its natural end, 100 s on (within the Bash tool's own 120 s):
    # killed at the stage's 4 s, neither does; waited for, they would.
    marks = 'python3 -c \'import time; time.sleep(100); open("ended", "w")\''
    script = bash_script(f"{marks} & {marks}")
    outcome, _, _ = run_stage(tmp_path, plugin, script, timeout_s=4)
    assert (outcome.status, outcome.limit) == ("limit", "time"), outcome
    assert not (tmp_path / "ws" / "ended").exists()
    assert processes_mentioning(str(tmp_path / "agent")) == []


def test_hanging_model_hits_the_timeout(tmp_path: Path, plugin: Path) -> None:
    script = """
rules:
  - match: {command: demo:s1}
    turns:
      - fault: {hang: forever}
"""
    outcome, _, _ = run_stage(tmp_path, plugin, script, timeout_s=4)
    assert (outcome.status, outcome.limit) == ("limit", "time"), outcome
    assert processes_mentioning(str(tmp_path / "agent")) == []


def test_http_500_is_an_error_with_its_status(tmp_path: Path, plugin: Path) -> None:
    script = """
rules:
  - match: {command: demo:s1}
    turns:
      - fault: {http_status: 500}
"""
    outcome, server, _ = run_stage(
        tmp_path, plugin, script, extra_env={"CLAUDE_CODE_MAX_RETRIES": "0"}
    )
    assert outcome.status == "error", outcome
    assert outcome.api_error_status == 500
    assert outcome.infrastructure_error  # the retry hook sees it
    assert [r.status for r in server.requests if r.outcome == "fault"] == [500]


@pytest.mark.parametrize("fault", ["{malformed_sse: true}", "{disconnect: true}"])
def test_malformed_or_cut_stream_is_an_error(tmp_path: Path, plugin: Path, fault: str) -> None:
    script = f"""
rules:
  - match: {{command: demo:s1}}
    turns:
      - fault: {fault}
"""
    outcome, _, _ = run_stage(tmp_path, plugin, script, extra_env={"CLAUDE_CODE_MAX_RETRIES": "0"})
    assert outcome.status == "error", outcome
    assert outcome.error


def test_cli_killed_mid_stage_is_an_error(tmp_path: Path, plugin: Path) -> None:
    script = bash_script(HANG)
    killed: list[int] = []

    def killer() -> None:
        """Once the stage's `sleep` runs, SIGKILL the CLI itself (not its group)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            procs = processes_mentioning(str(tmp_path / "agent"))
            cli = [pid for pid, cmd in procs if "_bundled/claude" in cmd]
            if cli and any("time.sleep" in cmd for _, cmd in procs):
                os.kill(cli[0], signal.SIGKILL)
                killed.append(cli[0])
                return
            time.sleep(0.1)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    outcome, _, stage_dir = run_stage(tmp_path, plugin, script, timeout_s=90)
    thread.join()
    assert killed, "the CLI was never seen running"
    assert outcome.status == "error", outcome
    assert outcome.limit is None
    assert "exit code" in (outcome.error or "") or "-9" in (outcome.error or "")
    assert processes_mentioning(str(tmp_path / "agent")) == []
    assert (stage_dir / "trajectory.jsonl").exists()


def test_abort_ends_the_stage_as_interrupted(tmp_path: Path, plugin: Path) -> None:
    script = bash_script(HANG)
    abort = Abort()
    timer = threading.Timer(3.0, abort.set)
    timer.start()
    try:
        outcome, _, _ = run_stage(tmp_path, plugin, script, abort=abort, timeout_s=90)
    finally:
        timer.cancel()
    assert outcome.status == "interrupted", outcome
    assert processes_mentioning(str(tmp_path / "agent")) == []


def test_abort_before_the_cli_starts_still_ends_it(tmp_path: Path, plugin: Path) -> None:
    abort = Abort()
    abort.set()
    outcome, server, _ = run_stage(tmp_path, plugin, bash_script(HANG), abort=abort, timeout_s=90)
    assert outcome.status == "interrupted", outcome
    assert server.requests == []
    assert processes_mentioning(str(tmp_path / "agent")) == []


def test_package_managers_work_offline_only_where_the_sandbox_has_no_network(
    tmp_path: Path,
) -> None:
    user = {"PATH": "/bin", "npm_config_offline": "false", "PIP_INDEX_URL": "http://x"}
    boxed = agent_environment(user, private_root=tmp_path / "a", endpoint={}, offline=True)
    assert boxed["npm_config_offline"] == "true" and boxed["PIP_NO_INDEX"] == "1"
    assert boxed["UV_OFFLINE"] == "1" and "PIP_INDEX_URL" not in boxed
    host = agent_environment(user, private_root=tmp_path / "b", endpoint={}, offline=False)
    assert not set(OFFLINE) & set(host)
    # The host reaches what it reaches; bwrap and docker reach nothing unless told.
    assert not offline(SandboxConfig("local"))
    assert offline(SandboxConfig("bwrap"))
    assert not offline(SandboxConfig("docker", SandboxOptions(network=True)))


def test_agent_environment_is_an_allow_list(tmp_path: Path) -> None:
    user = {
        "PATH": "/bin",
        "LC_ALL": "C.UTF-8",
        "HTTPS_PROXY": "http://proxy:3128",
        "GITHUB_TOKEN": "ghp_x",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "ANTHROPIC_API_KEY": "sk-user",
        "HOME": "/root",
    }
    proxy = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "run-token"}
    real = agent_environment(user, private_root=tmp_path / "a", endpoint=proxy, offline=False)
    # The endpoint's per-run token, never the user's key.
    assert real["ANTHROPIC_API_KEY"] == "run-token" and real["HTTPS_PROXY"] == "http://proxy:3128"
    assert real["LC_ALL"] == "C.UTF-8" and real["HOME"] == str(tmp_path / "a" / "home")
    assert "GITHUB_TOKEN" not in real and "AWS_SECRET_ACCESS_KEY" not in real
    assert (tmp_path / "a" / "run").stat().st_mode & 0o777 == 0o700
    stub = agent_environment(
        user,
        private_root=tmp_path / "b",
        endpoint={"ANTHROPIC_BASE_URL": "http://x"},
        offline=False,
    )
    assert "ANTHROPIC_API_KEY" not in stub  # the user's key never goes to the stub
    assert stub["ANTHROPIC_BASE_URL"] == "http://x"
