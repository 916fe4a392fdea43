"""A tiny real plugin whose stage 1 has a reviewer, for grading tests on the real CLI.

Suite `demo`: stage `s1` (`/demo:s1 {case}`) writes `out1.md`; it has a
`files` check and a reviewer (`agents/review.md`) graded against two rubrics,
`written` (checklist) and `quality` (analytic). Stage `s2` writes `out2.md`
and has no graders. Each scenario is a `case`; the stub's reviewer rule for
that case answers with the scripted final message, so one run gives one
verdict per case.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ci_evals.agents import Agent
from ci_evals.agents.registry import get_agent
from ci_evals.endpoints.stub_model import StubServer, load_script
from ci_evals.results.model import RunResult
from ci_evals.run.grading_hook import GradingHook
from ci_evals.run.runner import Runner, RunPlan
from ci_evals.suite.load import load_suite

REVIEW_PROMPT = (
    "Read {plugin}/agents/review.md for your instructions. "
    "Review out1.md for case <{case}>. Output format: json"
)


def make_review_suite(
    root: Path,
    cases: Mapping[str, str],
    *,
    limits: str = "{max_turns: 10, timeout_s: 120}",
    reviewer_turns: Mapping[str, str] | None = None,
    extra_rules: str = "",
    scoring: str = "",
    repeat: str = "",
    budget_usd: float | None = None,
) -> tuple[Path, Path]:
    """Write plugin, ci-evals.yaml and stub.yaml; `cases` maps a case id to the
    reviewer's final message (`reviewer_turns` replaces a case's turns wholesale)."""
    plugin = root / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "demo"}))
    (plugin / "commands").mkdir()
    for k in (1, 2):
        (plugin / "commands" / f"s{k}.md").write_text(
            f"---\ndescription: stage {k}\n---\nDo stage {k} for $ARGUMENTS.\n"
        )
    (plugin / "agents").mkdir()
    (plugin / "agents" / "review.md").write_text(
        "---\nname: review\ndescription: reviews out1.md\n---\nScore out1.md against the rubrics.\n"
    )
    checklist = plugin / "references/evaluation/checklist/s1"
    analytic = plugin / "references/evaluation/analytic/s1"
    checklist.mkdir(parents=True)
    analytic.mkdir(parents=True)
    (checklist / "written.md").write_text("# Written\n\n1: out1.md exists and says something.\n")
    (analytic / "quality.md").write_text("# Quality\n\n1 = poor ... 5 = excellent\n")
    (root / "fixtures").mkdir()
    scenarios = "".join(f"  - id: {case}\n    inputs: {{case: {case}}}\n" for case in cases)
    budget = f"budget_usd: {budget_usd}\n" if budget_usd is not None else ""
    (root / "ci-evals.yaml").write_text(
        f"""version: 1
plugin: plugin
fixtures: fixtures
stage_map: null
limits: {limits}
{budget}{scoring}{repeat}stages:
  - name: s1
    prompt: "/demo:s1 {{case}}"
    checks:
      - {{ files: out1.md, count: 1 }}
    reviewer:
      agent: agents/review.md
      rubrics: [references/evaluation/checklist/s1, references/evaluation/analytic/s1]
      prompt: "{REVIEW_PROMPT}"
  - name: s2
    prompt: "/demo:s2 {{case}}"
scenarios:
{scenarios}"""
    )
    rules = [extra_rules] if extra_rules else []
    for case, text in cases.items():
        turns = (reviewer_turns or {}).get(case) or f"      - text: {json.dumps(text)}\n"
        rules.append(
            f"  - name: review-{case}\n"
            f'    match: {{prompt_contains: "case <{case}>"}}\n'
            f"    turns:\n{turns}"
        )
    for k in (1, 2):
        rules.append(
            f"  - name: s{k}\n    match: {{command: demo:s{k}}}\n    turns:\n"
            f"      - tools:\n"
            f'          - write: {{path: out{k}.md, content: "stage {k} for {{args}}\\n"}}\n'
            f'      - text: "stage {k} done"\n'
        )
    stub = root / "stub.yaml"
    stub.write_text("rules:\n" + "".join(rules))
    return root / "ci-evals.yaml", stub


def run_graded(
    suite_file: Path,
    stub: Path,
    run_dir: Path,
    *,
    jobs: int = 3,
    agent: Agent | None = None,
    before_run: object = None,
) -> tuple[RunResult, StubServer]:
    """Run the suite from stage 1 on the stub with the grading hook."""
    suite = load_suite(suite_file)
    if callable(before_run):
        before_run()
    environ = {**os.environ, "CLAUDE_CODE_MAX_RETRIES": "0"}
    with StubServer(load_script(stub)) as server:
        plan = RunPlan(
            suite=suite,
            from_stage=suite.stage(1),
            scenarios=suite.scenarios,
            run_dir=run_dir,
            run_id="graded",
            model=None,
            environ=environ,
            endpoint=server.cli_env(),
            jobs=jobs,
        )
        runner = Runner(plan, agent or get_agent("claude"), after_stage=GradingHook())
        result = asyncio.run(runner.run())
    return result, server
