"""The `mcp` grader kind: loaded from a stage's YAML, graded through `grade_files` in a
real sandbox (local and bubblewrap) on a real mcp-package server and on broken ones."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from ci_evals.config import yaml_source
from ci_evals.errors import UserError
from ci_evals.grade_state.files import grade_files
from ci_evals.grading.config import STAGE_KEYS, StageGrading, load_stage_grading
from ci_evals.grading.kinds.mcp import McpGrader
from ci_evals.report.verify import verdict_problems
from ci_evals.results.criteria import StageVerdict
from ci_evals.results.verdict import ScoringPolicy
from ci_evals.sandbox.base import SandboxConfig
from ci_evals.sandbox.bwrap import available as bwrap_available
from tests.paths import DATA

DATA = DATA / "mcp"
ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


def grading(text: str, tmp_path: Path) -> StageGrading:
    fields = yaml_source.loads(text, "ci-evals.yaml").mapping(STAGE_KEYS)
    return load_stage_grading(fields, suite_dir=tmp_path, plugin_dir=tmp_path, within=tmp_path)


def workspace(tmp_path: Path, server: str) -> Path:
    folder = tmp_path / "ws"
    (folder / "app").mkdir(parents=True)
    shutil.copy(DATA / server, folder / "app" / "server.py")
    return folder


def grade(g: StageGrading, folder: Path, out: Path, sandbox: str) -> StageVerdict:
    """Grade `folder` with the mcp grader in a sandbox of kind `sandbox`."""
    return grade_files(
        g,
        folder,
        ScoringPolicy(),
        trajectory=None,
        env=ENV,
        out_dir=out,
        sandbox=SandboxConfig(sandbox),
    )


# The mcp package's server imports pydantic and starlette before it answers: on a
# loaded machine, from a fresh virtualenv (no bytecode yet), that alone can pass the
# grader's 10 s default wait. A correctness test must not depend on speed.
SLOW_START_S = 120

STAGE = f"""
mcp:
  - id: server
    command: [{sys.executable}, server.py]
    cwd: app
    protocol: 2025-06-18
    timeout_s: {SLOW_START_S}
    weights: {{tools-call: 3}}
    tool: add
    arguments: {{a: 2, b: 40}}
"""


@pytest.mark.parametrize("sandbox", ["local", "bwrap"])
def test_a_real_server_passes_its_stage(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and (reason := bwrap_available()) is not None:
        pytest.fail(reason)
    verdict = grade(
        grading(STAGE, tmp_path), workspace(tmp_path, "sdk_server.py"), tmp_path / "out", sandbox
    )
    assert verdict.verdict == "passed", verdict.reason
    [result] = verdict.graders
    assert result.grader == "mcp:server"
    by_id = {c.id: c for c in result.criteria}
    assert by_id["server/initialize"].detail.startswith(
        "MCP 2025-06-18: protocolVersion 2025-06-18"
    )
    assert (
        'add({"a":2,"b":40}) -> ' in by_id["server/tools-call"].detail
        and "42" in by_id["server/tools-call"].detail
    )
    assert by_id["server/tools-call"].weight == 3.0
    # What the SDK gets wrong is reported, advisory: it does not fail the stage.
    assert {c.id for c in result.criteria if not c.passed} == {
        "server/parse-error",
        "server/invalid-request",
    }
    assert all(c.advisory for c in result.criteria if not c.passed)
    assert all(c.source == "mcp" for c in result.criteria)
    # protocol: named, so whether it is served is judged; tool: and arguments: named,
    # so the call must succeed.
    assert by_id["server/serves-revision"].passed and not by_id["server/serves-revision"].advisory
    assert by_id["server/tools-call-success"].passed
    assert not by_id["server/tools-call-success"].advisory
    # Binary score over the required criteria, weighted: all 10 (weight 12) passed.
    assert verdict.binary_score == 100.0
    assert result.raw_output is not None
    log = Path(result.raw_output.path or "").read_text()
    assert "== parse-error: FAIL (advisory)" in log
    # The verdict agrees with itself (what `report` and `grade` check before trusting it).
    assert verdict_problems(verdict) == []


def broken(mode: str, tmp_path: Path) -> StageGrading:
    """The stdlib server in `mode`, with parse-error required."""
    return grading(
        f"""
mcp:
  - id: srv
    command: [{sys.executable}, server.py, {mode}]
    cwd: app
    required: [parse-error]
""",
        tmp_path,
    )


def test_a_broken_server_fails_its_stage_and_its_stderr_is_kept(tmp_path: Path) -> None:
    folder = workspace(tmp_path, "stdlib_server.py")
    verdict = grade(broken("bad-content", tmp_path), folder, tmp_path / "out", "local")
    assert verdict.verdict == "failed"
    assert "srv/tools-call" in verdict.reason
    # Over the 9 required sub-tests (invalid-request stays advisory): 8 passed.
    assert verdict.binary_score == pytest.approx(100 * 8 / 9)
    verdict = grade(broken("crash-on-malformed", tmp_path), folder, tmp_path / "out2", "local")
    assert verdict.verdict == "failed"
    log = (tmp_path / "out2" / "mcp-srv.log").read_text()
    assert "== parse-error: FAIL (required)" in log
    assert "Traceback (most recent call last)" in log  # the server's own stderr


def test_the_stage_policy_can_make_more_sub_tests_advisory(tmp_path: Path) -> None:
    g = grading(
        f"""
