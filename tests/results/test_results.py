"""results.json: typed models, atomic writes, clear errors for files we cannot read."""

from __future__ import annotations

import json
import os
import stat
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest

from ci_evals.errors import UserError
from ci_evals.fs.snapshot import diff_snapshots, take_snapshot
from ci_evals.results.criteria import StageVerdict
from ci_evals.results.model import (
    RESULTS_FILE,
    VERSION,
    FileChange,
    RunResult,
    ScenarioResult,
    StageResult,
    file_changes,
    json_schema,
    read_results,
    write_results,
)
from tests.paths import REPO

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def a_run(status: str = "completed") -> RunResult:
    return RunResult(
        run_id="20260102-030405-abcd",
        tool_version="0.1.0",
        started_at=START,
        finished_at=START + timedelta(seconds=42),
        status=status,  # type: ignore[arg-type]
        model="claude-sonnet-4-5",
        from_stage=2,
        suite_file="ci-evals.yaml",
        budget_usd=5.0,
        total_cost_usd=0.25,
        scenarios=[
            ScenarioResult(
                id="acme",
                inputs={"company": "Acme"},
                stages=[
                    StageResult(number=1, name="research", status="skipped"),
                    StageResult(
                        number=2,
                        name="plan",
                        status="limit",
                        limit_hit="turns",
                        started_at=START,
                        duration_s=3.5,
                        duration_api_ms=1200,
                        turns=30,
                        input_tokens=100,
                        output_tokens=50,
                        cost_usd=0.25,
                        session_id="s-1",
                        produced=[
                            FileChange(path="lab.md", change="added", sha256="ab" * 32, size=3)
                        ],
                        trajectory="acme/2-plan/trajectory.jsonl",
                        stderr="acme/2-plan/stderr.log",
                        grading=StageVerdict(
                            verdict="failed",
                            reason="checklist 1 of 1 failed: x",
                            graders=(),
                            checklist_all_passed=False,
                            analytic_mean=None,
                            analytic_threshold=3.0,
                            binary_score=0.0,
                        ),
                    ),
                ],
            )
        ],
    )


def test_round_trip(tmp_path: Path) -> None:
    result = a_run()
    path = write_results(tmp_path / "run", result)
    assert path == tmp_path / "run" / RESULTS_FILE
    assert read_results(path) == result
    assert read_results(tmp_path / "run") == result  # a run folder works too
    data = json.loads(path.read_text())
    assert data["version"] == VERSION == 16
    assert data["started_at"] == "2026-01-02T03:04:05Z"
    assert data["scenarios"][0]["stages"][1]["limit_hit"] == "turns"


def test_defaults_for_a_run_that_just_started() -> None:
    run = RunResult(
        run_id="r", tool_version="0.1.0", started_at=START, from_stage=1, suite_file="s"
    )
    assert run.status == "running"
    assert run.finished_at is None
    assert run.total_cost_usd == 0.0
    stage = StageResult(number=1, name="a")
    assert (stage.status, stage.produced, stage.grading) == ("pending", [], None)


def test_file_changes_from_a_snapshot_diff(tmp_path: Path) -> None:
    (tmp_path / "gone.md").write_text("bye")
    before = take_snapshot(tmp_path)
    (tmp_path / "gone.md").unlink()
    (tmp_path / "new.md").write_text("hi")
    (tmp_path / "link").symlink_to("new.md")
    changes = diff_snapshots(before, take_snapshot(tmp_path, previous=before))
    records = file_changes(changes.all)
    assert [(r.path, r.change, r.kind, r.size) for r in records] == [
        ("gone.md", "deleted", "file", 3),
        ("link", "added", "link", 6),
        ("new.md", "added", "file", 2),
    ]
    assert records[1].target == "new.md"
    assert records[2].sha256 == changes.added[1].sha256


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        StageResult(number=1, name="a", colour="blue")  # type: ignore[call-arg]


