"""Reading every earlier `results.json` version: a chain of migrations to the current one.

A baseline saved last week must stay readable after the next schema change.
Each migration takes the JSON object of version N to version N + 1 (plain
dicts, before any validation) and says in its docstring what changed;
`migrate` applies them in order and the models then validate the result as a
file of the current version. A file newer than this ci-evals is refused with
one line: it would be half-read.

From version 6 on, each migration only adds what is missing (`setdefault`),
so it leaves a file alone that already has its fields: two branches that each
add a version merge by chaining their migrations in either order (renumber
one), and a file written by either branch reads the same. Each version, what it
added and how an older file is migrated: docs/results.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ci_evals.errors import UserError

VERSION = 16

Data = dict[str, Any]


def _v1_to_v2(data: Data) -> Data:
    """Add `graded` to every stage, and where the agent ran (`local`, unisolated).

    A version 1 file does not say whether a stage had graders. A stage with a
    verdict had; a `completed` one in a finished run had none (a v1 runner
    left a graded stage `completed` only when the run was interrupted before
    grading). Anything else is unknown and taken as graded: a `completed`
    stage of an unfinished run is then reported as never graded, not a pass.
    """
    # Every version 1 run ran its agent on the host.
    data.setdefault("sandbox", "local")
    data.setdefault("isolated", False)
    finished = data.get("status") == "completed"
    for scenario in _dicts(data.get("scenarios")):
        for stage in _dicts(scenario.get("stages")):
            ungraded = (
                finished and stage.get("status") == "completed" and stage.get("grading") is None
            )
            stage.setdefault("graded", not ungraded)
    return data


def _v2_to_v3(data: Data) -> Data:
    """`suite` and `revision` did not exist: unknown (None), never guessed.

    A baseline without them is still compared, and the report says that which
    suite and which commit it ran cannot be checked (docs/report.md).
    """
    data.setdefault("suite", None)
    data.setdefault("revision", None)
    return data


def _v3_to_v4(data: Data) -> Data:
    """Add `stub_misses: []` to every stage.

    A version 3 runner did not look for requests its stub script could not
    answer; none were recorded, and the statuses it wrote stand as written.
    (A version 3 reader refuses a version 4 file — "upgrade ci-evals" —
    rather than misread a stage made an error by its misses.)
    """
    for scenario in _dicts(data.get("scenarios")):
        for stage in _dicts(scenario.get("stages")):
            stage.setdefault("stub_misses", [])
    return data


def _v4_to_v5(data: Data) -> Data:
    """Add `forwarded: null`: a version 4 runner did not record what its endpoint
    forwarded, and its `total_cost_usd` stands as the stages' and reviewers' sum.

    (A version 4 reader refuses a version 5 file -- "upgrade ci-evals" -- rather
    than call a total that includes the agent's own calls inconsistent.)
    """
    data.setdefault("forwarded", None)
    data.setdefault("resource_limits", None)  # nor what bounded its sandboxes
    return data


def _v5_to_v6(data: Data) -> Data:
    """Rename every stage's `stub_misses` to `endpoint_misses`; add `shard` and
    `merged_shards` (null: a whole run, not merged).

    The misses are the stub script's or, replaying a recording, the
    recording's (outcome `diverged`): the records stand as written. Some
    version 5 files already hold `diverged` misses and the shard fields
    (written before the version was bumped for them); they are kept.
    (A version 5 reader refuses a version 6 file -- "written by a newer
    ci-evals" -- rather than fail on a field it does not know.)
    """
    data.setdefault("shard", None)
    data.setdefault("merged_shards", None)
    for scenario in _dicts(data.get("scenarios")):
        for stage in _dicts(scenario.get("stages")):
            if "stub_misses" in stage and "endpoint_misses" not in stage:
                stage["endpoint_misses"] = stage.pop("stub_misses")
    return data


def _v6_to_v7(data: Data) -> Data:
    """Add `plugin_changes: []` to every stage.

    A version 6 runner wrote what a stage changed in the plugin copy only to
    `plugin-changes.json` in the stage's folder, which no report read; the
    results stand as written. (A version 6 reader refuses a version 7 file.)
    """
    for scenario in _dicts(data.get("scenarios")):
        for stage in _dicts(scenario.get("stages")):
            stage.setdefault("plugin_changes", [])
    return data


def _v7_to_v8(data: Data) -> Data:
    """Add `replayed_from`: `{"origin": "unknown"}` on a replay, null otherwise.

    A version 7 replay did not record what its recording came from, a stub or
    a real model: unknown, so it is reported as no model's verdict (fail
    closed), never as a fresh one. (A version 7 reader refuses a version 8 file
    -- "written by a newer ci-evals" -- rather than fail on a field it does not
    know.)
    """
    endpoint = data.get("model_endpoint")
    replay = isinstance(endpoint, str) and endpoint.startswith("replay:")
    data.setdefault("replayed_from", {"origin": "unknown"} if replay else None)
    return data


def _v8_to_v9(data: Data) -> Data:
    """Add `score_at_least: null`: a version 8 runner had no threshold below 1.0, and
    its summaries are the k-of-n rule's as written (a summary's own `score_at_least`
    defaults to null). (A version 8 reader refuses a version 9 file -- "written by
    a newer ci-evals" -- rather than recompute a threshold's summaries as k-of-n
    and call them inconsistent.)"""
    data.setdefault("score_at_least", None)
    return data


def _v9_to_v10(data: Data) -> Data:
    """Add to every scenario `repeats`, the run's `repeat`, and `unit: "scenario"`.

    A version 9 runner ran every scenario `repeat` times with the suite's stages,
    except a run of `claude plugin eval` cases, which ran each case its own `runs`
    and did not record it: such a file stays what it was, inconsistent (its repeats
    and stages disagree with these), never guessed into a verdict. (A version 9
    reader refuses a version 10 file -- "written by a newer ci-evals" -- rather than
    call a run of cases inconsistent.)
    """
    repeat = data.get("repeat", 1)
    for scenario in _dicts(data.get("scenarios")):
        scenario.setdefault("repeats", repeat)
        scenario.setdefault("unit", "scenario")
    return data


def _v10_to_v11(data: Data) -> Data:
    """Add `produced_omitted: 0` and `plugin_changes_omitted: 0` to every stage: a
    version 10 runner listed every change, however many bytes that took. (A version 10
    reader refuses a version 11 file rather than take a cut listing for the whole.)"""
    for scenario in _dicts(data.get("scenarios")):
        for stage in _dicts(scenario.get("stages")):
            stage.setdefault("produced_omitted", 0)
            stage.setdefault("plugin_changes_omitted", 0)
    return data


def _v11_to_v12(data: Data) -> Data:
    """Add `ablation: "none"`, `mean_delta: null`, `arm: "with"` to every scenario and
    `arms: null` to every summary: a version 11 runner ran every unit with the plugin
    only. (A version 11 reader refuses a version 12 file rather than count a run
    without the plugin as a repeat of the one with it.)"""
    data.setdefault("ablation", "none")
    data.setdefault("mean_delta", None)
    for scenario in _dicts(data.get("scenarios")):
        scenario.setdefault("arm", "with")
    for summary in _dicts(data.get("summaries")):
        summary.setdefault("arms", None)
    return data


def _v12_to_v13(data: Data) -> Data:
    """Add `imported_from: null`: a version 12 file was a run of ci-evals, never an
    import. (A version 12 reader refuses a version 13 file rather than report an
    imported run as one ci-evals ran and graded.)"""
    data.setdefault("imported_from", None)
    return data


def _v13_to_v14(data: Data) -> Data:
    """Add `resumed: []` and `resumed: null` to every stage: a version 13 run ran
    every stage in one go. (A version 13 reader refuses a version 14 file rather
    than take the stages kept from an interrupted session for ones run beside the
    others, or miss what the discarded attempts cost.)"""
    data.setdefault("resumed", [])
    for scenario in _dicts(data.get("scenarios")):
        for stage in _dicts(scenario.get("stages")):
            stage.setdefault("resumed", None)
    return data


def _v14_to_v15(data: Data) -> Data:
    """Add `repeats_stopped: {}`: a version 14 run started every repeat. (A version 14
    reader refuses a version 15 file rather than count a stopped scenario's missing
    repeats as lost.)"""
    data.setdefault("repeats_stopped", {})
    return data


def _v15_to_v16(data: Data) -> Data:
    """Add `gate: all`, `flaky_bounds: null`: a version 15 run's suite had no gate key,
    so the report gates on every criterion. (A version 15 reader refuses a version 16
    file rather than fail a run its suite said to gate only on stable criteria.)"""
    data.setdefault("gate", "all")
    data.setdefault("flaky_bounds", None)
    return data


# MIGRATIONS[n] takes a version-n file to version n + 1.
MIGRATIONS: dict[int, Callable[[Data], Data]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
    8: _v8_to_v9,
    9: _v9_to_v10,
    10: _v10_to_v11,
    11: _v11_to_v12,
    12: _v12_to_v13,
    13: _v13_to_v14,
    14: _v14_to_v15,
    15: _v15_to_v16,
}


def migrate(data: Data, *, file: Path) -> Data:
    """`data` (a results file's JSON object) as a file of the current `VERSION`."""
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(
            f"results version {version!r} is not a ci-evals results version",
            file=file,
            field="version",
        )
    if version > VERSION:
        raise UserError(
            f"written by a newer ci-evals: results version {version}, "
            f"this one reads up to version {VERSION}",
            file=file,
            field="version",
            hint="upgrade ci-evals",
        )
    while version < VERSION:
        data = MIGRATIONS[version](data)
        version += 1
        data["version"] = version
    return data


def _dicts(value: object) -> list[Data]:
    """The JSON objects in a list (anything else is left for validation to reject)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]
