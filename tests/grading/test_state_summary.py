"""Saved stage states (after/) and the k-of-n run summary."""

from __future__ import annotations

import json
import os
import socket
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.fs.state import copy_state, links_file, save_state, state_links, view_state
from ci_evals.fs.walk import walk
from ci_evals.results.criteria import Criterion, GraderResult
from ci_evals.results.model import RunResult, ScenarioResult, StageResult
from ci_evals.results.summary import all_passed, repeat_table, summarize_run
from ci_evals.results.verdict import ScoringPolicy, evaluate


def test_a_saved_state_keeps_everything_and_shares_unchanged_files(tmp_path: Path) -> None:
    live = tmp_path / "live"
    (live / "lab").mkdir(parents=True)
    (live / "lab" / "plan.md").write_text("plan")
    (live / "notes.md").write_text("notes")
    (live / "agents").symlink_to("../plugin/agents")
    weird = os.fsdecode(b"caf\xe9.md")  # not UTF-8: recorded escaped, so never trusted
    (live / weird).write_text("bytes")

    first = tmp_path / "s1" / "after"
    assert save_state(live, first) == 3
    (live / "notes.md").write_text("notes, edited")
    second = tmp_path / "s2" / "after"
    copied = save_state(live, second, previous=first, changed={"notes.md"})

    assert copied == 2  # notes.md (changed) and the odd name; plan.md is linked
    assert (second / "lab" / "plan.md").stat().st_ino == (first / "lab" / "plan.md").stat().st_ino
    assert (first / "notes.md").read_text() == "notes"  # the earlier state is untouched
    assert (second / "notes.md").read_text() == "notes, edited"
    assert state_links(second) == {"agents": "../plugin/agents"}  # recorded, not made


def test_a_saved_state_holds_no_link_nor_special_file_only_their_record(tmp_path: Path) -> None:
    """The run folder is uploaded by a step that follows links: `after-env ->
    /proc/self/environ` would upload that step's environment (its API key)."""
    live = tmp_path / "live"
    (live / "deep").mkdir(parents=True)
    (live / "after-env").symlink_to("/proc/self/environ")
    (live / "deep" / "passwd").symlink_to("/etc/passwd")
    (live / "etc").symlink_to("/etc")  # a folder: never entered either
    (live / "dangling").symlink_to("nowhere")
    os.mkfifo(live / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(live / "deep" / "sock"))
    (live / "plain.md").write_text("plain")

    after = tmp_path / "stage" / "after"
    try:
        save_state(live, after)
    finally:
        sock.close()

    kinds = {rel: kind for rel, kind, _ in walk(after)}
    assert kinds == {"deep": "dir", "plain.md": "file"}
    assert links_file(after) == tmp_path / "stage" / "after.links.json"  # beside, not inside
    assert state_links(after) == {
        "after-env": "/proc/self/environ",
        "dangling": "nowhere",
        "deep/passwd": "/etc/passwd",
        "etc": "/etc",
    }
    record = json.loads(links_file(after).read_text())
    assert record["other"] == {"deep/sock": "socket", "pipe": "fifo"}


def test_a_graders_copy_and_view_make_the_recorded_links_again_never_followed(
    tmp_path: Path,
) -> None:
    live = tmp_path / "live"
    (live / "lab").mkdir(parents=True)
    (live / "lab" / "plan.md").write_text("plan")
    (live / "lab" / "current").symlink_to("plan.md")
    (live / "leak").symlink_to("/proc/self/environ")
    after = tmp_path / "stage" / "after"
    save_state(live, after)
    plugin = tmp_path / "plugin"
    plugin.mkdir()

    workspace, _ = copy_state(after, plugin, tmp_path / "copy", plugin_within=plugin)
    view = view_state(after, tmp_path / "view")
    for folder in (workspace, view):
        assert os.readlink(folder / "lab" / "current") == "plan.md"
        assert (folder / "lab" / "current").read_text() == "plan"  # a check can follow it
        assert os.readlink(folder / "leak") == "/proc/self/environ"
    # The view shares the saved files (read only), the copy does not.
    saved = (after / "lab" / "plan.md").stat().st_ino
    assert (view / "lab" / "plan.md").stat().st_ino == saved
    assert (workspace / "lab" / "plan.md").stat().st_ino != saved


@pytest.mark.parametrize(
    "links",
    [
        {"../escape": "x"},
        {"/abs": "x"},
        {"a/./b": "x"},
        {"ok": ""},
        {"ok": 3},
    ],
)
def test_a_forged_record_of_links_is_refused_by_name(tmp_path: Path, links: object) -> None:
    after = tmp_path / "after"
    after.mkdir()
    links_file(after).write_text(json.dumps({"links": links, "other": {}}))
    with pytest.raises(UserError) as caught:
        state_links(after)
    assert caught.value.file is not None and caught.value.file.endswith("after.links.json")


def test_a_forged_link_through_a_recorded_link_is_never_made(tmp_path: Path) -> None:
    """`a -> DIR` then `a/x`: made in order, `a/x` would land in DIR, outside the copy."""
    outside = tmp_path / "outside"
    outside.mkdir()
    after = tmp_path / "after"
    after.mkdir()
    links_file(after).write_text(json.dumps({"links": {"a": str(outside), "a/x": "y"}}))
    with pytest.raises(UserError, match="not inside a folder of the saved state"):
        view_state(after, tmp_path / "view")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("order", [("a", "a/x"), ("a/x", "a")])
