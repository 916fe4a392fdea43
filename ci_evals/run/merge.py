"""`ci-evals merge`: a run's shards back into one run folder (docs/scale-out.md).

Each shard's `results.json` (`run --shard I/K`) is read and cross-checked
first (`check`: the report's rules; `evidence`: its graded stages against the
graders' files beside them; both passed in from above); the shards must be
of one plan — the same suite, from-stage, plugin and suite digests, commit,
repeats, endpoint, shard count and assignment digest — and together hold
shards 1..K and every unit of the plan exactly once. Any mismatch, a missing
or duplicated shard is refused (one line naming the files and the field):
a merge with a shard missing is no run, and no pass. The merged file is what
the unsharded run would have written, scenarios in the plan's order and the
summaries recomputed, but for ids and timings; it lists the shards it came
from (`merged_shards`: each one's wall time, for the Cost section). Each
unit's folder (`<scenario>/`, `<scenario>/r<i>/`) is copied beside it; a
shard whose unit folders hold a link, a pipe, a socket or a device is refused
(a run writes none there: links are recorded as data, docs/isolation.md *The
run folder*; the merged folder is uploaded, and an uploader follows links).
"""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.names import name_problem
from ci_evals.fs.state import copy_plain
from ci_evals.fs.walk import walk
from ci_evals.results.benchmark import ConfigurationTable, as_json, render, task_row
from ci_evals.results.model import (
    MAX_RESULTS_BYTES,
    RESULTS_FILE,
    RunResult,
    ShardTiming,
    read_results,
    require_path_names,
    write_results,
)
from ci_evals.results.summary import mean_delta, summarize_run
from ci_evals.run import shard, shard_mac

Check = Callable[[RunResult], list[str]]  # a results file's problems (`report.verify.problems`)
# Where a shard's results disagree with the files in its folder (`report.evidence.problems`).
Evidence = Callable[[RunResult, Path], list[str]]

BENCHMARK_JSON = "benchmark.json"
BENCHMARK_MD = "benchmark.md"

# Fields every shard of one plan shares; the first that differs is named.
_SAME: tuple[tuple[str, Callable[[RunResult], Any]], ...] = (
    ("suite", lambda r: r.suite and r.suite.model_dump()),
    ("suite_sha256", lambda r: r.suite_sha256),
    ("from_stage", lambda r: r.from_stage),
    ("plugin_sha256", lambda r: r.plugin_sha256),
    ("revision.commit", lambda r: r.revision and r.revision.commit),
    ("repeat", lambda r: r.repeat),
    ("pass_at_least", lambda r: r.pass_at_least),
    ("score_at_least", lambda r: r.score_at_least),
    ("ablation", lambda r: r.ablation),
    ("model", lambda r: r.model),
    ("model_endpoint", lambda r: r.model_endpoint),
    ("replayed_from", lambda r: r.replayed_from and r.replayed_from.model_dump()),
    ("sandbox", lambda r: r.sandbox),
    ("metered", lambda r: r.forwarded is not None),
    ("shard.run_budget_usd", lambda r: r.shard and r.shard.run_budget_usd),
)
_SAME_PLAN: tuple[tuple[str, Callable[[RunResult], Any]], ...] = (
    ("shard.count", lambda r: r.shard and r.shard.count),
    ("shard.plan_sha256", lambda r: r.shard and r.shard.plan_sha256),
    ("shard.units_total", lambda r: r.shard and r.shard.units_total),
)


@dataclass(frozen=True)
class _LoadedResult:
    path: Path  # as given
    folder: Path  # the run folder its paths are relative to
    result: RunResult
    run: str = ""  # with --tasks: its run folder in the benchmark ("<n>-<configuration>/<task>")


@dataclass(frozen=True)
class Merged:
    out: Path
    shards: int
    units: int
    tasks: bool  # a `run --tasks` benchmark


