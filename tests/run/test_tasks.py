"""`ci-evals run --tasks`: every task, per agent configuration, on the stub model."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from ci_evals.endpoints.replay.recording import load_recording
from ci_evals.main import main
from ci_evals.results.model import read_results
from tests.paths import REPO
from tests.sandbox_helpers import needs

TASK = REPO / "tasks" / "mcp-sqlite-server"

ECHO_SUITE = """\
version: 1
agent: loop
loop: {max_steps: 3}
sandbox: bwrap
stages:
  - name: write
    prompt: "Write DONE into done.txt, then submit."
    graders:
      - id: done
        command: [grep, -qx, DONE, done.txt]
"""


def tasks_folder(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks"
    shutil.copytree(TASK, tasks / "mcp-sqlite-server")
    (tasks / "echo").mkdir()
    (tasks / "echo" / "ci-evals.yaml").write_text(ECHO_SUITE)
    (tasks / "not-a-task").mkdir()  # no ci-evals.yaml: not a task
    return tasks


def stub_for_both(tmp_path: Path) -> Path:
    """The mcp task's scripted agent, plus one for `echo` whose conversations alternate:
    one writes the file and submits, the next keeps running a command (halted)."""
    rules = (TASK / "stub.yaml").read_text().split("rules:\n", 1)[1]
    # A script names files beside it, never an absolute path: the reference
    # server comes along (docs/isolation.md).
    (tmp_path / "reference").mkdir(exist_ok=True)
    shutil.copy2(TASK / "reference" / "server.py", tmp_path / "reference" / "server.py")
    echo = textwrap.indent(
        textwrap.dedent(
            """\
          - name: echo
            match: {prompt_contains: "Write DONE"}
            repeat_last: true
            variants:
              - - tools: [{tool: {name: write_file, input: {path: done.txt, content: "DONE\\n"}}}]
                - tools: [{tool: {name: final_submit, input: {}}}]
              - - tools: [{tool: {name: run_command, input: {command: "true"}}}]
        """
        ),
        "  ",
    )
    stub = tmp_path / "stub.yaml"
    stub.write_text("rules:\n" + rules + echo)
    return stub


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    needs("bwrap")


def test_every_task_with_repeats_and_one_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, stub, out = tasks_folder(tmp_path), stub_for_both(tmp_path), tmp_path / "out"
    argv = ["run", "--tasks", str(tasks), "--model", f"stub:{stub}", "--repeat", "2"]
    code = main([*argv, "--isolation", "bwrap", "--out", str(out)])
    assert code == 1  # one echo attempt halted
    bench = json.loads((out / "benchmark.json").read_text())
    [config] = bench["configurations"]
    assert config["configuration"] == f"model stub:{stub}"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "1-stub-" + stub.parent.name[:16].rstrip("_")  # the stub by its folder, path-safe
    ]
    rows = {row["task"]: row for row in config["tasks"]}
    assert set(rows) == {"echo", "mcp-sqlite-server"}
    mcp, echo = rows["mcp-sqlite-server"], rows["echo"]
    assert (mcp["attempts"], mcp["completed"], mcp["passed"], mcp["scores"]) == (
        2,
        2,
        2,
        [100.0, 100.0],
    )
    assert (mcp["variance"], mcp["stdev"], mcp["ci95"]) == (0.0, 0.0, [100.0, 100.0])
    assert (echo["attempts"], echo["completed"], echo["halted"], echo["passed"]) == (2, 1, 1, 1)
    assert sorted(echo["scores"]) == [0.0, 100.0] and echo["mean_score"] == 50.0
    assert echo["variance"] == 5000.0 and round(echo["stdev"], 2) == 70.71
    assert echo["ci95"] == [0.0, 100.0]  # t(0.975, 1) = 12.7: the whole range, clipped
    assert config["total"]["attempts"] == 4 and config["total"]["halted"] == 1
    halted = read_results(out / echo["run_dir"])
    assert {s.stages[0].limit_hit for s in halted.scenarios} == {None, "turns"}
    printed = capsys.readouterr().out
    assert f"configuration: model stub:{stub}" in printed
    assert "| echo | 2 | 1 | 1 | 0 | 0 | 1 | 50.0 | 70.7 | 0.0-100.0 |" in printed
    assert (
        "| task | attempts | completed | halted | limit | error | passed | mean score |" in printed
    )
    assert (out / "benchmark.md").read_text() in printed


def test_a_matrix_of_tool_sets_and_prompts(tmp_path: Path) -> None:
    tasks, stub, out = tasks_folder(tmp_path), stub_for_both(tmp_path), tmp_path / "out"
    shutil.rmtree(tasks / "mcp-sqlite-server")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        f"models: ['stub:{stub}']\n"
        "system_prompts: {brief: Be brief.}\n"
        "tool_sets:\n  all: [run_command, write_file]\n  shell-only: [run_command]\n"
    )
    code = main(
        ["run", "--tasks", str(tasks), "--matrix", str(matrix), "--out", str(out),
         "--isolation", "bwrap"]
    )  # fmt: skip
    assert code == 1
    configs = json.loads((out / "benchmark.json").read_text())["configurations"]
    labels = [c["configuration"] for c in configs]
    assert labels == [
        f"model stub:{stub}, prompt brief, tools all",
        f"model stub:{stub}, prompt brief, tools shell-only",
    ]
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == [
        f"1-stub-{stub.parent.name[:16]}_brief_all",
        f"2-stub-{stub.parent.name[:16]}_brief_shell-only",
    ]
    [all_tools], [shell_only] = configs[0]["tasks"], configs[1]["tasks"]
    assert all_tools["passed"] == 1
    # Without write_file the scripted agent's write is refused: submitted, but failing.
    assert (shell_only["completed"], shell_only["passed"], shell_only["scores"]) == (1, 0, [0.0])
    trajectory = next((out / shell_only["run_dir"]).glob("*/1-write/trajectory.jsonl"))
    records = [json.loads(line) for line in trajectory.read_text().splitlines()]
    assert records[0]["config"]["system_prompt"] == "Be brief."
    assert records[0]["config"]["tools"] == ["run_command", "final_submit"]
    assert "no tool named 'write_file'" in records[2]["output"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--scenario", "x"], "--scenario selects within one suite"),
        (["--matrix", "{missing}"], "file not found"),
    ],
)
def test_bad_usage_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    tasks = tasks_folder(tmp_path)
    extra = [arg.format(missing=tmp_path / "nope.yaml") for arg in extra]
    assert main(["run", "--tasks", str(tasks), "--model", "stub:x", *extra]) == 2
    assert expected in capsys.readouterr().err


def test_no_task_and_matrix_without_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["run", "--tasks", str(tmp_path / "empty")]) == 2
    assert "no task in" in capsys.readouterr().err
    assert main(["run", "--matrix", str(tmp_path / "m.yaml")]) == 2
    assert "add --tasks DIR" in capsys.readouterr().err


def test_a_recorded_benchmark_replays_every_task_and_repeat(tmp_path: Path) -> None:
    """The loop agent on `replay:`: `run --tasks --record`, then `--model replay:OUT`
    serves each task its own run's recording; the repeats of `echo` asked the same
    first question and get the recorded answers in recorded order."""
    tasks, stub, recorded = tasks_folder(tmp_path), stub_for_both(tmp_path), tmp_path / "rec"
    common = ["run", "--tasks", str(tasks), "--repeat", "2", "--isolation", "bwrap"]
    assert main([*common, "--model", f"stub:{stub}", "--record", "--out", str(recorded)]) == 1
    stub.unlink()  # every answer from here on is the recording's

    replayed = tmp_path / "replayed"
    assert main([*common, "--model", f"replay:{recorded}", "--out", str(replayed)]) == 1

    def rows(out: Path) -> dict[str, list[object]]:
        [config] = json.loads((out / "benchmark.json").read_text())["configurations"]
        return {
            row["task"]: [row[k] for k in ("attempts", "completed", "halted", "passed", "scores")]
            for row in config["tasks"]
        }

    assert rows(replayed) == rows(recorded)
    [run_dir] = replayed.glob("1-*/echo")
    result = read_results(run_dir)
    assert result.model_endpoint.startswith(f"replay:{recorded}/1-")
    stages = [sc.stages[0] for sc in result.scenarios]
    assert [s.endpoint_misses for s in stages] == [[], []]
    [was] = recorded.glob("1-*/echo")
    first = [e.digest for e in load_recording(was).exchanges]
    assert first[0] in first[1:]  # both repeats asked this; the first got `write`, then not
    before = read_results(was)
    assert [
        (sc.repeat, sc.stages[0].status, sc.stages[0].limit_hit) for sc in result.scenarios
    ] == [(sc.repeat, sc.stages[0].status, sc.stages[0].limit_hit) for sc in before.scenarios]
