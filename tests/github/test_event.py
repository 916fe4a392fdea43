"""BASE/HEAD from GitHub Actions event payloads, on real repositories and clones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.github.actions import ActionsEnv
from ci_evals.github.event import EventRange, range_from_event
from ci_evals.main import main
from ci_evals.selection import decide as selection
from ci_evals.selection import diff as diff_range
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git
from tests.stage_repo import commit, plugin_repo, sha, write

ZERO = "0" * 40


@pytest.fixture
def origin(tmp_path: Path) -> dict[str, str]:
    """main moved on (a stage-1 change) after `feature` branched (a stage-2 change);
    `pr-merge` is the merge commit GitHub makes for the pull request.

        P - M1 ------ Mg   pr-merge (parents: M1, F1)
         \\          /
          F1 -------      feature
    """
    src = tmp_path / "origin"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    shas = {"P": plugin_repo(src)}
    git(src, "checkout", "-q", "-b", "feature")
    write(src, "plugin/skills/plan/SKILL.md", "v2\n")
    shas["F1"] = commit(src)
    git(src, "checkout", "-q", "main")
    write(src, "plugin/agents/researcher.md", "v2\n")
    shas["M1"] = commit(src)
    git(src, "checkout", "-q", "-b", "pr-merge")
    git(src, "merge", "-q", "--no-ff", "--no-edit", "feature")
    shas["Mg"] = sha(src, "HEAD")
    git(src, "checkout", "-q", "main")
    shas["url"] = f"file://{src}"
    shas["path"] = str(src)
    return shas


def clone(tmp_path: Path, url: str, *args: str) -> Path:
    target = tmp_path / "clone"
    git(tmp_path, "clone", "-q", *args, url, str(target))
    return target


def actions(tmp_path: Path, event: str, payload: object, sha: str | None = None) -> ActionsEnv:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return ActionsEnv(
        output_file=None, summary_file=None, event_name=event, event_path=path, sha=sha
    )


def pull_request(base: str, head: str) -> dict[str, object]:
    return {"pull_request": {"base": {"sha": base}, "head": {"sha": head}}}


def answer(repo: Path, event: EventRange) -> selection.Selection:
    assert event.base is not None
    stage_map = load_stage_map(repo / "stage_map.yaml")
    return diff_range.compute(repo, stage_map, event.base, event.head, deepen_tries=0)


def test_pull_request_merge_commit_uses_its_first_parent(
    tmp_path: Path, origin: dict[str, str]
) -> None:
    # What actions/checkout does with fetch-depth: 2 on a pull_request event.
    work = clone(tmp_path, origin["url"], "--depth", "2", "-b", "pr-merge")
    # The payload's base.sha can be older than the merge's parent (and absent here).
    env = actions(tmp_path, "pull_request", pull_request(origin["P"], origin["F1"]))

    event = range_from_event(work, env)
    chosen = answer(work, event)

    assert event.base == origin["M1"]
    assert "first parent" in event.detail
    # Exact: only the PR's stage-2 change, not main's stage-1 change.
    assert (chosen.from_stage, chosen.reason, chosen.changed) == (2, "matched", 1)


def test_pull_request_depth_one_deepens_once_to_see_the_parents(
    tmp_path: Path, origin: dict[str, str]
) -> None:
    # actions/checkout's default: fetch-depth 1, so HEAD's parents are cut off.
    work = clone(tmp_path, origin["url"], "--depth", "1", "-b", "pr-merge")
    env = actions(tmp_path, "pull_request", pull_request(origin["M1"], origin["F1"]), origin["Mg"])

    event = range_from_event(work, env, deepen=True)

    assert event.base == origin["M1"]
    assert answer(work, event).from_stage == 2


def test_pull_request_depth_one_without_deepening_falls_back(
    tmp_path: Path, origin: dict[str, str]
) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "1", "-b", "pr-merge")
    env = actions(tmp_path, "pull_request", pull_request(origin["M1"], origin["F1"]), origin["Mg"])

    event = range_from_event(work, env, deepen=False)

    assert event.base == origin["M1"]
    assert "parents are not fetched" in event.detail
    # M1 is not in a depth-1 clone: a full run, not a guess.
    assert answer(work, event).reason == "base-missing"
    # Without GITHUB_SHA naming HEAD, a HEAD with unknown parents is not trusted.
    with pytest.raises(UserError, match="neither the pull request head"):
        range_from_event(
            work, actions(tmp_path, "pull_request", pull_request(origin["M1"], origin["F1"]))
        )


def test_pull_request_head_checkout_uses_base_sha(tmp_path: Path, origin: dict[str, str]) -> None:
    work = Path(origin["path"])
    git(work, "checkout", "-q", "feature")
    env = actions(tmp_path, "pull_request_target", pull_request(origin["M1"], origin["F1"]))

    event = range_from_event(work, env)

    assert event.base == origin["M1"]
    assert answer(work, event).from_stage == 2  # three-dot: main's M1 not counted


def test_pull_request_with_another_checkout_is_an_error(
    tmp_path: Path, origin: dict[str, str]
) -> None:
    work = Path(origin["path"])  # HEAD is main, neither the PR head nor its merge
    env = actions(tmp_path, "pull_request", pull_request(origin["P"], origin["F1"]))
    with pytest.raises(UserError, match="neither the pull request head"):
        range_from_event(work, env)


def test_pull_request_without_base_sha_falls_back(tmp_path: Path, origin: dict[str, str]) -> None:
    work = Path(origin["path"])
    git(work, "checkout", "-q", "feature")
    payload = {"pull_request": {"base": {"ref": "main"}, "head": {"sha": origin["F1"]}}}

    event = range_from_event(work, actions(tmp_path, "pull_request", payload))

    assert event.base is None
    assert "pull_request.base.sha" in event.detail


def test_push(tmp_path: Path, origin: dict[str, str]) -> None:
    work = Path(origin["path"])
    git(work, "checkout", "-q", "feature")
    env = actions(tmp_path, "push", {"before": origin["P"], "after": origin["F1"]})

    event = range_from_event(work, env)

    assert (event.base, event.head) == (origin["P"], "HEAD")
    assert answer(work, event).from_stage == 2


def test_push_that_created_the_branch(tmp_path: Path, origin: dict[str, str]) -> None:
    work = Path(origin["path"])
    git(work, "checkout", "-q", "feature")
    env = actions(tmp_path, "push", {"before": ZERO, "after": origin["F1"]})

    chosen = answer(work, range_from_event(work, env))

    assert (chosen.from_stage, chosen.reason) == (1, "base-zero-sha")


def test_push_with_another_checkout_is_an_error(tmp_path: Path, origin: dict[str, str]) -> None:
    work = Path(origin["path"])
    env = actions(tmp_path, "push", {"before": origin["P"], "after": origin["F1"]})
    with pytest.raises(UserError, match="is not the push event's commit"):
        range_from_event(work, env)


def test_merge_group(tmp_path: Path, origin: dict[str, str]) -> None:
    work = Path(origin["path"])
    git(work, "checkout", "-q", "pr-merge")  # the merge queue's candidate commit
    payload = {"merge_group": {"base_sha": origin["M1"], "head_sha": origin["Mg"]}}

    event = range_from_event(work, actions(tmp_path, "merge_group", payload))

    assert event.base == origin["M1"]
    assert answer(work, event).from_stage == 2


def test_event_without_a_base(tmp_path: Path, origin: dict[str, str]) -> None:
    event = range_from_event(Path(origin["path"]), actions(tmp_path, "schedule", {}))
    assert event.base is None
    assert "'schedule' event names no base" in event.detail


def test_garbled_payload_is_a_user_error(tmp_path: Path, origin: dict[str, str]) -> None:
    env = actions(tmp_path, "push", {})
    assert env.event_path is not None
    env.event_path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError, match="cannot read the event payload"):
        range_from_event(Path(origin["path"]), env)


def test_cli_reads_the_event_and_writes_outputs(
    tmp_path: Path,
    origin: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work = clone(tmp_path, origin["url"], "--depth", "2", "-b", "pr-merge")
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(pull_request(origin["M1"], origin["F1"])), encoding="utf-8")
    output = tmp_path / "output"
    monkeypatch.chdir(work)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event_file))
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))

    assert main(["compute-stage", "--deepen", "0"]) == 0

    assert capsys.readouterr().out == "2\n"
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[:3] == ["from_stage=2", "reason=matched", "changed_count=1"]


@pytest.mark.parametrize(
    ("event", "payload", "reason"),
    [
        ("push", {"before": ZERO, "after": "HEAD_SHA"}, "base-zero-sha"),
        ("workflow_dispatch", {}, "base-missing"),
    ],
)
def test_cli_event_fallbacks(
    tmp_path: Path,
    origin: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    event: str,
    payload: dict[str, str],
    reason: str,
) -> None:
    work = Path(origin["path"])
    payload = {k: origin["M1"] if v == "HEAD_SHA" else v for k, v in payload.items()}
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(payload), encoding="utf-8")
    monkeypatch.chdir(work)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_EVENT_NAME", event)
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event_file))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)

    assert main(["compute-stage", "--json"]) == 0

    assert json.loads(capsys.readouterr().out)["reason"] == reason