def merge(
    paths: Sequence[Path],
    out: Path,
    check: Check,
    evidence: Evidence,
    key: shard_mac.ShardKey | None = None,
) -> Merged:
    """Merge the shards at `paths` (results files or run folders; with --tasks, shard
    benchmark folders) into `out`; `UserError` at the first problem, nothing written.
    With `key`, each shard's folder must be exactly what `run --shard` signed with it."""
    if not paths:
        raise UserError("no shard given", hint="ci-evals merge RESULTS... --out DIR")
    if (out / RESULTS_FILE).exists() or (out / BENCHMARK_JSON).exists():
        raise UserError(f"{out} already holds a run", field="--out", hint="choose an empty folder")
    if key is not None:
        for path in paths:  # before a byte of it is believed
            shard_mac.verify(path if path.is_dir() else path.parent, key)
    if all((path / BENCHMARK_JSON).is_file() for path in paths):
        return _merge_tasks(paths, out, check, evidence)
    shards = [_read(path, check, evidence) for path in paths]
    _same(shards, _SAME + _SAME_PLAN)
    _complete(shards)
    merged = _checked(_merged(shards), check, out)
    _plain_units(shards)
    _copy_units(shards, out)
    write_results(out, merged)
    return Merged(out, len(shards), sum(len(s.result.scenarios) for s in shards), tasks=False)


def _checked(merged: RunResult, check: Check, out: Path) -> RunResult:
    """`merged` when it agrees with itself; refused before anything is written."""
    problems = check(merged)
    if problems:  # pragma: no cover - a bug here, never the shards' (they were checked)
        raise UserError(f"the merged results are inconsistent: {problems[0]}", file=out)
    return merged


def _read(path: Path, check: Check, evidence: Evidence) -> _LoadedResult:
    result = read_results(path)  # one line naming the file when unusable
    file = path / RESULTS_FILE if path.is_dir() else path
    require_path_names(result, file)  # before an id becomes a folder of --out
    if result.shard is None:
        raise UserError(
            "not a shard (no `shard`: written by `run` without --shard)",
            file=file,
            field="shard",
        )
    problems = check(result)
    if problems:
        raise UserError(
            f"inconsistent: {problems[0]}",
            file=file,
            hint=f"{len(problems)} problem(s); `ci-evals report` lists them",
        )
    if result.status == "running":
        raise UserError("the shard is still running (or was killed)", file=file, field="status")
    # A consistent file may still be an edited one: the graders' files beside it must agree.
    disagree = evidence(result, file.parent)
    if disagree:
        raise UserError(
            f"disagrees with the evidence in its folder: {disagree[0]}",
            file=file,
            hint=f"{len(disagree)} problem(s); merge the shards as `run --shard` left them",
        )
    return _LoadedResult(path, file.parent, result)


Fields = Sequence[tuple[str, Callable[[RunResult], Any]]]


def _same(shards: Sequence[_LoadedResult], fields: Fields) -> None:
    first = shards[0]
    for other in shards[1:]:
        for name, value in fields:
            a, b = value(first.result), value(other.result)
            if a != b:
                raise UserError(
                    f"{first.path} and {other.path} are shards of different runs: "
                    f"{name} is {a!r} and {b!r}",
                    field=name,
                )


def _complete(shards: Sequence[_LoadedResult], roots: Sequence[Path] | None = None) -> None:
    """Shards 1..K, each given once, and every unit of the plan once. `roots`: the shard
    argument each read belongs to (with --tasks a shard is a folder of runs), else its own."""
    first = shards[0].result.shard
    assert first is not None
    given = list(roots) if roots is not None else [read.path for read in shards]
    owners = list(range(len(shards))) if roots is None else [given.index(r) for r in given]
    seen: dict[int, int] = {}  # shard index -> the argument that gave it
    positions: dict[int, int] = {}  # unit position -> the read that holds it
    for n, read in enumerate(shards):
        shard = read.result.shard
        assert shard is not None
        if seen.setdefault(shard.index, owners[n]) != owners[n]:
            what = f"shard {shard.index}/{shard.count} is given twice"
            where = f"{given[seen[shard.index]]} and {given[n]}"
            raise UserError(f"{what}: {where}", field="shard.index")
        for unit in shard.units:
            if positions.setdefault(unit.position, n) != n:
                what = f"unit {unit.scenario} repeat {unit.repeat + 1} is in two shards"
                where = f"{shards[positions[unit.position]].path} and {read.path}"
                raise UserError(f"{what}: {where}", field="shard.units")
    missing = [k for k in range(1, first.count + 1) if k not in seen]
    if missing:
        raise UserError(
            f"shard(s) {', '.join(f'{k}/{first.count}' for k in missing)} missing: "
            "a merge without every shard is no run and no pass",
            field="shard.index",
            hint="pass every shard's results",
        )
    if len(positions) != first.units_total:
        raise UserError(
            f"the shards hold {len(positions)} of the plan's {first.units_total} units",
            field="shard.units",
        )
    _same_plan(shards, positions)


