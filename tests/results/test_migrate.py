"""Every earlier results version stays readable: migrated, then read as the current one.

`tests/data/results-v1.json` is a version 1 file as the v1 runner wrote it
(no `graded`), checked against the v1 schema kept next to it
(`results.v1.schema.json`, docs/results.schema.json as it was at version 1).
`results-v2-full.json` is a real version 2 file (a full run of
examples/labsmith on the stub model), with `results.v2.schema.json`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.report.verify import problems
from ci_evals.results.migrate import MIGRATIONS, VERSION
from ci_evals.results.model import (
    RESULTS_FILE,
    EndpointMiss,
    ReplayedFrom,
    RunResult,
    json_schema,
    read_results,
    record_endpoint_misses,
    write_results,
)
from tests.paths import DATA

V1 = DATA / "results-v1.json"


@pytest.fixture(autouse=True)
def _not_in_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


def v1_data() -> dict[str, object]:
    return json.loads(V1.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_saved_file_is_a_valid_version_1_file() -> None:
    data = v1_data()
    assert data["version"] == 1
    jsonschema.validate(data, json.loads((DATA / "results.v1.schema.json").read_text()))


def test_every_version_before_the_current_one_has_a_migration() -> None:
    assert sorted(MIGRATIONS) == list(range(1, VERSION))


def test_a_version_1_file_reads_as_the_current_version(tmp_path: Path) -> None:
    result = read_results(V1)
    assert result.version == VERSION
    plan, write = result.scenarios[0].stages
    assert (plan.status, plan.graded) == ("passed", True)  # it has a verdict
    assert (write.status, write.graded) == ("completed", False)  # no graders, finished run
    assert problems(result) == []
    # Written again, it is a current file that validates against the current schema.
    path = write_results(tmp_path / "run", result)
    jsonschema.validate(json.loads(path.read_text()), json_schema())
    assert read_results(path) == result


def test_the_report_on_a_version_1_baseline(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(V1, run_dir / RESULTS_FILE)
    markdown = tmp_path / "summary.md"
    assert main(["report", str(run_dir), "--markdown", str(markdown)]) == 0
    assert markdown.read_text(encoding="utf-8").startswith("## ci-evals: passed\n")
    assert json.loads((run_dir / RESULTS_FILE).read_text())["version"] == 1  # only read


def test_a_completed_stage_of_an_interrupted_version_1_run_is_not_a_pass(tmp_path: Path) -> None:
    """v1 cannot say whether such a stage had graders: it is taken as never graded."""
    data = v1_data()
    data["status"] = "interrupted"
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(data), encoding="utf-8")
    result = read_results(path)
    write = result.scenarios[0].stages[1]
    assert (write.status, write.graded) == ("completed", True)
    markdown = tmp_path / "summary.md"
    junit = tmp_path / "junit.xml"
    assert main(["report", str(path), "--markdown", str(markdown), "--junit", str(junit)]) != 0
    assert "completed:ungraded" in markdown.read_text(encoding="utf-8")
    assert 'errors="1"' in junit.read_text(encoding="utf-8")


def test_a_newer_file_is_one_line_naming_file_and_version(tmp_path: Path) -> None:
    data = v1_data()
    data["version"] = VERSION + 7
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError) as info:
        read_results(path)
    line = str(info.value)
    assert "\n" not in line
    assert str(path) in line
    assert f"written by a newer ci-evals: results version {VERSION + 7}" in line
    assert "upgrade ci-evals" in line
    assert main(["report", str(path)]) == 2


V2 = DATA / "results-v2-full.json"  # a real full run of examples/labsmith on the stub model


def test_the_saved_version_2_file_is_valid_and_reads_without_suite_or_revision() -> None:
    data = json.loads(V2.read_text(encoding="utf-8"))
    assert data["version"] == 2
    jsonschema.validate(data, json.loads((DATA / "results.v2.schema.json").read_text()))
    result = read_results(V2)
    assert result.version == VERSION
    # Never guessed: a version 2 file does not say which suite or commit it ran.
    assert (result.suite, result.revision) == (None, None)
    assert problems(result) == []


def test_a_version_3_file_reads_with_no_endpoint_misses(tmp_path: Path) -> None:
    path = write_results(tmp_path / "v4", read_results(V2))
    data = json.loads(path.read_text())
    data["version"] = 3
    for scenario in data["scenarios"]:
        for stage in scenario["stages"]:
            del stage["endpoint_misses"]  # version 3 had no such field
    old = tmp_path / "v3" / RESULTS_FILE
    old.parent.mkdir()
    old.write_text(json.dumps(data))

    result = read_results(old)

    assert result.version == VERSION
    assert all(s.endpoint_misses == [] for sc in result.scenarios for s in sc.stages)
    assert result == read_results(V2)  # nothing else changed on the way
    assert problems(result) == []


def test_a_version_4_file_reads_as_not_metered_and_keeps_its_total(tmp_path: Path) -> None:
    path = write_results(tmp_path / "v5", read_results(V2))
    data = json.loads(path.read_text())
    data["version"] = 4
    del data["forwarded"]  # version 4 had no such field
    _as_version_5_stages(data)
    old = tmp_path / "v4" / RESULTS_FILE
    old.parent.mkdir()
    old.write_text(json.dumps(data))

    result = read_results(old)

    assert result.version == VERSION
    assert result.forwarded is None  # never guessed: a v4 runner did not meter its endpoint
    assert result.total_cost_usd == pytest.approx(result.stages_cost_usd)
    assert result == read_results(V2)
    assert problems(result) == []


def _as_version_7(data: dict[str, Any]) -> None:
    """A current file's run as version 7 wrote it: no `replayed_from`."""
    _as_version_8(data)
    del data["replayed_from"]