mcp:
  - id: srv
    command: [{sys.executable}, server.py, bad-content]
    cwd: app
scoring: {{advisory: [srv/tools-call]}}
""",
        tmp_path,
    )
    verdict = grade(g, workspace(tmp_path, "stdlib_server.py"), tmp_path / "out", "local")
    assert verdict.verdict == "passed", verdict.reason


def test_a_missing_cwd_is_the_agent_s_failure(tmp_path: Path) -> None:
    g = grading(
        f"mcp:\n  - {{id: srv, command: [{sys.executable}, server.py], cwd: nowhere}}\n", tmp_path
    )
    verdict = grade(g, tmp_path, tmp_path / "out", "local")
    assert verdict.verdict == "failed"
    assert "not run: nowhere" in verdict.graders[0].criteria[0].detail


def test_the_stateless_revision_is_checked_when_named(tmp_path: Path) -> None:
    g = grading(
        f"mcp:\n  - {{id: s, command: [{sys.executable}, server.py], cwd: app,"
        f" protocol: '2026-07-28', timeout_s: {SLOW_START_S}}}\n",
        tmp_path,
    )
    verdict = grade(g, workspace(tmp_path, "sdk_server.py"), tmp_path / "out", "local")
    ids = [c.id for c in verdict.graders[0].criteria]
    assert ids[:5] == [
        "s/discover",
        "s/serves-revision",
        "s/version-negotiation",
        "s/meta-required",
        "s/notification-no-reply",
    ]
    assert "s/cache-hints" in ids
    assert verdict.verdict == "passed", verdict.reason


def test_a_tool_error_fails_the_stage_only_for_a_named_call(tmp_path: Path) -> None:
    folder = workspace(tmp_path, "stdlib_server.py")
    command = f"command: [{sys.executable}, server.py, tool-error], cwd: app"
    plain = grading(f"mcp:\n  - {{id: s, {command}}}\n", tmp_path)
    assert grade(plain, folder, tmp_path / "out", "local").verdict == "passed"
    named = grading(
        f"mcp:\n  - {{id: s, {command}, tool: add, arguments: {{a: 1, b: 2}}}}\n", tmp_path
    )
    verdict = grade(named, folder, tmp_path / "out2", "local")
    assert verdict.verdict == "failed"
    assert "s/tools-call-success" in verdict.reason


def test_without_protocol_the_negotiated_revision_is_checked(tmp_path: Path) -> None:
    folder = workspace(tmp_path, "stdlib_server.py")
    command = f"command: [{sys.executable}, server.py, negotiates-older], cwd: app"
    plain = grading(f"mcp:\n  - {{id: s, {command}}}\n", tmp_path)
    verdict = grade(plain, folder, tmp_path / "out", "local")
    assert verdict.verdict == "passed", verdict.reason
    init = next(c for c in verdict.graders[0].criteria if c.id == "s/initialize")
    assert init.detail.startswith("MCP 2025-06-18: ")
    named = grading(f"mcp:\n  - {{id: s, {command}, protocol: '2025-11-25'}}\n", tmp_path)
    verdict = grade(named, folder, tmp_path / "out2", "local")
    assert verdict.verdict == "failed"
    assert "s/serves-revision" in verdict.reason


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("- {id: a, command: python3 server.py}", "command must be a list"),
        ("- {id: a, command: [x], protocol: 2020-01-01}", "unknown MCP revision"),
        ("- {id: a, command: [x], advisory: [tools-lsit]}", "unknown sub-test 'tools-lsit'"),
        ("- {id: a, command: [x], weights: {nope: 1}}", "unknown key 'nope'"),
        ("- {id: a, command: [x], unknown_tool: maybe}", "must be one of"),
        ("- {id: a, command: [x], arguments: [1]}", "must be a mapping"),
        ("- {id: a, command: [x], cwd: ../up}", "stay inside it"),
        ("- {id: a, command: [x]}\n  - {id: a, command: [y]}", "duplicate mcp grader id 'a'"),
        ("- {id: a, command: [x], shell: true}", "unknown key 'shell'"),
    ],
)
def test_bad_config_is_one_line_with_file_and_line(tmp_path: Path, body: str, said: str) -> None:
    with pytest.raises(UserError) as caught:
        grading(f"mcp:\n  {body}\n", tmp_path)
    assert said in str(caught.value) or said in (caught.value.hint or "")
    assert caught.value.file == "ci-evals.yaml" and caught.value.line is not None


def test_defaults(tmp_path: Path) -> None:
    [g] = grading("mcp:\n  - {id: a, command: [python3, s.py]}\n", tmp_path).graders
    assert isinstance(g, McpGrader)
    assert (g.protocol, g.cwd, g.timeout_s, g.unknown_tool_is_error_result) == (
        "2025-11-25",
        ".",
        10.0,
        True,
    )
    assert g.advisory == {"parse-error", "invalid-request", "tools-call-success"}
    assert g.sandboxed and g.writes
