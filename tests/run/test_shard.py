"""`ci-evals plan`, `run --shard I/K`, `merge`: the split, and real shards merged back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.report.verify import problems
from ci_evals.results.model import ScenarioResult, read_results, write_results
from ci_evals.results.summary import summarize_run
from ci_evals.results.verdict import ScoringPolicy, evaluate
from ci_evals.run import shard
from ci_evals.run.shard import Durations, Unit, assign
from tests.conftest import git
from tests.grading.review_suite import make_review_suite
from tests.paths import DATA
from tests.run.test_run_command import _repo_with_stage_map, base_env, ci_evals
from tests.run_helpers import default_rules, make_suite
from tests.shard_helpers import comparable

# -- the split: pure ----------------------------------------------------------------------


def test_longest_first_to_the_least_loaded_shard() -> None:
    units = [Unit(f"s{i}", 0) for i in range(5)]
    got = assign(units, [7.0, 5.0, 4.0, 3.0, 3.0], 2)
    assert got.shards == (1, 2, 2, 1, 2)  # 7+3 | 5+4+3
    assert (got.load(1), got.load(2)) == (10.0, 12.0)
    assert got == assign(units, [7.0, 5.0, 4.0, 3.0, 3.0], 2)  # same inputs, same split
    assert got.sha256 != assign(units, [7.0, 5.0, 4.0, 3.0, 3.0], 3).sha256


def test_units_recorded_as_taking_no_time_still_spread_over_every_shard() -> None:
    # A shard with no unit writes no benchmark for --tasks, and merge refused a correct run.
    units = [Unit(f"s{i}", 0) for i in range(4)]
    assert assign(units, [0.0] * 4, 3).shards == (1, 2, 3, 1)


def test_without_durations_every_stage_counts_one_and_ties_go_in_order() -> None:
    units = [Unit("a", r) for r in range(3)] + [Unit("b", r) for r in range(3)]
    got = shard.plan_units(units, lambda _: [4, 5], shard.NO_DURATIONS, 4)
    assert got.estimates == (2.0,) * 6
    assert got.shards == (1, 2, 3, 4, 1, 2)
    assert shard.plan_units(units, lambda _: [4], shard.NO_DURATIONS, 9).count == 6


def test_durations_fall_back_to_the_stage_then_to_the_typical_stage() -> None:
    recorded = Durations({("", "a", 4): [10.0, 20.0], ("", "b", 4): [5.0], ("", "a", 5): [2.0]})
    assert recorded.estimate(Unit("a", 0), [4, 5]) == 17.0  # mean 15 + 2
    assert recorded.estimate(Unit("c", 1), [4]) == 10.0  # stage 4 elsewhere: (15 + 5) / 2
    assert recorded.estimate(Unit("a", 0), [6]) == pytest.approx((15 + 5 + 2) / 3)


def test_each_shard_gets_its_part_of_the_budget_and_together_the_whole() -> None:
    units = [Unit(f"s{i}", 0) for i in range(5)] + [Unit("t", 0, run="2-x/t")]
    got = assign(units, [1.0] * 6, 3)  # 0:1 1:2 2:3 3:1 4:2 | 5:3
    parts = [got.record(k, budget_usd=5.0) for k in (1, 2, 3)]
    assert [p.budget_usd for p in parts] == [2.0, 2.0, 1.0]  # 2, 2 and 1 of the 5 units
    assert {p.run_budget_usd for p in parts} == {5.0}
    assert got.record(3, "2-x/t", 0.5).budget_usd == 0.5  # the task run's only unit
    assert got.record(1, "2-x/t", 0.5).budget_usd == 0.0  # none of that run's units
    assert got.record(1).budget_usd is None and got.record(1).run_budget_usd is None
    assert shard.budget_share(3.0, 1, 3) == 1.0


@pytest.mark.parametrize("spec", ["2", "0/2", "3/2", "a/b", "1/"])
def test_a_bad_shard_is_one_line_naming_the_option(spec: str) -> None:
    with pytest.raises(UserError) as caught:
        shard.parse_spec(spec)
    assert caught.value.field == "--shard"


def test_durations_that_are_not_a_results_file_name_it(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(UserError) as caught:
        shard.read_durations(tmp_path)
    assert "results.json" in str(caught.value)
    with pytest.raises(UserError, match="--durations"):
        shard.read_durations(tmp_path / "missing")


# -- real shards: plan, run --shard, merge, on the stub model -------------------------------

SCENARIOS = ("acme", "globex", "initech")


def _plan(suite: Path, cwd: Path, *args: str) -> list[str]:
    proc = ci_evals("plan", "--suite", str(suite), *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return [entry["shard"] for entry in json.loads(proc.stdout)["include"]]


def _shard(suite: Path, stub: Path, cwd: Path, spec: str, out: Path, *args: str) -> None:
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--shard", spec,
        "--out", str(out), "--jobs", "2", *args, cwd=cwd,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_merged_shards_equal_the_unsharded_run(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path, scenarios=SCENARIOS)
    common = ("--from-stage", "4", "--repeat", "2")
    specs = _plan(suite, tmp_path, "--shards", "2", *common)
    assert specs == ["1/2", "2/2"]
    for k, spec in enumerate(specs, start=1):
        _shard(suite, stub, tmp_path, spec, tmp_path / f"s{k}", *common)
    first = read_results(tmp_path / "s1")
    assert first.shard is not None and (first.shard.index, first.shard.count) == (1, 2)
    assert [(u.scenario, u.repeat) for u in first.shard.units] == [
        ("acme", 0), ("globex", 0), ("initech", 0),
    ]  # fmt: skip
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", str(tmp_path / "full"),
        "--jobs", "2", *common, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr

    merged = tmp_path / "merged"
    proc = ci_evals("merge", str(tmp_path / "s2"), str(tmp_path / "s1"), "--out", str(merged),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("merged 2 shard(s), 6 unit(s)")
    result = read_results(merged)
    assert comparable(result) == comparable(read_results(tmp_path / "full"))
    assert result.merged_shards is not None and len(result.merged_shards) == 2
    for scenario in result.scenarios:  # each unit's folder came along
        for stage in scenario.stages:
            assert stage.trajectory is not None and (merged / stage.trajectory).is_file()
    report = ci_evals("report", str(merged), "--markdown", str(tmp_path / "r.md"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    cost = [line for line in (tmp_path / "r.md").read_text().splitlines() if "Shards:" in line]
    assert len(cost) == 1 and cost[0].startswith("- Shards: 2 x ")
    assert "the cheapest is" in cost[0] and "60 s set-up assumed" in cost[0]

    # Fail closed: a shard missing, a shard twice, shards of another plan.
    missing = ci_evals("merge", str(tmp_path / "s1"), "--out", str(tmp_path / "m1"), cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "ci-evals: error: shard.index: shard(s) 2/2 missing: a merge without every shard is "
        "no run and no pass (pass every shard's results)"
    ]
    assert not (tmp_path / "m1" / "results.json").exists()
    twice = ci_evals(
        "merge", str(tmp_path / "s1"), str(tmp_path / "s1"), "--out", str(tmp_path / "m2"),
        cwd=tmp_path,
    )  # fmt: skip
    assert twice.returncode == 2 and "shard 1/2 is given twice" in twice.stderr
    _shard(suite, stub, tmp_path, "2/2", tmp_path / "other", "--from-stage", "5")
    other = ci_evals(
        "merge", str(tmp_path / "s1"), str(tmp_path / "other"), "--out", str(tmp_path / "m3"),
        cwd=tmp_path,
    )  # fmt: skip
    assert other.returncode == 2
    line = other.stderr.strip()
    assert "\n" not in line
    assert f"{tmp_path / 's1'} and {tmp_path / 'other'} are shards of different runs" in line
    assert "from_stage is 4 and 5" in line


@pytest.mark.slow
def test_a_shard_spends_only_its_part_of_the_run_budget(tmp_path: Path) -> None:
    """Two shards of a $0.02 run: each may spend $0.01, so a stage that costs more ends
    `limit` there and its scenario's next stage is skipped: the budget is spent. They
    split the run's max_concurrency the same way."""
    usage = "        usage: {input_tokens: 100000, output_tokens: 10000}\n"
    rules = default_rules().replace(
        '      - text: "stage 4 done"\n', '      - text: "stage 4 done"\n' + usage
    )
    suite, stub = make_suite(tmp_path, scenarios=("acme", "globex"), rules=rules, budget_usd=0.02)
    suite.write_text(suite.read_text() + "max_concurrency: 5\n")  # split too: 2 each
    plan = ci_evals("plan", "--suite", str(suite), "--from-stage", "4", "--shards", "2",
                    cwd=tmp_path)  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "shard 1/2: 1 unit(s), estimate 2.0, budget $0.0100 of the run's $0.0200" in plan.stderr
    for k in (1, 2):
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", f"stub:{stub}", "--shard", f"{k}/2",
            "--from-stage", "4", "--out", str(tmp_path / f"s{k}"), cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert (
            f"ci-evals: shard {k}/2: budget $0.0100, its part of the run's $0.0200 by the "
            "units it runs" in proc.stderr
        )
        assert (
            f"ci-evals: shard {k}/2: 2 model request(s) at once, its part of the run's "
            "max_concurrency 5" in proc.stderr
        )
        result = read_results(tmp_path / f"s{k}")
        assert result.budget_usd == 0.01
        assert result.shard is not None and result.shard.run_budget_usd == 0.02
        four, five = result.scenarios[0].stages
        assert (four.status, four.limit_hit) == ("limit", "budget")
        assert five.status == "skipped"
    merged = tmp_path / "merged"
    proc = ci_evals("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(merged),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert read_results(merged).budget_usd == 0.02  # the run's, as the unsharded run records


def test_merge_refuses_a_file_that_is_no_shard_or_disagrees_with_itself(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    whole.mkdir()
    data = json.loads((DATA / "results-v2-full.json").read_text())
    (whole / "results.json").write_text(json.dumps(data))
    proc = ci_evals("merge", str(whole), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "shard: not a shard" in proc.stderr and "results.json" in proc.stderr


def test_run_shard_beyond_the_units_is_refused(tmp_path: Path) -> None:
    suite, stub = make_suite(tmp_path)
    proc = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--shard", "1/3", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ci-evals: error: --shard: shard 1/3: the run has 1 work unit(s), so at most 1 "
        "shard(s) (use the shard count `ci-evals plan` printed)"
    )


def test_plan_with_base_as_run_decides_and_says_when_nothing_runs(tmp_path: Path) -> None:
    repo, suite, _ = _repo_with_stage_map(tmp_path)
    output = tmp_path / "github_output"
    output.touch()
    env = base_env(GITHUB_OUTPUT=str(output))
    proc = ci_evals("plan", "--suite", str(suite), "--base", "HEAD", "--shards", "3", cwd=repo,
                    env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"include": []}
    assert "nothing to run" in proc.stderr
    assert "shards=0\n" in output.read_text() and "from_stage=none\n" in output.read_text()

    (repo / "plugin" / "commands" / "s4.md").write_text("Do stage 4 better for $ARGUMENTS.\n")
    git(repo, "commit", "-q", "-am", "change stage 4")
    proc = ci_evals("plan", "--suite", str(suite), "--base", "HEAD~1", "--shards", "3", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"include": [{"shard": "1/1", "from_stage": "4"}]}
    assert "1 work unit(s): 1 shard(s), not 3" in proc.stderr


def _edited(source: Path, target: Path, old: str, new: str) -> Path:
    """A copy of the shard at `source` whose results.json says `new` wherever it said
    `old` (a JSON string): still a file that agrees with itself."""
    shutil.copytree(source, target, symlinks=True)
    text = (target / "results.json").read_text()
    (target / "results.json").write_text(text.replace(json.dumps(old), json.dumps(new)))
    return target


@pytest.mark.slow
def test_merge_refuses_a_shard_holding_units_of_another_plan_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """Shard 2 (globex) edited to hold another unit: renamed (globex is then in no shard,
    and the merged run would miss it unnoticed) or a unit of shard 1 (acme twice). Each
    file still agrees with itself and the positions add up, but the units are not the
    plan their digest names: refused, one line, and no run folder is left behind."""
    suite, stub = make_suite(tmp_path, scenarios=SCENARIOS)
    specs = _plan(suite, tmp_path, "--shards", "2", "--from-stage", "4")
    for k, spec in enumerate(specs, start=1):
        _shard(suite, stub, tmp_path, spec, tmp_path / f"s{k}", "--from-stage", "4")
    held = read_results(tmp_path / "s2").shard
    assert held is not None and [u.scenario for u in held.units] == ["globex"]
    for name, new in (("renamed", "gamma"), ("twice", "acme")):
        edited = _edited(tmp_path / "s2", tmp_path / name, "globex", new)
        out = tmp_path / f"m-{name}"
        proc = ci_evals("merge", str(tmp_path / "s1"), str(edited), "--out", str(out),
                        cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "the units the shards hold are not the plan their plan_sha256 names" in proc.stderr
        assert not out.exists()


@pytest.mark.slow
def test_a_merged_run_is_dirty_when_any_shard_ran_with_uncommitted_changes(
    tmp_path: Path,
) -> None:
    """Two shards at one commit, the second with a fixture edited and not committed: the
    merged run says it ran with uncommitted changes (a baseline from it says so)."""
    suite, stub = make_suite(tmp_path, scenarios=("acme", "globex"))
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "suite")
    _shard(suite, stub, tmp_path, "1/2", tmp_path / "s1", "--from-stage", "4")
    (tmp_path / "fixtures" / "3-s3-output" / "out3.md").write_text("edited, not committed\n")
    _shard(suite, stub, tmp_path, "2/2", tmp_path / "s2", "--from-stage", "4")
    first, second = read_results(tmp_path / "s1"), read_results(tmp_path / "s2")
    assert first.revision is not None and not first.revision.dirty
    assert second.revision is not None and second.revision.dirty
    merged = tmp_path / "merged"
    proc = ci_evals("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(merged),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    revision = read_results(merged).revision
    assert revision is not None and revision.commit == first.revision.commit
    assert revision.dirty


@pytest.mark.slow
def test_merge_copies_no_link_and_refuses_a_shard_holding_one(tmp_path: Path) -> None:
    """The merged run folder is uploaded, and an uploader follows links: a run records
    its links as data (after.links.json), so real shards merge into a folder with none;
    a shard holding one (`after/leak -> /proc/self/environ`, a pipe, a unit folder that
    is itself a link) is refused in one line, and nothing is written."""
    suite, stub = make_suite(tmp_path, scenarios=("acme", "globex"))
    for k, spec in enumerate(("1/2", "2/2"), start=1):
        _shard(suite, stub, tmp_path, spec, tmp_path / f"s{k}", "--from-stage", "4")
    merged = tmp_path / "merged"
    proc = ci_evals("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(merged),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    specials = [str(p) for p in merged.rglob("*") if p.is_symlink() or not (p.is_dir() or p.is_file())]  # fmt: skip  # noqa: E501
    assert specials == []
    assert list(merged.rglob("after.links.json"))  # the links, as data

    def planted(name: str, plant: Callable[[Path], None]) -> Path:
        copy = tmp_path / name
        shutil.copytree(tmp_path / "s1", copy, symlinks=True)
        plant(copy)
        return copy

    cases = {
        "link": lambda c: (c / "acme" / "4-s4" / "after" / "leak").symlink_to("/proc/self/environ"),
        "fifo": lambda c: os.mkfifo(c / "acme" / "4-s4" / "produced-pipe"),
        "unit": lambda c: (shutil.rmtree(c / "acme"), (c / "acme").symlink_to("/etc")),
    }
    for name, plant in cases.items():
        out = tmp_path / f"m-{name}"
        shard_dir = planted(name, plant)
        proc = ci_evals("merge", str(shard_dir), str(tmp_path / "s2"), "--out", str(out),
                        cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 2, (name, proc.stdout)
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "is a link or a special file: a shard's run folder holds none" in proc.stderr
        assert not out.exists(), name


def _forged(
    source: Path, target: Path, *, scenario: str | None = None, stage: str | None = None
) -> Path:
    """A copy of the one-shard run at `source` whose unit is renamed `scenario` or whose
    stage 4 is renamed `stage`, the plan digest recomputed: it is unkeyed, anyone can."""
    shutil.copytree(source, target, symlinks=True)
    data = json.loads((target / "results.json").read_text())
    if scenario is not None:
        data["scenarios"][0]["id"] = scenario
        data["shard"]["units"][0]["scenario"] = scenario
        for summary in data["summaries"]:
            summary["scenario"] = scenario
        units = [(Unit(scenario, 0), 1)]
        data["shard"]["plan_sha256"] = shard.plan_sha256(1, units)
    if stage is not None:
        data["scenarios"][0]["stages"][0]["name"] = stage
        data["summaries"][0]["name"] = stage
    (target / "results.json").write_text(json.dumps(data))
    return target


BAD_IDS = ["../escape", "/tmp/abs", "..", "", "a\x00b", "a/b", "a\\b", "x" * 300]


@pytest.mark.slow
def test_merge_refuses_ids_that_would_be_paths_and_writes_nothing(tmp_path: Path) -> None:
    """A shard whose scenario id or stage name is no name (`..`, a separator, NUL, empty,
    absolute, too long) is refused in one line naming the file and the field, before
    any of it is joined to a folder: `../escape` copied `escape/` beside --out."""
    suite, stub = make_suite(tmp_path, scenarios=("acme",))
    _shard(suite, stub, tmp_path, "1/1", tmp_path / "runs" / "s1", "--from-stage", "4")
    (tmp_path / "runs" / "escape").mkdir()  # what `../escape` names, beside the shard
    (tmp_path / "runs" / "escape" / "planted").write_text("outside the shard\n")
    cases = [("id", bad) for bad in BAD_IDS] + [("stage", "../s4"), ("stage", "s4/x")]
    merged = tmp_path / "merged"  # each --out is a folder in it; `../escape` its sibling
    merged.mkdir()
    for n, (what, bad) in enumerate(cases):
        forged = tmp_path / "runs" / f"forged{n}"
        _forged(tmp_path / "runs" / "s1", forged, **{"scenario" if what == "id" else "stage": bad})
        out = merged / f"m{n}"
        proc = ci_evals("merge", str(forged), "--out", str(out), cwd=tmp_path)
        assert proc.returncode == 2, (bad, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "an id that would be a folder is refused" in proc.stderr, proc.stderr
        assert "results.json" in proc.stderr and "scenarios[0]." in proc.stderr
        assert list(merged.iterdir()) == [], bad  # nothing beside --out, nor --out itself


GOOD = '[{"criterion": "written", "score": 1}, {"criterion": "quality", "score": 4}]'
LOW = '[{"criterion": "written", "score": 0}, {"criterion": "quality", "score": 1}]'


def _reviewed_shards(tmp_path: Path, **env: str) -> tuple[Path, Path, Path]:
    """Two real shards of a suite whose stage 1 has a reviewer: shard 1 `good` passes,
    shard 2 `low` fails (its scorecard scores written 0, quality 1). Returns the suite's
    folder and the two shard folders."""
    suite, stub = make_review_suite(tmp_path / "suite", {"good": GOOD, "low": LOW})
    assert _plan(suite, tmp_path, "--shards", "2", "--from-stage", "1") == ["1/2", "2/2"]
    for k in (1, 2):
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", f"stub:{stub}", "--shard", f"{k}/2",
            "--from-stage", "1", "--out", str(tmp_path / f"s{k}"), cwd=tmp_path,
            env=base_env(**env),
        )  # fmt: skip
        assert proc.returncode == (0, 1)[k - 1], proc.stderr
    return tmp_path / "suite", tmp_path / "s1", tmp_path / "s2"


def _passed_as_good(good: Path, low: Path, target: Path) -> Path:
    """A copy of the failed shard `low` whose results.json says what `good`'s says of its
    scenario (a pass), paths moved to `low/`: a file that agrees with itself and with the
    scoring rules, edited after the fact; the graders' files beside it are left as they were."""
    shutil.copytree(low, target, symlinks=True)
    passed = read_results(good).scenarios[0]
    forged = read_results(low)
    moved = json.loads(passed.model_dump_json().replace('"good/', '"low/'))
    forged.scenarios[0].stages = ScenarioResult.model_validate(moved).stages
    forged.summaries = summarize_run(forged, forged.pass_at_least)
    assert problems(forged) == []  # what `report` would believe
    write_results(target, forged)
    return target


@pytest.mark.slow
def test_merge_refuses_a_failed_shard_edited_into_a_pass_against_its_scorecard(
    tmp_path: Path,
) -> None:
    """The failed shard's results.json rewritten into a consistent pass was merged and
    reported passed while its scorecard.json said score 0. Now each graded stage is held
    to the evidence beside it: the reviewer's output file by its SHA-256, its scorecard,
    and its final message read again. Each forgery is refused, one line, nothing written."""
    _, good, low = _reviewed_shards(tmp_path)
    edited = _passed_as_good(good, low, tmp_path / "edited")
    stage = Path("low") / "1-s1"
    cases = {"results.json alone": "reviewer's output reviewer-output.txt: its SHA-256"}
    for name, expected in cases.items():
        out = tmp_path / "m"
        proc = ci_evals("merge", str(good), str(edited), "--out", str(out), cwd=tmp_path)
        assert proc.returncode == 2, (name, proc.stdout)
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "disagrees with the evidence in its folder: low stage 1 (s1)" in proc.stderr
        assert expected in proc.stderr, proc.stderr
        assert not out.exists()
    # The output file too, and the scorecard's result: the final message read again.
    shutil.copy(good / "good" / "1-s1" / "reviewer-output.txt", edited / stage)
    proc = ci_evals("merge", str(good), str(edited), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 2 and "reviewer's scorecard.json says written 0, quality 1" in (
        proc.stderr
    ), proc.stderr
    card = json.loads((edited / stage / "scorecard.json").read_text())
    card["result"]["criteria"] = json.loads(
        (good / "good" / "1-s1" / "scorecard.json").read_text()
    )["result"]["criteria"]
    (edited / stage / "scorecard.json").write_text(json.dumps(card))
    proc = ci_evals("merge", str(good), str(edited), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert "the reviewer's final message is not the one scorecard.json holds" in proc.stderr
    # The reviewer dropped from the verdict: its scorecard still lies beside the stage.
    dropped = _passed_as_good(good, low, tmp_path / "dropped")
    forged = read_results(dropped)
    stage_one = forged.scenarios[0].stages[0]
    assert stage_one.grading is not None
    kept = [g for g in stage_one.grading.graders if g.grader != "reviewer"]
    stage_one.grading = evaluate(kept, ScoringPolicy())  # checks alone: a pass
    assert stage_one.grading.verdict == "passed"
    forged.summaries = summarize_run(forged, forged.pass_at_least)
    assert problems(forged) == []
    write_results(dropped, forged)
    proc = ci_evals("merge", str(good), str(dropped), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert "scorecard.json lies beside it, but no grader of its verdict records it" in (
        proc.stderr
    ), proc.stderr
    assert not (tmp_path / "m").exists()
    # The shards as `run --shard` left them still merge, and the run fails as it did.
    proc = ci_evals("merge", str(good), str(low), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = ci_evals("report", str(tmp_path / "m"), "--markdown", str(tmp_path / "r.md"),
                      cwd=tmp_path)  # fmt: skip
    assert report.returncode == 1, report.stderr


KEY = "k" * 8 + "0123456789abcdef0123456789abcdef"  # a run's secret, as the workflow gives it


def _merge(*shards: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    args = [str(shard) for shard in shards]
    return ci_evals("merge", *args, "--out", str(out), cwd=out.parent, env=base_env(**env))


@pytest.mark.slow
def test_with_a_key_merge_takes_only_the_shards_signed_in_this_run(tmp_path: Path) -> None:
    """Evidence forged along with results.json (the good scenario's final message and
    scorecard copied over the failed one's) agrees with itself: without a key merge takes
    it, saying the shards are unsigned. With the run's key, the shard's signed listing no
    longer matches; a shard signed in another workflow run, or not at all, is refused too.
    The key is nowhere in the shard's folder."""
    signed = {"CI_EVALS_SHARD_KEY": KEY, "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "7"}
    _, good, low = _reviewed_shards(tmp_path, **signed)
    for shard_dir in (good, low):
        assert (shard_dir / "shard.mac.json").is_file()
        for path in shard_dir.rglob("*"):
            assert not path.is_file() or KEY.encode() not in path.read_bytes(), path
    proc = _merge(good, low, out=tmp_path / "ok", **signed)
    assert proc.returncode == 0, proc.stderr
    assert "unsigned" not in proc.stderr

    forged = _passed_as_good(good, low, tmp_path / "forged")
    for name in ("reviewer-output.txt", "scorecard.json"):
        shutil.copy(good / "good" / "1-s1" / name, forged / "low" / "1-s1" / name)
    unsigned = _merge(good, forged, out=tmp_path / "unsigned")
    assert unsigned.returncode == 0, unsigned.stderr  # what the evidence alone cannot see
    assert unsigned.stderr.splitlines()[0].startswith(
        "ci-evals merge: the shards are unsigned (no CI_EVALS_SHARD_KEY)"
    )
    refused = _merge(good, forged, out=tmp_path / "m1", **signed)
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "forged/shard.mac.json: entries: the shard's folder is not what was signed: " in (
        refused.stderr
    )
    assert not (tmp_path / "m1").exists()

    other_run = _merge(good, low, out=tmp_path / "m2", **{**signed, "GITHUB_RUN_ID": "8"})
    assert other_run.returncode == 2
    assert "mac: the shard's MAC is not this run's key's" in other_run.stderr
    bare = tmp_path / "bare"
    shutil.copytree(low, bare, symlinks=True)
    (bare / "shard.mac.json").unlink()
    proc = _merge(good, bare, out=tmp_path / "m3", **signed)
    assert proc.returncode == 2 and "bare/shard.mac.json: no valid shard MAC" in proc.stderr
    short = _merge(good, low, out=tmp_path / "m4", CI_EVALS_SHARD_KEY="short")
    assert short.returncode == 2 and "CI_EVALS_SHARD_KEY: the key is 5 characters" in (short.stderr)
    assert not any((tmp_path / f"m{k}").exists() for k in (2, 3, 4))


@pytest.mark.slow
def test_an_unsigned_merge_says_which_verdicts_it_takes_as_written(tmp_path: Path) -> None:
    """A stage graded only by a check leaves no evidence file: its failed check rewritten
    into a consistent pass is merged unsigned (merge does not run checks again), and
    merge says exactly that, so no one reads the merged pass as checked. With the key,
    the edit is refused."""
    signed = {"CI_EVALS_SHARD_KEY": KEY, "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "7"}
    suite, stub = make_suite(tmp_path, scenarios=("acme", "globex"))
    line = '  - name: s5\n    prompt: "/demo:s5 {company}"\n'
    checks = '    checks:\n      - { files: "never.md", count: 1 }\n'
    suite.write_text(suite.read_text().replace(line, line + checks))
    for k in (1, 2):
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", f"stub:{stub}", "--shard", f"{k}/2",
            "--from-stage", "5", "--out", str(tmp_path / f"s{k}"), cwd=tmp_path,
            env=base_env(**signed),
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr  # the check fails
    for k in (1, 2):
        result = read_results(tmp_path / f"s{k}")
        for unit in result.scenarios:
            stage_result = unit.stages[0]
            assert stage_result.grading is not None
            grader = stage_result.grading.graders[0]
            passed = tuple(
                c.model_copy(update={"passed": True, "score": 1.0}) for c in grader.criteria
            )
            verdict = evaluate([grader.model_copy(update={"criteria": passed})], ScoringPolicy())
            stage_result.grading, stage_result.status = verdict, verdict.verdict
            stage_result.error = None
        result.summaries = summarize_run(result, result.pass_at_least)
        assert problems(result) == []
        write_results(tmp_path / f"s{k}", result)
    unsigned = _merge(tmp_path / "s1", tmp_path / "s2", out=tmp_path / "m")
    assert unsigned.returncode == 0, unsigned.stderr
    assert len(unsigned.stderr.strip().splitlines()) == 1, unsigned.stderr
    assert "checks, trajectory checks, contracts and plugin_eval graders were not run " in (
        unsigned.stderr
    )
    refused = _merge(tmp_path / "s1", tmp_path / "s2", out=tmp_path / "m2", **signed)
    assert refused.returncode == 2, refused.stderr
    assert "results.json' changed" in refused.stderr


VARIANTS = """  - name: s5-variants
    match: {command: demo:s5}
    variants:
      - [{tools: [{write: {path: out5.md, content: "stage 5\\n"}}]}, {text: "written"}]
      - [{text: "nothing written"}]
"""


@pytest.mark.slow
def test_a_stubs_rotating_variants_give_a_sharded_run_the_unsharded_runs_verdicts(
    tmp_path: Path,
) -> None:
    # Each shard starts its own stub; variants rotated by call order restarted
    # in each, so shard 2's units got the first variant where the whole run's got
    # the second. Chosen by the unit's place in the plan, any split answers alike.
    suite, stub = make_suite(tmp_path, scenarios=SCENARIOS, rules=VARIANTS + default_rules())
    text = suite.read_text()
    stage5 = '  - name: s5\n    prompt: "/demo:s5 {company}"\n'
    suite.write_text(
        text.replace(stage5, stage5 + "    checks:\n      - {files: out5.md, count: 1}\n")
    )
    common = ("--from-stage", "5", "--repeat", "2")
    runs = {}
    for name, extra in (("full", ()), ("s1", ("--shard", "1/2")), ("s2", ("--shard", "2/2"))):
        proc = ci_evals(
            "run", "--suite", str(suite), "--model", f"stub:{stub}", "--out",
            str(tmp_path / name), "--jobs", "2", *common, *extra, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr  # 1: a unit got the variant that fails
        runs[name] = proc
    merged = tmp_path / "merged"
    proc = ci_evals("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(merged),
                    cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    full = read_results(tmp_path / "full")
    verdicts = [(s.id, s.repeat, s.stages[0].status) for s in full.scenarios]
    assert {status for *_, status in verdicts} == {"passed", "failed"}, verdicts
    assert [
        (s.id, s.repeat, s.stages[0].status) for s in read_results(merged).scenarios
    ] == verdicts
    assert comparable(read_results(merged)) == comparable(full)
    assert runs["full"].returncode == 1
    # The same in every run: the variants follow the plan, not the clock.
    again = ci_evals(
        "run", "--suite", str(suite), "--model", f"stub:{stub}", "--out",
        str(tmp_path / "again"), "--jobs", "2", *common, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 1, again.stderr
    assert comparable(read_results(tmp_path / "again")) == comparable(full)
    assert "change between repeats and scenarios" in runs["full"].stdout