def _as_version_6(data: dict[str, Any]) -> None:
    """A current file's run as version 6 wrote it: nor any stage's `plugin_changes`."""
    _as_version_7(data)
    for scenario in data["scenarios"]:
        for stage in scenario["stages"]:
            del stage["plugin_changes"]


def _as_version_5_stages(data: dict[str, Any]) -> None:
    """A current file's stages and run as version 5 wrote them: `stub_misses`, no shard fields."""
    _as_version_6(data)
    del data["shard"], data["merged_shards"]
    for scenario in data["scenarios"]:
        for stage in scenario["stages"]:
            stage["stub_misses"] = stage.pop("endpoint_misses")


def _written_as(
    tmp_path: Path, current: RunResult, version: int, as_old: Callable[[dict[str, Any]], None]
) -> tuple[Path, dict[str, Any]]:
    """`current` written as a file of `version` (`as_old` edits its JSON so), checked
    against that version's kept schema: its path and its JSON."""
    data = json.loads(write_results(tmp_path / "current", current).read_text())
    data["version"] = version
    as_old(data)
    jsonschema.validate(data, json.loads((DATA / f"results.v{version}.schema.json").read_text()))
    old = tmp_path / f"v{version}" / RESULTS_FILE
    old.parent.mkdir()
    old.write_text(json.dumps(data))
    return old, data


def test_a_version_5_file_reads_with_its_misses_as_endpoint_misses(tmp_path: Path) -> None:
    """Version 5 named them `stub_misses`; some v5 files already hold a replay's
    `diverged` ones (and the shard fields): all read as they were written."""
    current = read_results(V2)
    current.scenarios[0].stages[0].status = "error"
    diverged = EndpointMiss(outcome="diverged", text="replay: request #1 of this stage ...")
    record_endpoint_misses(current.scenarios[0].stages[0], [diverged])
    old, data = _written_as(tmp_path, current, 5, _as_version_5_stages)

    result = read_results(old)

    assert result.version == VERSION
    assert result == current
    assert result.scenarios[0].stages[0].endpoint_misses == [diverged]
    assert (result.shard, result.merged_shards) == (None, None)
    # Both names at once is no file any version wrote.
    data["scenarios"][0]["stages"][0]["endpoint_misses"] = []
    old.write_text(json.dumps(data))
    with pytest.raises(UserError, match="stub_misses"):
        read_results(old)


def test_a_version_6_file_reads_with_no_plugin_changes(tmp_path: Path) -> None:
    """Version 6 wrote what a stage changed in the plugin copy only beside it
    (`plugin-changes.json`): read as none recorded, everything else as written."""
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 6, _as_version_6)

    result = read_results(old)

    assert result == current
    assert all(not s.plugin_changes for sc in result.scenarios for s in sc.stages)


@pytest.mark.parametrize("endpoint", ["replay:recordings/x", "stub:stub.yaml", "anthropic"])
def test_a_version_7_replay_reads_as_of_unknown_origin(tmp_path: Path, endpoint: str) -> None:
    """Version 7 did not record what a replayed recording came from: a replay of it
    is no model's verdict (fail closed), and any other run replayed nothing."""
    current = read_results(V2)
    current.model_endpoint = endpoint
    old, _ = _written_as(tmp_path, current, 7, _as_version_7)

    result = read_results(old)

    assert result.version == VERSION == 16
    replay = endpoint.startswith("replay:")
    assert result.replayed_from == (ReplayedFrom(origin="unknown") if replay else None)
    assert problems(result) == []
    if replay:
        assert result.origin_note == "replayed, origin unknown: not a model verdict"


def _as_version_11(data: dict[str, Any]) -> None:
    """A current file as version 11 wrote it: one arm, nothing compared, no import."""
    _as_version_12(data)
    del data["ablation"], data["mean_delta"]
    for scenario in data["scenarios"]:
        del scenario["arm"]
    for summary in data["summaries"]:
        del summary["arms"]


