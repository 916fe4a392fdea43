"""`plan --tasks`, `run --tasks --shard I/K`, `merge` of task shards: real `ci-evals`
processes on the stub model; the merged benchmark is the unsharded one's.

The stub's answers depend only on the prompt (never on the order requests
arrive in), so a shard's conversations are the unsharded run's: each task
has a scenario that passes, one that submits a wrong file (completed, failed)
and one that never submits (halted at the step ceiling); the `shell-only`
configuration cannot write files, so its attempts score otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.results.model import read_results
from tests.run.test_run_command import ci_evals
from tests.sandbox_helpers import needs
from tests.shard_helpers import comparable

TASK_SUITE = """\
version: 1
agent: {kind: loop, max_steps: 3}
sandbox: bwrap
budget_usd: 4.0
stages:
  - name: write
    prompt: "Write {word} into done.txt, then submit."
    graders:
      - id: done
        command: [grep, -qx, DONE, done.txt]
scenarios:
  - id: good
    inputs: {word: DONE}
  - id: wrong
    inputs: {word: NOPE}
  - id: stuck
    inputs: {word: LOOP}
"""

STUB = """\
rules:
  - name: loop
    match: {prompt_contains: "Write LOOP"}
    repeat_last: true
    turns:
      - tools: [{tool: {name: run_command, input: {command: "true"}}}]
"""
STUB_WRITE = """\
  - name: {word}
    match: {{prompt_contains: "Write {word}"}}
    turns:
      - tools: [{{tool: {{name: write_file, input: {{path: done.txt, content: "{word}\\n"}}}}}}]
      - tools: [{{tool: {{name: final_submit, input: {{}}}}}}]
"""


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    needs("bwrap")


def _tasks(tmp_path: Path) -> tuple[Path, Path]:
    """Two tasks alike but for their names, and a matrix of two tool sets."""
    tasks = tmp_path / "tasks"
    for name in ("alpha", "beta"):
        (tasks / name).mkdir(parents=True)
        (tasks / name / "ci-evals.yaml").write_text(TASK_SUITE)
    stub = tmp_path / "stub.yaml"
    stub.write_text(STUB + "".join(STUB_WRITE.format(word=w) for w in ("DONE", "NOPE")))
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"models: ['stub:{stub}']\n"
        "tool_sets:\n  all: [run_command, write_file]\n  shell-only: [run_command]\n"
    )
    return tasks, matrix


@pytest.mark.slow
def test_merged_task_shards_equal_the_unsharded_benchmark(tmp_path: Path) -> None:
    tasks, matrix = _tasks(tmp_path)
    common = ("--tasks", str(tasks), "--matrix", str(matrix), "--repeat", "2")
    plan = ci_evals("plan", *common, "--shards", "3", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    specs = [entry["shard"] for entry in json.loads(plan.stdout)["include"]]
    assert specs == ["1/3", "2/3", "3/3"]
    assert "from_stage" not in plan.stdout  # every task runs whole

    run = ("run", *common, "--isolation", "bwrap", "--jobs", "2")
    for k, spec in enumerate(specs, start=1):
        proc = ci_evals(*run, "--shard", spec, "--out", str(tmp_path / f"s{k}"), cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr  # some attempts fail, in every shard
    whole = ci_evals(*run, "--out", str(tmp_path / "full"), cwd=tmp_path)
    assert whole.returncode == 1, whole.stderr

    merged = tmp_path / "merged"
    proc = ci_evals("merge", *(str(tmp_path / f"s{k}") for k in (3, 1, 2)), "--out",
                    str(merged), cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("merged 3 shard(s), 24 task run(s)' units")

    full = tmp_path / "full"
    table = (full / "benchmark.md").read_text()
    assert (merged / "benchmark.md").read_text() == table
    table_json = (full / "benchmark.json").read_text()
    assert json.loads((merged / "benchmark.json").read_text()) == json.loads(table_json)
    # Per configuration: all tools pass one attempt in three; shell-only cannot write.
    assert "| alpha | 6 | 4 | 2 | 0 | 0 | 2 | 33.3 | 51.6 | 0.0-87.5 |" in table
    assert "| all tasks | 12 | 8 | 4 | 0 | 0 | 0 | 0.0 | 0.0 | 0.0-0.0 |" in table
    rows = [r for c in json.loads(table_json)["configurations"] for r in c["tasks"]]
    assert len(rows) == 4
    for row in rows:  # and each task run's results, as `merge` of a suite's shards
        assert comparable(read_results(merged / row["run_dir"])) == comparable(
            read_results(full / row["run_dir"])
        )

    # A task shard missing is refused, nothing written.
    short = ci_evals("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out",
                     str(tmp_path / "m2"), cwd=tmp_path)  # fmt: skip
    assert short.returncode == 2
    assert "shard(s) 3/3 missing" in short.stderr
    assert not (tmp_path / "m2" / "benchmark.json").exists()
