"""`ci-evals grade` on a run of `claude plugin eval` cases asks the `llm` and
`baseline` judges again, through the endpoint `run` would use: `--model stub:FILE`
offline (each judged stage its own caller: a request no rule answers is a miss,
the stage an `error`), else the proxy with the key and the suite's budget; the
judges' cost is the stage's grading cost. With no endpoint at all it stops in one
line naming `--model`, before anything is written.

A real git repository, the real SDK in its sandbox against the stub model for
the run; the re-grade never runs an agent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import git
from tests.run_helpers import run_ci_evals

pytestmark = pytest.mark.slow

JUDGE = 'match: {{system_contains: "evaluation judge", prompt_contains: "greets Bea"}}'
FILES = {
    "p/.claude-plugin/plugin.json": '{"name": "p"}\n',
    "p/evals/greet/prompt.md": "---\nruns: 1\n---\nGreet Bea.\n",
    "p/evals/greet/graders/polite.md": "---\ntype: llm\n---\nThe reply greets Bea politely.\n",
    "p/evals/greet/graders/said.md": "---\ntype: regex\n---\nBea\n",
    "ci-evals.yaml": "version: 1\nplugin: p\nbudget_usd: 1.0\nplugin_evals: {}\n",
    "pass.yaml": (
        "rules:\n"
        f"  - name: judge\n    {JUDGE.format()}\n"
        "    turns: [{text: PASS, usage: {input_tokens: 1000, output_tokens: 10}}]\n"
        '  - name: agent\n    match: {prompt_contains: "Greet Bea"}\n'
        '    turns: [{text: "Hello, Bea!"}]\n'
    ),
    "fail.yaml": (
        f"rules:\n  - name: judge\n    {JUDGE.format()}\n"
        "    turns: [{text: FAIL, usage: {input_tokens: 1000, output_tokens: 10}}]\n"
    ),
    "silent.yaml": 'rules:\n  - name: other\n    match: {prompt_contains: "nothing"}\n'
    "    turns: [{text: PASS}]\n",
}


def _stage(results: Path) -> dict[str, object]:
    (scenario,) = json.loads(results.read_text())["scenarios"]
    (stage,) = scenario["stages"]
    return stage


def _votes(folder: Path) -> dict[str, list[bool]]:
    (saved,) = folder.glob("**/plugin-eval-judge.json")
    return {g["name"]: g["judgeVotes"] for g in json.loads(saved.read_text())["graders"]}


def test_grade_asks_the_judges_again_through_its_endpoint(tmp_path: Path) -> None:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "cases")
    done = run_ci_evals(tmp_path, "run", "--model", "stub:pass.yaml", "--out", "run")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = _stage(tmp_path / "run" / "results.json")
    assert ran["status"] == "passed" and ran["grading_cost_usd"] > 0

    # The judge now says FAIL: the re-grade asks it (three votes) and the case fails.
    done = run_ci_evals(tmp_path, "grade", "run", "--model", "stub:fail.yaml", "--output", "f.json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "greet stage 1 greet: passed -> failed" in done.stdout
    graded = _stage(tmp_path / "f.json")
    assert graded["grading_cost_usd"] == pytest.approx(ran["grading_cost_usd"])
    criteria = {c["id"]: c["passed"] for c in graded["grading"]["graders"][0]["criteria"]}
    assert criteria == {"polite": False, "said": True}
    (regraded,) = (tmp_path / "run").glob("regrade-*")
    assert _votes(regraded) == {"polite": [False] * 3}
    assert _votes(tmp_path / "run" / "greet") == {"polite": [True] * 3}  # the run's, kept

    # A stub with no answer for the judge: a miss, the stage an error, never a verdict.
    done = run_ci_evals(
        tmp_path, "grade", "run", "--model", "stub:silent.yaml", "--output", "s.json"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    silent = _stage(tmp_path / "s.json")
    assert silent["status"] == "error" and silent["endpoint_misses"], silent

    # No endpoint at all (no --model, no key): one line naming --model, nothing written.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    done = run_ci_evals(tmp_path, "grade", "run", "--output", "n.json", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "the llm/baseline judges of greet stage 1 (greet) are asked again" in line
    assert "--model stub:PATH" in line
    assert not (tmp_path / "n.json").exists()