def test_a_version_11_file_reads_as_a_run_of_one_arm(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 11, _as_version_11)

    result = read_results(old)

    assert result == current and problems(result) == []
    assert result.ablation == "none" and result.mean_delta is None
    assert {s.arm for s in result.scenarios} == {"with"}
    assert {s.arms for s in result.summaries} == {None}


def _as_version_12(data: dict[str, Any]) -> None:
    """A current file as version 12 wrote it: never an import."""
    _as_version_13(data)
    del data["imported_from"]


def _as_version_13(data: dict[str, Any]) -> None:
    """A current file as version 13 wrote it: run in one session, every repeat started."""
    _as_version_14(data)
    del data["resumed"]
    for scenario in data["scenarios"]:
        for stage in scenario["stages"]:
            del stage["resumed"]


def _as_version_14(data: dict[str, Any]) -> None:
    """A current file as version 14 wrote it: every repeat started."""
    _as_version_15(data)
    del data["repeats_stopped"]


def _as_version_15(data: dict[str, Any]) -> None:
    """A current file as version 15 wrote it: no gate key in its suite."""
    del data["gate"], data["flaky_bounds"]


def test_a_version_15_file_reads_as_gated_on_every_criterion(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 15, _as_version_15)

    result = read_results(old)

    assert result == current and problems(result) == []
    assert (result.gate, result.flaky_bounds) == ("all", None)


def test_a_version_14_file_reads_as_every_repeat_started(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 14, _as_version_14)

    result = read_results(old)

    assert result == current and result.repeats_stopped == {}
    assert problems(result) == []


def test_a_version_13_file_reads_as_a_run_of_one_session(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 13, _as_version_13)

    result = read_results(old)

    assert result == current and problems(result) == []
    assert result.resumed == [] and result.resumed_note == ""
    assert {s.resumed for sc in result.scenarios for s in sc.stages} == {None}
    assert result.repeats_stopped == {}


def test_a_version_12_file_reads_as_a_run_ci_evals_ran(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 12, _as_version_12)

    result = read_results(old)

    assert result == current and result.imported_from is None
    assert problems(result) == []


def _as_version_10(data: dict[str, Any]) -> None:
    """A current file's stages as version 10 wrote them: every change listed."""
    _as_version_11(data)
    for scenario in data["scenarios"]:
        for stage in scenario["stages"]:
            del stage["produced_omitted"], stage["plugin_changes_omitted"]


def test_a_version_10_file_reads_with_nothing_left_out_of_its_listings(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 10, _as_version_10)

    result = read_results(old)

    assert result == current
    stages = [stage for scenario in result.scenarios for stage in scenario.stages]
    assert {(s.produced_omitted, s.plugin_changes_omitted) for s in stages} == {(0, 0)}


def _as_version_8(data: dict[str, Any]) -> None:
    """A current file's run and summaries as version 8 wrote them: no threshold."""
    _as_version_9(data)
    del data["score_at_least"]
    for summary in data["summaries"]:
        del summary["summary"]["score_at_least"]


def test_a_version_8_file_reads_with_the_k_of_n_rule(tmp_path: Path) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 8, _as_version_8)

    result = read_results(old)

    assert result == current and result.score_at_least is None
    assert problems(result) == []


def _as_version_9(data: dict[str, Any]) -> None:
    """A current file's scenarios as version 9 wrote them: no repeats, no unit."""
    _as_version_10(data)
    for scenario in data["scenarios"]:
        del scenario["repeats"], scenario["unit"]


def test_a_version_9_file_reads_with_the_runs_repeats_for_every_scenario(
    tmp_path: Path,
) -> None:
    current = read_results(V2)
    old, _ = _written_as(tmp_path, current, 9, _as_version_9)

    result = read_results(old)

    assert result == current and problems(result) == []
    assert {(s.repeats, s.unit) for s in result.scenarios} == {(current.repeat, "scenario")}


def test_a_version_9_run_of_cases_stays_inconsistent(tmp_path: Path) -> None:
    """A version 9 runner ran each case its own runs without recording them: the
    migration does not guess them, so such a file is still refused, never a verdict."""
    current = read_results(V2)
    twice = [s.model_copy(update={"repeat": r}) for s in current.scenarios for r in (0, 1)]
    current.scenarios = twice
    old, _ = _written_as(tmp_path, current, 9, _as_version_9)

    found = problems(read_results(old))

    assert any("has repeats [1, 2] but the run repeated it 1 time(s)" in p for p in found), found


@pytest.mark.parametrize("version", [v for v in sorted(MIGRATIONS) if v >= 6])
def test_a_migration_leaves_a_file_that_has_its_fields_alone(version: int) -> None:
    """From version 6 on, each step only adds what is missing: two branches that each
    add a version merge by chaining their steps in either order (docs/results.md)."""
    current = json.loads(read_results(V2).model_dump_json())
    before = json.dumps(current, sort_keys=True)
    MIGRATIONS[version](current)
    assert json.dumps(current, sort_keys=True) == before