def _same_plan(shards: Sequence[_LoadedResult], positions: dict[int, int]) -> None:
    """The units the shards hold, each at its place and in its shard, are the plan their
    `plan_sha256` names: a shard that lists another unit (a renamed scenario, a unit of
    another shard or place) is refused, naming it."""
    first = shards[0].result.shard
    assert first is not None
    held: list[tuple[shard.Unit, int]] = []
    owner: list[_LoadedResult] = []
    for position in range(first.units_total):
        read = shards[positions[position]]
        record = read.result.shard
        assert record is not None
        unit = next(u for u in record.units if u.position == position)
        held.append((shard.Unit(unit.scenario, unit.repeat, read.run), record.index))
        owner.append(read)
    if shard.plan_sha256(first.count, held) != first.plan_sha256:
        paths = ", ".join(str(path) for path in dict.fromkeys(read.path for read in owner))
        raise UserError(
            f"the units the shards hold are not the plan their plan_sha256 names: {paths}",
            field="shard.units",
            hint="merge the shards of one `ci-evals plan`, as `run --shard` wrote them",
        )


def _merged(shards: Sequence[_LoadedResult]) -> RunResult:
    results = sorted((r.result for r in shards), key=lambda r: r.shard.index if r.shard else 0)
    first = results[0]
    order = {
        (unit.scenario, unit.repeat): unit.position
        for result in results
        for unit in (result.shard.units if result.shard else [])
    }
    scenarios = sorted(
        (scenario for result in results for scenario in result.scenarios),
        key=lambda s: order[s.id, s.repeat],
    )
    finished = [r.finished_at for r in results]
    statuses = {r.status for r in results}
    status = next(s for s in ("error", "interrupted", "completed") if s in statuses)
    forwarded = None
    if first.forwarded is not None:
        forwarded = first.forwarded
        for result in results[1:]:
            assert result.forwarded is not None  # `metered` is the same in every shard
            forwarded = forwarded.plus(result.forwarded)
    merged = first.model_copy(
        update={
            "run_id": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            + "-"
            + secrets.token_hex(3),
            "started_at": min(r.started_at for r in results),
            "finished_at": None if None in finished else max(f for f in finished if f),
            "status": status,
            "isolated": all(r.isolated for r in results),
            # One commit (`_SAME`); uncommitted changes in any shard are the merged run's.
            "revision": first.revision
            and first.revision.model_copy(
                update={"dirty": any(r.revision is not None and r.revision.dirty for r in results)}
            ),
            "forwarded": forwarded,
            "budget_usd": _run_budget(results),
            "scenarios": scenarios,
            "shard": None,
            "merged_shards": [
                ShardTiming(
                    index=r.shard.index if r.shard else 0,
                    run_id=r.run_id,
                    started_at=r.started_at,
                    finished_at=r.finished_at,
                    units=len(r.scenarios),
                )
                for r in results
            ],
        },
        deep=True,
    )
    merged.total_cost_usd = forwarded.cost_usd if forwarded else merged.stages_cost_usd
    merged.summaries = summarize_run(merged, merged.pass_at_least)
    merged.mean_delta = mean_delta(merged.summaries)
    return merged


def _run_budget(results: Sequence[RunResult]) -> float | None:
    """The run's budget: each shard enforced its part of it (`shard.budget_share`)."""
    first = results[0]
    if first.shard is None or first.shard.budget_usd is None:
        return first.budget_usd  # no budget, or a shard that kept the run's whole
    return first.shard.run_budget_usd


