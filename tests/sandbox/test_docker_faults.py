"""The Docker engine failing under a running stage (issue 34), through a real socket
proxy (`tests/docker_proxy.py`) between `ci-evals run` and the real engine: a
stalled, dropped or blipping engine ends the stage as an `error` naming it, the
container removed when the engine answers again or named as left to `ci-evals
gc`; SIGTERM during a stall still ends the run at once; and a container the
OOM killer ended is named as such, not left to fail every later tool call."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from docker.errors import APIError

from ci_evals.results.model import read_results
from ci_evals.sandbox.base import SandboxLost, SandboxSpec
from ci_evals.sandbox.docker import engine
from ci_evals.sandbox.docker.engine import DockerSandbox
from tests.docker_helpers import containers
from tests.docker_proxy import DockerProxy
from tests.paths import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
SLEEP = "sleep 97"  # what the agent runs when the engine fails under it


def make_suite(root: Path, scenarios: str = "") -> Path:
    """A loop agent in the docker sandbox whose first tool call runs `SLEEP`."""
    (root / "plugin" / ".claude-plugin").mkdir(parents=True)
    (root / "plugin" / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "p"}))
    stub = {
        "rules": [
            {
                "match": {"prompt_contains": "wait for it"},
                "turns": [
                    {"tools": [{"tool": {"name": "run_command", "input": {"command": SLEEP}}}]},
                    {"tools": [{"tool": {"name": "final_submit", "input": {"summary": "ok"}}}]},
                ],
            }
        ]
    }
    (root / "stub.yaml").write_text(json.dumps(stub))
    suite = root / "ci-evals.yaml"
    suite.write_text(
        textwrap.dedent(
            """\
            version: 1
            plugin: plugin
            stage_map: null
            agent: {kind: loop, max_steps: 5}
            sandbox: {kind: docker, image: python-mcp}
            limits: {timeout_s: 300}
            {scenarios}
            stages:
              - name: build
                prompt: wait for it
                checks:
                  - { files: "nothing-here", count: 1 }
            """
        ).replace("{scenarios}", scenarios)
    )
    return suite


def start_run(root: Path, proxy: DockerProxy, scenarios: str = "") -> subprocess.Popen[str]:
    suite = make_suite(root, scenarios)
    argv = [sys.executable, "-m", "ci_evals", "run", "--suite", str(suite)]
    argv += ["--model", f"stub:{root / 'stub.yaml'}", "--out", str(root / "out")]
    return subprocess.Popen(
        argv, cwd=REPO, env=proxy.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_the_command(proc: subprocess.Popen[str]) -> str:
    """The run's container, once the agent's `SLEEP` runs in it (seen on the real engine)."""
    owner = {engine.LABEL_OWNER: engine.owner_label(proc.pid)}
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        for found in containers(**owner):
            try:
                with_ps = engine.client().api.top(found)
            except APIError:  # not started yet, or removed meanwhile
                continue
            if any(SLEEP in " ".join(row) for row in with_ps.get("Processes") or []):
                return found
        time.sleep(0.2)


def the_stage(root: Path) -> tuple[str, str]:
    result = read_results(root / "out")
    [stage] = result.scenarios[0].stages
    return stage.status, stage.error or ""


def gone(container: str) -> bool:
    return container not in containers(**{engine.LABEL: "1"})


def gc(proxy: DockerProxy) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "gc"],
        cwd=REPO,
        env=proxy.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """Its output once it ended; a hang guard, not a timing assertion: killed (and
    the test failed) past `timeout`, so a hung run does not outlive the test."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise


