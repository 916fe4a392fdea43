"""`--json` on the commands a program reads: stdout is exactly one JSON object,
valid against the schema the package ships for that command (docs/json.md),
saying what the exit code says; what a person reads went to stderr.

Every test runs the real command (`python -m ci_evals`) on real files: a tiny
suite on the stub model, a real git repository for the stage map.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ci_evals.commands.output import SCHEMAS
from tests.cli_schemas import CLI_SCHEMAS, validate
from tests.conftest import copy_example, git
from tests.run_helpers import make_suite, run_ci_evals


def json_run(cwd: Path, command: str, *args: str, schema: str | None = None) -> dict[str, Any]:
    """`ci-evals COMMAND --json ARGS`: its one document, checked against its schema and
    its exit code."""
    done = run_ci_evals(cwd, command, "--json", *args)
    document = json.loads(done.stdout)  # exactly one object: anything else fails here
    assert isinstance(document, dict), done.stdout
    name = schema or command
    validate(document, name)
    assert document["schema"] == SCHEMAS[name]
    assert document["exit_code"] == done.returncode, done.stderr
    return document


def test_every_command_schema_is_shipped_and_names_its_version() -> None:
    for command, version in SCHEMAS.items():
        schema = json.loads((CLI_SCHEMAS / f"{command}.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["schema"] == {"const": version}
    # compute-stage's and mcp-check's documents predate `schema`: described, not versioned.
    assert {p.stem for p in CLI_SCHEMAS.glob("*.json")} == {
        *SCHEMAS, "common", "compute-stage", "mcp-check",
    }  # fmt: skip


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("json")
    suite_file, stub = make_suite(root, scenarios=("acme", "globex"))
    return suite_file, stub


@pytest.mark.slow
def test_run_merge_grade_report_json(suite: tuple[Path, Path], tmp_path: Path) -> None:
    suite_file, stub = suite
    root = suite_file.parent
    model = f"stub:{stub}"
    shards = []
    for index in (1, 2):
        out = tmp_path / f"shard{index}"
        run = json_run(
            root, "run", "--from-stage", "5", "--model", model, "--shard", f"{index}/2",
            "--out", str(out),
        )  # fmt: skip
        assert run["verdict"] == "passed" and run["exit_code"] == 0
        assert run["run"]["run_dir"] == str(out)
        assert run["run"]["counts"]["stage_runs"] == 1  # one scenario's stage 5 per shard
        assert run["run"]["cost"]["kind"] == "simulated"
        shards.append(out)

    merged = json_run(root, "merge", *map(str, shards), "--out", str(tmp_path / "merged"))
    assert merged["shards"] == 2 and merged["units"] == 2 and not merged["tasks"]
    assert merged["verdict"] == "passed"
    assert merged["run"]["counts"] == {
        "scenarios": 2, "stage_runs": 2, "passed": 2, "failed": 0, "error": 0,
    }  # fmt: skip
    assert {row["scenario"] for row in merged["run"]["stages"]} == {"acme", "globex"}

    report = json_run(root, "report", str(tmp_path / "merged"))
    assert report["verdict"] == "passed" and report["inconsistencies"] == []
    assert "acme" in report["markdown"]
    assert report["run"] == merged["run"]

    graded = json_run(root, "grade", str(tmp_path / "merged"), "--model", model)
    assert graded["verdict"] == "passed"
    assert graded["run"]["results_file"] != graded["run"]["run_dir"] + "/results.json"


@pytest.mark.slow
def test_run_quiet_prints_the_verdict_line_only(suite: tuple[Path, Path], tmp_path: Path) -> None:
    suite_file, stub = suite
    out = tmp_path / "quiet"
    args = ("run", "-q", "--from-stage", "5", "--scenario", "acme", "--model", f"stub:{stub}")
    done = run_ci_evals(suite_file.parent, *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"run passed: 1 stage run(s), total cost {_cost(out)} (simulated); run folder: {out}"
    ]
    assert "s5: started" not in done.stderr  # no progress lines either

    verbose = run_ci_evals(suite_file.parent, *args[:1], "-v", *args[2:], "--out", str(out) + "v")
    assert verbose.returncode == 0, verbose.stderr
    assert "acme stage 5 s5: started" in verbose.stderr  # plain lines, even for -v
    assert "acme stage 5 s5: turn 1 Write" in verbose.stderr  # each tool it calls


def _cost(run_dir: Path) -> str:
    return f"${json.loads((run_dir / 'results.json').read_text())['total_cost_usd']:.4f}"


def test_check_json_lists_every_problem_with_its_place(tmp_path: Path) -> None:
    (tmp_path / "ci-evals.yaml").write_text(
        "version: 1\nplugin: nope\nstages:\n  - name: a\n    prompt: hi\n    bogus: 1\n"
    )
    document = json_run(tmp_path, "check", "--model", "stub:missing.yaml")
    assert document["exit_code"] == 2 and not document["ok"]
    places = [(p["file"], p["line"], p["column"], p["field"]) for p in document["problems"]]
    assert places == [("ci-evals.yaml", 2, 9, "plugin"), ("missing.yaml", None, None, None)]
    assert document["problems"][0]["message"] == "plugin folder not found: nope"


def test_check_json_ok_names_the_suite(suite: tuple[Path, Path]) -> None:
    suite_file, stub = suite
    document = json_run(suite_file.parent, "check", "--model", f"stub:{stub}")
    assert document["ok"] and document["problems"] == []
    assert document["suite"]["stages"] == 5 and document["suite"]["scenarios"] == 2


def test_check_coverage_json_every_problem_every_map(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "a.md").write_text("a\n")
    (tmp_path / "plug" / "b.md").write_text("b\n")
    (tmp_path / "stage_map.yaml").write_text(
        "version: 1\nroot: plug\nstages: [one]\nentries:\n"
        "  - glob: a.md\n    stage: 1\n  - glob: zz.md\n    stage: 1\n"
    )
    git(tmp_path, "add", "-A")
    document = json_run(tmp_path, "check-coverage", "--map", "gone.yaml", "--map", "stage_map.yaml")
    assert document["exit_code"] == 2  # the worst of the maps: one cannot be read
    gone, found = document["maps"]
    assert [p["kind"] for p in gone["problems"]] == ["invalid-map"]
    assert gone["problems"][0]["file"] == "gone.yaml"
    assert found["checked"] == 2 and found["entries"] == 2
    assert [
        (p["kind"], p["file"], p["line"], p["column"], p["field"]) for p in found["problems"]
    ] == [
        ("uncovered", "plug/b.md", None, None, None),
        ("dead-entry", "stage_map.yaml", 7, 11, "entries[1].glob"),
    ]

    (tmp_path / "plug" / "b.md").unlink()
    (tmp_path / "stage_map.yaml").write_text(
        "version: 1\nroot: plug\nstages: [one]\nentries:\n  - glob: a.md\n    stage: 1\n"
    )
    git(tmp_path, "add", "-A")
    document = json_run(tmp_path, "check-coverage")
    assert document["ok"] and document["exit_code"] == 0
    assert document["maps"][0]["problems"] == []


def test_plan_json_holds_the_matrix_plan_prints(suite: tuple[Path, Path]) -> None:
    suite_file, _ = suite
    plain = run_ci_evals(suite_file.parent, "plan", "--shards", "2")
    document = json_run(suite_file.parent, "plan", "--shards", "2")
    assert document["matrix"] == json.loads(plain.stdout)
    assert document["shards"] == 2 and document["from_stage"] == "1"


def test_a_usage_error_is_the_error_document(tmp_path: Path) -> None:
    (tmp_path / "ci-evals.yaml").write_text("version: 1\nplugin: .\nstages: 3\n")
    document = json_run(tmp_path, "run", "--model", "stub:x.yaml", schema="error")
    assert document["exit_code"] == 2 and document["command"] == "run"
    (problem,) = document["problems"]
    assert problem["file"] == "ci-evals.yaml" and problem["line"] == 3
    assert problem["text"].startswith("ci-evals.yaml:3:")


def test_a_bad_option_is_the_error_document(tmp_path: Path) -> None:
    """argparse's own refusals (an unknown option, a missing argument) are input
    mistakes too: one error document on stdout, argparse's usage on stderr."""
    done = run_ci_evals(tmp_path, "run", "--json", "--no-such-option")
    document = json.loads(done.stdout)
    validate(document, "error")
    assert document["exit_code"] == done.returncode == 2 and document["command"] == "run"
    (problem,) = document["problems"]
    assert "--no-such-option" in problem["message"]
    assert "usage: ci-evals run" in done.stderr and "--no-such-option" in done.stderr
    missing = run_ci_evals(tmp_path, "report", "--json")
    assert json.loads(missing.stdout)["command"] == "report" and missing.returncode == 2