def test_a_record_of_a_link_inside_another_is_refused_in_any_order(
    tmp_path: Path, order: tuple[str, str]
) -> None:
    """A saved state never records `a/x` beside a link `a` (the walk does not enter one):
    refused by the record, whatever order its keys come in, before anything is made."""
    outside = tmp_path / "outside"
    outside.mkdir()
    after = tmp_path / "after"
    after.mkdir()
    record = {"a": str(outside), "a/x": "y"}
    links_file(after).write_text(json.dumps({"links": {k: record[k] for k in order}}))
    with pytest.raises(UserError, match="'a' is a recorded link"):
        state_links(after)
    assert list(outside.iterdir()) == []


def test_a_recorded_link_where_the_state_holds_a_folder_is_one_line(tmp_path: Path) -> None:
    """A record naming a path the saved state holds as a folder (an edited run folder)
    is refused by name when a grader's view is made, not a FileExistsError."""
    after = tmp_path / "after"
    (after / "a").mkdir(parents=True)
    (after / "a" / "x").write_text("x\n")
    links_file(after).write_text(json.dumps({"links": {"a": "/etc"}}))
    with pytest.raises(UserError, match="the recorded link 'a' cannot be made") as caught:
        view_state(after, tmp_path / "view")
    assert caught.value.file is not None and caught.value.file.endswith("after.links.json")


def test_a_graders_copy_has_a_fresh_plugin_its_links_resolve_to(tmp_path: Path) -> None:
    state = tmp_path / "after"
    state.mkdir()
    (state / "out.md").write_text("x")
    (state / "agents").symlink_to("../plugin/agents")
    plugin = tmp_path / "repo-plugin"
    (plugin / "agents").mkdir(parents=True)
    (plugin / "agents" / "review.md").write_text("review")

    workspace, copy = copy_state(state, plugin, tmp_path / "copy", plugin_within=plugin)
    (workspace / "out.md").write_text("the grader wrote here")

    assert (workspace / "agents" / "review.md").read_text() == "review"
    assert (workspace / "agents").resolve() == (copy / "agents").resolve()
    assert (state / "out.md").read_text() == "x"


def verdict(score: float) -> object:
    criteria = (
        Criterion(id="written", kind="checklist", score=1, passed=True, source="reviewer"),
        Criterion(id="quality", kind="analytic", score=score, passed=True, source="reviewer"),
    )
    return evaluate([GraderResult(grader="reviewer", criteria=criteria)], ScoringPolicy())


def run_of(*stages_per_repeat: list[StageResult]) -> RunResult:
    return RunResult(
        run_id="r", tool_version="0", started_at=datetime.now(timezone.utc), from_stage=1,
        suite_file="s", repeat=len(stages_per_repeat),
        scenarios=[
            ScenarioResult(id="acme", repeat=i, stages=stages)
            for i, stages in enumerate(stages_per_repeat)
        ],
    )  # fmt: skip


def graded(score: float) -> StageResult:
    v = verdict(score)
    return StageResult(number=1, name="plan", status=v.verdict, grading=v)  # type: ignore[attr-defined]


def test_k_of_n_over_repeats_with_statistics() -> None:
    run = run_of(
        [graded(5), StageResult(number=2, name="write", status="completed", graded=False)],
        [graded(4), StageResult(number=2, name="write", status="completed", graded=False)],
        [graded(2), StageResult(number=2, name="write", status="skipped")],
    )
    plan, write = summarize_run(run, pass_at_least=2)

    assert (plan.summary.verdict, plan.summary.passed, plan.summary.runs) == ("passed", 2, 3)
    assert plan.summary.analytic_mean.mean == 11 / 3
    assert plan.summary.analytic_mean.ci95_low is not None
    quality = next(c for c in plan.summary.criteria if c.id == "quality")
    assert (quality.passed, quality.flaky) == (2, True)
    # Stage 2 did not run in the third repeat: that counts as an error, not a pass.
    assert (write.summary.passed, write.summary.errors, write.summary.verdict) == (2, 1, "passed")
    assert all_passed([plan, write])
    assert not all_passed(summarize_run(run, pass_at_least=None))  # every repeat must pass

    table = repeat_table([plan, write])
    assert "acme      1 plan   passed   2/3 (need 2)  3.67" in table
    assert "    quality (analytic): mean 3.67 stdev 1.53 passed 2/3  flaky" in table


def test_a_limit_counts_as_failed_and_completed_as_passed() -> None:
    run = run_of(
        [StageResult(number=1, name="plan", status="limit", limit_hit="turns")],
        [StageResult(number=1, name="plan", status="completed", graded=False)],
    )
    (summary,) = summarize_run(run, pass_at_least=2)
    assert summary.summary.verdicts == ("failed", "passed")
    assert summary.summary.verdict == "failed"


def test_a_saved_state_keeps_no_setuid_bit(tmp_path: Path) -> None:
    live = tmp_path / "live"
    live.mkdir()
    (live / "rootsh").write_bytes(b"#!/bin/sh\n")
    (live / "rootsh").chmod(0o6755)
    save_state(live, tmp_path / "after")
    assert stat.S_IMODE((tmp_path / "after" / "rootsh").stat().st_mode) == 0o755
