"""A graded stage is never left `completed`: interrupted after the agent, before its graders.

The run is real (the claude CLI on the stub model, the grading hook); the
Ctrl-C lands at the one moment that used to leave a stage `completed` with no
verdict: the agent backend has just returned a completed stage, and the
grading hook has not started. A thin `Agent` around the real backend presses
it, the way `RetryingAgent` wraps a backend. Then the real `ci-evals report`
reads the file.
"""

from __future__ import annotations

import asyncio
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from ci_evals.agents import Abort, Agent, Progress, StageOutcome, StageRequest
from ci_evals.agents.registry import get_agent
from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.main import main
from ci_evals.report.verify import problems
from ci_evals.results.model import read_results
from ci_evals.run.grading_hook import GradingHook
from ci_evals.run.runner import Runner, RunPlan
from ci_evals.suite.load import load_suite
from tests.grading.review_suite import make_review_suite

GOOD = '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 4}]'


class CtrlCWhenTheAgentIsDone:
    """The real backend; the runner is interrupted the moment a stage has completed."""

    name = "claude"

    def __init__(self, inner: Agent) -> None:
        self.inner = inner
        self.runner: Runner | None = None

    async def run_stage(
        self,
        request: StageRequest,
        *,
        abort: Abort,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StageOutcome:
        outcome = await self.inner.run_stage(request, abort=abort, on_progress=on_progress)
        assert outcome.status == "completed", outcome.error
        assert self.runner is not None
        self.runner.interrupt()
        return outcome


@pytest.mark.slow
def test_interrupted_before_grading_is_an_error_never_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    suite_file, stub = make_review_suite(tmp_path / "suite", {"good": GOOD})
    suite = load_suite(suite_file)
    run_dir = tmp_path / "run"
    agent = CtrlCWhenTheAgentIsDone(get_agent("claude"))
    with StubServer(load_script(stub)) as server:
        plan = RunPlan(
            suite=suite,
            from_stage=suite.stage(1),
            scenarios=suite.scenarios,
            run_dir=run_dir,
            run_id="not-graded",
            model=None,
            environ={**os.environ, "CLAUDE_CODE_MAX_RETRIES": "0"},
            endpoint=server.cli_env(),
        )
        runner = Runner(plan, agent, after_stage=GradingHook())
        agent.runner = runner
        asyncio.run(runner.run())
    assert not any(r.rule.startswith("review") for r in server.requests)  # never graded

    result = read_results(run_dir)
    s1, s2 = result.scenarios[0].stages
    assert result.status == "interrupted"
    assert (s1.status, s1.graded, s1.grading) == ("error", True, None)
    assert s1.error == "not graded: the run was interrupted before grading"
    assert (s2.status, s2.graded) == ("skipped", False)
    assert problems(result) == []  # a truthful file, not a tampered one

    junit, markdown = tmp_path / "junit.xml", tmp_path / "summary.md"
    assert main(["report", str(run_dir), "--junit", str(junit), "--markdown", str(markdown)]) == 1
    root = ET.fromstring(junit.read_bytes())
    error = root.find("./testsuite/testcase[@name='1 s1']/error")
    assert error is not None and "not graded" in error.attrib["message"]
    assert markdown.read_text(encoding="utf-8").startswith("## ci-evals: interrupted\n")