def test_report_json_on_a_missing_run_is_the_error_document(tmp_path: Path) -> None:
    document = json_run(tmp_path, "report", str(tmp_path / "none"), schema="error")
    assert document["exit_code"] == 2 and document["command"] == "report"


@pytest.mark.slow
def test_check_fixtures_quiet_and_verbose(tmp_path: Path) -> None:
    example = copy_example(tmp_path / "ex")
    git(example.root, "init", "-q")
    git(example.root, "add", "-A")
    stub = f"stub:{example.example / 'stub' / 'labsmith.yaml'}"
    args = ("check-fixtures", "--stage", "4", "--model", stub)
    quiet = run_ci_evals(example.root, *args, "-q", "--out", str(tmp_path / "q"))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.splitlines() == [
        "contracts: 28 item(s) hold on the fixtures",
        f"report: {tmp_path / 'q' / 'check-fixtures.json'}",
    ]  # the passing fixture's line is left out
    verbose = run_ci_evals(example.root, *args, "-v", "--out", str(tmp_path / "v"))
    assert verbose.returncode == 0, verbose.stderr
    lines = verbose.stdout.splitlines()
    at = lines.index(
        "fixtures/4-plan-chapter-output (stage 4 plan-chapter): passed - checklist 2/2; "
        "binary score 100.0"
    )
    assert lines[at + 1] == "  pass contract:produces[0].files"  # each criterion below it


def test_run_json_with_tasks_is_refused_in_the_error_document(tmp_path: Path) -> None:
    document = json_run(tmp_path, "run", "--tasks", str(tmp_path), schema="error")
    assert document["exit_code"] == 2
    (problem,) = document["problems"]
    assert problem["field"] == "--json" and "benchmark.json" in problem["hint"]


def test_compute_stage_json_matches_its_schema(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "a.md").write_text("a\n")
    (tmp_path / "stage_map.yaml").write_text(
        "version: 1\nroot: plug\nstages: [one, two]\nentries:\n  - glob: a.md\n    stage: 2\n"
    )
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (tmp_path / "plug" / "a.md").write_text("b\n")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")
    done = run_ci_evals(tmp_path, "compute-stage", "HEAD~1", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    validate(document, "compute-stage")
    assert document["from_stage"] == 2 and document["reason"] == "matched"


def test_mcp_check_json_matches_its_schema() -> None:
    server = Path(__file__).parents[1] / "data" / "mcp" / "stdlib_server.py"
    done = run_ci_evals(server.parent, "mcp-check", "--json", "--", sys.executable, str(server))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    validate(document, "mcp-check")
    assert document["score"] == 100
