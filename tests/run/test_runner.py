"""The runner: stages N..last per scenario, real CLI on the stub model, results.json."""

from __future__ import annotations

import asyncio
import io
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ci_evals.agents import Progress, StageRequest
from ci_evals.agents.registry import get_agent
from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.results.criteria import StageVerdict
from ci_evals.results.model import RunResult, ScenarioResult, StageResult, read_results
from ci_evals.results.summary import exit_code
from ci_evals.run.progress import LiveProgress, summary_table
from ci_evals.run.runner import RunListener, Runner, RunPlan, StageContext, StageHook
from ci_evals.suite.load import load_suite
from tests.run_helpers import default_rules, make_suite, processes_mentioning


class Recorder(RunListener):
    """What the listener is told as each stage finishes. (results.json is written at
    the writer's pace, not at every stage: `results.writer`, tests/results/test_writer.py.)"""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.seen: list[tuple[str, int, str]] = []

    def stage_finished(self, scenario: str, stage: StageResult) -> None:
        self.seen.append((scenario, stage.number, stage.status))


def run(
    tmp_path: Path,
    *,
    from_stage: int = 1,
    jobs: int = 1,
    keep_workspace: bool = False,
    after_stage: StageHook | None = None,
    **suite_args: object,
) -> tuple[RunResult, Path, Recorder, StubServer]:
    suite_file, stub = make_suite(tmp_path / "suite", **suite_args)  # type: ignore[arg-type]
    suite = load_suite(suite_file)
    run_dir = tmp_path / "run"
    recorder = Recorder(run_dir)
    environ = {**os.environ, "CLAUDE_CODE_MAX_RETRIES": "0"}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    with StubServer(load_script(stub)) as server:
        plan = RunPlan(
            suite=suite,
            from_stage=suite.stage(from_stage),
            scenarios=suite.scenarios,
            run_dir=run_dir,
            run_id="test-run",
            model=None,
            environ=environ,
            endpoint=server.cli_env(),
            jobs=jobs,
            keep_workspace=keep_workspace,
            temp_root=tmp_path / "tmp",
        )
        runner = Runner(plan, get_agent("claude"), recorder, after_stage=after_stage)
        result = asyncio.run(runner.run())
    return result, run_dir, recorder, server


def statuses(result: RunResult, scenario: str) -> list[str]:
    return [s.status for s in next(sc for sc in result.scenarios if sc.id == scenario).stages]


@pytest.mark.slow
def test_from_stage_1_runs_every_stage_and_records_it(tmp_path: Path) -> None:
    result, run_dir, recorder, _ = run(tmp_path)

    assert result.status == "completed" and exit_code(result) == 0
    assert statuses(result, "acme") == ["completed"] * 5
    for stage in result.scenarios[0].stages:
        assert [p.path for p in stage.produced] == [f"out{stage.number}.md"]
        assert stage.produced[0].change == "added" and len(stage.produced[0].sha256) == 64
        produced = run_dir / str(stage.produced_dir) / f"out{stage.number}.md"
        assert produced.read_text() == f"stage {stage.number} for Acme Corp\n"
        assert (run_dir / str(stage.trajectory)).stat().st_size > 0
        assert (run_dir / str(stage.stderr)).exists()
        assert stage.turns and stage.duration_s and stage.session_id
    # results.json was rewritten after every stage, not only at the end.
    assert recorder.seen == [("acme", k, "completed") for k in range(1, 6)]
    on_disk = read_results(run_dir)  # and the file says so at the end
    assert [s.status for s in on_disk.scenarios[0].stages] == ["completed"] * 5
    assert read_results(run_dir) == result
    assert list((tmp_path / "tmp").iterdir()) == []  # the workspace is gone
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.slow
def test_from_stage_4_lays_fixtures_and_runs_only_4_and_5(tmp_path: Path) -> None:
    result, _, _, server = run(tmp_path, from_stage=4, keep_workspace=True)

    assert [s.number for s in result.scenarios[0].stages] == [4, 5]
    assert statuses(result, "acme") == ["completed", "completed"]
    assert result.from_stage == 4
    workspace = Path(str(result.scenarios[0].workspace)) / "workspace"
    assert sorted(p.name for p in workspace.glob("out*.md")) == [f"out{k}.md" for k in range(1, 6)]
    assert (workspace / "out1.md").read_text() == "fixture 1\n"
    # Fixtures are the starting state, not something stage 4 produced.
    assert [p.path for p in result.scenarios[0].stages[0].produced] == ["out4.md"]
    assert {r.command for r in server.requests} == {"demo:s4", "demo:s5"}