def _plain_units(shards: Sequence[_LoadedResult]) -> None:
    """Every unit folder of every shard holds folders and regular files only: a link
    copied into the merged run would be followed by whatever reads or uploads it."""
    for read in shards:
        for scenario in read.result.scenarios:
            folder = read.result.folder_of(scenario)
            where, found = read.folder, ""
            for part in folder.split("/"):  # the unit folder itself, and the one above it
                where = where / part
                if where.is_symlink():
                    found = folder
                    break
            else:
                if not where.is_dir():
                    continue
                found = next(
                    (f"{folder}/{rel}" for rel, kind, _ in walk(where) if kind not in _PLAIN), ""
                )
            if found:
                raise UserError(
                    f"{found} is a link or a special file: a shard's run folder holds none",
                    file=read.folder,
                    hint="it was changed after the run (or written by an older ci-evals): "
                    "run the shard again",
                )


_PLAIN = ("dir", "file")


def _copy_units(shards: Sequence[_LoadedResult], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for read in shards:
        for scenario in read.result.scenarios:
            folder = read.result.folder_of(scenario)
            source = read.folder / folder
            if source.is_dir():
                # Checked plain (`_plain_units`); copied never following a link all the
                # same, and refused should one have appeared since.
                found = copy_plain(source, out / folder)
                if found:
                    shutil.rmtree(out / folder)
                    raise UserError(
                        f"{folder}/{found[0]} is a link or a special file: a shard's run "
                        "folder holds none",
                        file=read.folder,
                    )


# -- `run --tasks`: per task run, then the tables ----------------------------------------


def _check_run_dir(run_dir: object, bench: Path) -> None:
    """A task run's folder is `<configuration>/<task>`, two names (`fs.names`), or refused."""
    parts = run_dir.split("/") if isinstance(run_dir, str) else [run_dir]
    problems = [name_problem(part) for part in parts]
    if len(parts) != 2 or any(problems):  # configuration and task
        why = next((p for p in problems if p), f"{run_dir!r} is not <configuration>/<task>")
        raise UserError(f"bad run_dir: {why}", file=bench, field="run_dir")


def _merge_tasks(paths: Sequence[Path], out: Path, check: Check, evidence: Evidence) -> Merged:
    runs: dict[str, list[_LoadedResult]] = {}
    labels: dict[str, str] = {}  # configuration folder -> its label
    every: list[_LoadedResult] = []
    roots: list[Path] = []
    for path in paths:
        bench = path / BENCHMARK_JSON
        data = json_input.load_file(bench, MAX_RESULTS_BYTES, what="benchmark.json")
        try:
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            rows = [(c["configuration"], row["run_dir"]) for c in data["configurations"]
                    for row in c["tasks"]]  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise UserError(f"not a benchmark.json: {exc}", file=bench) from None
        for label, run_dir in rows:
            _check_run_dir(run_dir, bench)
            read = replace(_read(path / run_dir, check, evidence), run=run_dir)
            runs.setdefault(run_dir, []).append(read)
            labels[run_dir.split("/")[0]] = label
            every.append(read)
            roots.append(path)
    _same(every, _SAME_PLAN)
    _complete(every, roots)
    tables: dict[str, list[Any]] = {}
    done: list[tuple[str, RunResult]] = []  # every task run merged and checked, then written
    for run_dir in sorted(runs, key=lambda d: (int(d.split("-", 1)[0]), d)):
        _same(runs[run_dir], _SAME)
        done.append((run_dir, _checked(_merged(runs[run_dir]), check, out / run_dir)))
    for reads in runs.values():
        _plain_units(reads)
    for run_dir, merged in done:
        _copy_units(runs[run_dir], out / run_dir)
        write_results(out / run_dir, merged)
        configuration, task = run_dir.split("/", 1)
        tables.setdefault(configuration, []).append(task_row(task, run_dir, merged))
    built = [ConfigurationTable(labels[c], tuple(rows)) for c, rows in tables.items()]
    write_atomic(out / BENCHMARK_MD, render(built).encode())
    write_atomic(out / BENCHMARK_JSON, (json.dumps(as_json(built), indent=2) + "\n").encode())
    return Merged(out, len(paths), sum(len(r.result.scenarios) for r in every), tasks=True)