@pytest.mark.parametrize(
    ("fault", "fate"),
    [
        ("stall", "is left"),  # hung: no answer by the call's deadline, nor the removal's
        ("drop", "is left"),  # stopped: every connection closed
        # More dropped connections than one call tries (calls._BACKOFF_S), fewer than
        # the removal's: lost under the stage, back for the clean-up.
        ("blip", "was removed"),
    ],
)
@pytest.mark.usefixtures("gc_alone")  # the container it leaves is its own gc's
def test_a_lost_engine_ends_the_stage_in_one_line_naming_it_and_its_container(
    tmp_path: Path, docker_image: str, fault: str, fate: str
) -> None:
    with DockerProxy(tmp_path) as proxy:
        proc = start_run(tmp_path, proxy)
        container = wait_for_the_command(proc)
        {"stall": proxy.stall, "drop": proxy.drop, "blip": lambda: proxy.blip(6)}[fault]()
        # The stage's bound is the engine call's deadline (calls.CALL_S); the SDK's
        # default let a stall run 6-10 minutes.
        out, err = finish(proc, 240)
        status, error = the_stage(tmp_path)
        assert (proc.returncode, status) == (1, "error"), (out, err)
        assert f"the Docker engine at {proxy.url} did not answer" in error, error
        assert f"its container {container[:12]} {fate}" in error, error
        assert "Traceback" not in err
        # On the console: the stage's line with that reason.
        assert [line for line in (out + err).splitlines() if proxy.url in line], (out, err)
        if fate == "is left":
            assert "ci-evals gc" in error and not gone(container)
            proxy.resume()
            gc(proxy)
        assert gone(container)


@pytest.mark.usefixtures("gc_alone")  # the container it leaves is its own gc's
def test_after_a_lost_engine_each_later_sandbox_asks_it_once_briefly(
    tmp_path: Path, docker_image: str
) -> None:
    with DockerProxy(tmp_path) as proxy:
        proc = start_run(tmp_path, proxy, "scenarios: [{id: first}, {id: second}]")
        container = wait_for_the_command(proc)
        proxy.stall()
        said = finish(proc, 240)
        result = read_results(tmp_path / "out")
        errors = {s.id: s.stages[0].error or "" for s in result.scenarios}
        assert proc.returncode == 1, said
        assert errors["first"].endswith(
            f"its container {container[:12]} is left: "
            f"`ci-evals gc` removes it once the engine at {proxy.url} answers"
        ), errors
        # Not another call's deadline (calls.CALL_S) per stage still to come: one ping.
        assert errors["second"].startswith(
            f"the Docker engine at {proxy.url} did not answer a ping (it failed an earlier call)"
        ), errors
        proxy.resume()
        gc(proxy)
        assert gone(container)


@pytest.mark.usefixtures("gc_alone")  # the container it leaves is its own gc's
def test_sigterm_during_a_stall_ends_the_run_interrupted(tmp_path: Path, docker_image: str) -> None:
    with DockerProxy(tmp_path) as proxy:
        proc = start_run(tmp_path, proxy)
        container = wait_for_the_command(proc)
        proxy.stall()
        time.sleep(1.0)  # a poll of the exec is now waiting on the engine
        proc.send_signal(signal.SIGTERM)
        # The removal tries for calls.REMOVE_S, a poll for calls.POLL_S at a time.
        out, err = finish(proc, 60)
        assert proc.returncode == 130, (out, err)
        assert "Traceback" not in err
        result = read_results(tmp_path / "out")
        assert result.status == "interrupted"
        assert result.scenarios[0].stages[0].status == "error"
        # The container could not be removed: one line says so, and where.
        left = [line for line in err.splitlines() if container[:12] in line]
        assert len(left) == 1 and proxy.url in left[0] and "ci-evals gc" in left[0], err
        proxy.resume()
        gc(proxy)
        assert gone(container)


def test_a_container_the_oom_killer_ended_is_named_and_runs_nothing_more(
    tmp_path: Path, docker_image: str
) -> None:
    # A tmpfs /tmp is the container's memory: filling it past the limit leaves
    # nothing the OOM killer can free but the container's own init.
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = SandboxSpec(writable=(ws,), memory_bytes=64 << 20, tmp_bytes=1 << 30)
    with DockerSandbox(spec, image=docker_image) as box:
        container = box.container_id
        with pytest.raises(SandboxLost) as first:
            box.exec(
                ["sh", "-c", "head -c 200000000 /dev/zero > /tmp/fill"], cwd=ws, env=ENV, timeout=60
            )
        said = str(first.value)
        assert "memory limit (64 MiB)" in said and "OOMKilled" in said, said
        assert f"its container {container[:12]} was removed" in said, said
        with pytest.raises(SandboxLost) as later:  # every later call: the same line
            box.exec(["true"], cwd=ws, env=ENV, timeout=30)
        assert str(later.value) == said
        assert box.memory_killed == 64 << 20
    assert gone(container)