@pytest.mark.slow
def test_an_error_stops_its_scenario_only(tmp_path: Path) -> None:
    rules = (
        "  - match: {command: demo:s2, prompt_contains: Bad Corp}\n"
        "    turns:\n      - fault: {http_status: 500}\n" + default_rules()
    )
    result, _, _, _ = run(tmp_path, scenarios=("good", "bad"), rules=rules, jobs=2)

    assert statuses(result, "good") == ["completed"] * 5
    assert statuses(result, "bad") == ["completed", "error", "skipped", "skipped", "skipped"]
    bad = result.scenarios[1].stages
    assert "stage 2 (s2) ended with error" in str(bad[2].error)
    assert exit_code(result) == 1


@pytest.mark.slow
def test_a_limit_fails_the_stage_and_skips_the_rest(tmp_path: Path) -> None:
    rules = (
        "  - match: {command: demo:s1}\n    repeat_last: true\n"
        '    turns:\n      - tools: [{bash: "true"}]\n' + default_rules()
    )
    result, _, _, _ = run(tmp_path, rules=rules, limits="{max_turns: 2}")

    stages = result.scenarios[0].stages
    assert (stages[0].status, stages[0].limit_hit) == ("limit", "turns")
    assert [s.status for s in stages[1:]] == ["skipped"] * 4
    assert exit_code(result) == 1


@pytest.mark.slow
def test_no_stage_starts_once_the_run_budget_is_spent(tmp_path: Path) -> None:
    usage = "        usage: {input_tokens: 100000, output_tokens: 10000}\n"
    rules = default_rules().replace(
        '      - text: "stage 1 done"\n', '      - text: "stage 1 done"\n' + usage
    )
    result, _, _, server = run(
        tmp_path, rules=rules, budget_usd=0.01, scenarios=("first", "second"), jobs=1
    )

    # The running stage is capped by what is left of the run budget...
    first = result.scenarios[0].stages
    assert (first[0].status, first[0].limit_hit) == ("limit", "budget")
    assert (first[0].cost_usd or 0) > 0.01
    # ...and once it is spent, nothing new starts, in any scenario.
    assert statuses(result, "second") == ["skipped"] * 5
    assert "run budget (0.01 USD) is spent" in str(result.scenarios[1].stages[0].error)
    assert len(server.requests) == 2  # stage 1 of the first scenario only
    assert result.total_cost_usd == first[0].cost_usd


def test_live_progress_redraws_one_line_per_scenario(tmp_path: Path) -> None:
    suite_file, _ = make_suite(tmp_path / "suite", scenarios=("acme", "globex"))
    suite = load_suite(suite_file)
    plan = RunPlan(suite, suite.stage(4), suite.scenarios, tmp_path / "run", "r1", None, {})
    stages = [StageResult(number=4, name="s4"), StageResult(number=5, name="s5")]
    result = RunResult(
        run_id="r1",
        tool_version="0",
        started_at=datetime.now(timezone.utc),
        from_stage=4,
        suite_file=str(suite_file),
        scenarios=[ScenarioResult(id=s, stages=stages) for s in ("acme", "globex")],
    )
    out = io.StringIO()
    live = LiveProgress(out, min_interval_s=0)
    live.run_started(plan, result)
    live.stage_started("acme", stages[0])
    live.stage_progress("acme", stages[0], Progress(turns=3, cost_usd=0.25, last_tool="Write"))
    stages[0].status, stages[0].turns, stages[0].cost_usd, stages[0].duration_s = (
        "completed", 3, 0.25, 2.0,
    )  # fmt: skip
    live.stage_finished("acme", stages[0])

    text = out.getvalue()
    assert "\x1b[2F" in text  # moved up over the two scenario lines to redraw them
    assert "acme: stage 4 s4 turns=3 cost=$0.2500" in text and "[Write]" in text
    assert "acme: stage 4 s4 starting" not in text  # a running line from the start
    assert text.endswith(
        "\x1b[2Kacme: stage 4 s4 ok turns=3 cost=$0.2500 2s\n\x1b[2Kglobex: waiting\n"
    )
    table = summary_table(result).splitlines()
    assert table[0].split() == [
        "scenario", "stage", "status", "criteria", "mean", "turns", "cost", "time", "files",
    ]  # fmt: skip
    assert table[2].split() == ["acme", "4", "s4", "ok", "-", "-", "3", "$0.2500", "2.0s", "0"]