def test_write_is_atomic_for_concurrent_readers(tmp_path: Path) -> None:
    small, large = a_run("running"), a_run()
    large.scenarios *= 200  # a file big enough to be written in several chunks
    write_results(tmp_path, small)
    stop = threading.Event()
    seen: list[str] = []
    errors: list[Exception] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append(read_results(tmp_path).status)
            except Exception as exc:  # a torn or missing file would land here
                errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for index in range(60):
        write_results(tmp_path, large if index % 2 else small)
    stop.set()
    thread.join()
    assert errors == []
    assert seen  # the reader did read
    assert sorted(os.listdir(tmp_path)) == [RESULTS_FILE]  # no temp files left


def test_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    # Replacing onto a folder fails after the temp file was written and synced.
    (tmp_path / RESULTS_FILE / "x").mkdir(parents=True)
    with pytest.raises(OSError):
        write_results(tmp_path, a_run())
    assert sorted(os.listdir(tmp_path)) == [RESULTS_FILE]
    assert (tmp_path / RESULTS_FILE).is_dir()


def test_written_file_is_readable_by_others(tmp_path: Path) -> None:
    path = write_results(tmp_path, a_run())
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# -- files we cannot read --------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        read_results(tmp_path / "nope.json")
    assert str(info.value) == f"{tmp_path / 'nope.json'}: results file not found"


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_text('{\n  "version": 1,\n  oops\n}')
    with pytest.raises(UserError) as info:
        read_results(path)
    assert str(info.value).startswith(f"{path}:3:3: not valid JSON")


def test_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_text("[1, 2]")
    with pytest.raises(UserError, match="expected a JSON object"):
        read_results(path)


@pytest.mark.parametrize("version", [0, None, "1", True, 1.0])
def test_a_version_that_is_not_one_is_refused(tmp_path: Path, version: object) -> None:
    data = json.loads(a_run().model_dump_json())
    if version is None:
        del data["version"]
    else:
        data["version"] = version
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as info:
        read_results(path)
    assert f"results version {version!r} is not a ci-evals results version" in str(info.value)


def test_a_newer_version_says_upgrade(tmp_path: Path) -> None:
    data = json.loads(a_run().model_dump_json())
    data["version"] = VERSION + 1
    data["a_field_of_the_next_version"] = {"x": 1}  # said before any field is validated
    data["scenarios"] = [{"a_new_stage_field": "diverged"}]
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as info:
        read_results(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert (
        f"written by a newer ci-evals: results version {VERSION + 1}, "
        f"this one reads up to version {VERSION}"
    ) in message
    assert "upgrade ci-evals" in message


def test_invalid_content_names_the_field(tmp_path: Path) -> None:
    data = json.loads(a_run().model_dump_json())
    data["scenarios"][0]["stages"][1]["status"] = "great"
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as info:
        read_results(path)
    message = str(info.value)
    assert message.startswith(f"{path}: scenarios.0.stages.1.status: not a valid results file")


def test_unknown_key_in_the_file(tmp_path: Path) -> None:
    data = json.loads(a_run().model_dump_json())
    data["extra_thing"] = 1
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="extra_thing: not a valid results file"):
        read_results(path)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="cannot read the results file: not UTF-8"):
        read_results(path)


def test_file_names_that_are_not_utf8_still_serialize(tmp_path: Path) -> None:
    (tmp_path / os.fsdecode(b"caf\xe9.md")).write_text("x")
    (tmp_path / "link").symlink_to(os.fsdecode(b"caf\xe9.md"))
    before = take_snapshot(tmp_path / "nothing-here")
    after = take_snapshot(tmp_path)
    records = file_changes(diff_snapshots(before, after).all)
    assert [(r.path, r.target) for r in records] == [
        ("caf\\xe9.md", None),
        ("link", "caf\\xe9.md"),
    ]
    run = a_run()
    run.scenarios[0].stages[1].produced = records
    assert read_results(write_results(tmp_path / "run", run)) == run


def test_checked_in_schema_is_current() -> None:
    path = REPO / "docs" / "results.schema.json"
    assert json.loads(path.read_text()) == json_schema(), (
        "regenerate: python -c 'import json; from ci_evals.results.model import json_schema; "
        "print(json.dumps(json_schema(), indent=2, sort_keys=True))' > docs/results.schema.json"
    )


def test_a_written_file_validates_against_the_schema(tmp_path: Path) -> None:
    path = write_results(tmp_path, a_run())
    jsonschema.validate(json.loads(path.read_text()), json_schema())