@pytest.mark.slow
def test_after_stage_hook_can_run_a_reviewer_and_set_the_verdict(tmp_path: Path) -> None:
    rules = (
        "  - name: reviewer\n    match: {prompt_contains: REVIEW-OUT5}\n    turns:\n"
        '      - text: \'[{"criterion": "written", "score": 1}]\'\n' + default_rules()
    )

    async def review(ctx: StageContext) -> None:
        request = StageRequest(
            prompt=f"REVIEW-OUT5 {ctx.workspace.root / 'out5.md'}",
            cwd=ctx.workspace.root,
            plugin_dir=ctx.workspace.plugin,
            env=ctx.env_for(ctx.workspace.parent / "reviewer"),
            trajectory_path=ctx.stage_dir / "review.jsonl",
            stderr_path=ctx.stage_dir / "review.stderr.log",
            timeout_s=60,
        )
        outcome = await ctx.agent.run_stage(request, abort=ctx.abort)
        ctx.result.grading = StageVerdict(
            verdict="passed", reason=outcome.final_text or "", graders=(),
            checklist_all_passed=True, analytic_mean=None, analytic_threshold=3.0,
            binary_score=100.0,
        )  # fmt: skip
        ctx.result.status = "passed" if '"score": 1' in (outcome.final_text or "") else "failed"

    result, run_dir, _, server = run(tmp_path, from_stage=5, rules=rules, after_stage=review)

    stage = result.scenarios[0].stages[0]
    assert stage.status == "passed" and exit_code(result) == 0
    assert stage.grading is not None
    assert stage.grading.reason == '[{"criterion": "written", "score": 1}]'
    assert read_results(run_dir).scenarios[0].stages[0].status == "passed"
    assert (run_dir / "acme" / "5-s5" / "review.jsonl").exists()
    assert [r.rule for r in server.requests][-1] == "reviewer"


@pytest.mark.slow
def test_a_crash_in_ci_evals_errs_the_stage_not_the_run(tmp_path: Path) -> None:
    async def crash(ctx: StageContext) -> None:
        if ctx.scenario.id == "bad":
            raise RuntimeError("grader blew up")

    result, _, _, _ = run(
        tmp_path, from_stage=4, scenarios=("good", "bad"), jobs=2, after_stage=crash
    )
    assert statuses(result, "good") == ["completed", "completed"]
    assert statuses(result, "bad") == ["error", "skipped"]
    assert result.scenarios[1].stages[0].error == "ci-evals failed: RuntimeError: grader blew up"
    assert result.status == "completed"


@pytest.mark.slow
def test_a_stage_that_changes_the_plugin_copy_is_reported(tmp_path: Path) -> None:
    rules = (
        "  - match: {command: demo:s5}\n    turns:\n"
        '      - tools: [{bash: "echo changed >> commands/s5.md"}]\n'
        "      - text: done\n"
    )
    result, run_dir, _, _ = run(tmp_path, from_stage=5, rules=rules)

    assert statuses(result, "acme") == ["completed"]
    report = json.loads((run_dir / "acme" / "5-s5" / "plugin-changes.json").read_text())
    assert [(c["path"], c["change"]) for c in report] == [("commands/s5.md", "modified")]
    assert "changed" not in (tmp_path / "suite" / "plugin" / "commands" / "s5.md").read_text()


@pytest.mark.slow
def test_each_scenario_starts_from_its_own_fixtures(tmp_path: Path) -> None:
    result, _, _, _ = run(
        tmp_path,
        from_stage=5,
        keep_workspace=True,
        scenarios=("acme", "globex"),
        own_fixtures=("globex",),
    )

    assert statuses(result, "acme") == statuses(result, "globex") == ["completed"]
    laid = {
        scenario.id: (Path(str(scenario.workspace)) / "workspace" / "out4.md").read_text()
        for scenario in result.scenarios
    }
    assert laid == {"acme": "fixture 4\n", "globex": "globex fixture 4\n"}
