"""`ci-evals run --tasks DIR [--matrix FILE]`: the benchmark over many tasks.

Every task (`DIR/<task>/ci-evals.yaml`) runs once per agent configuration
(`suite.matrix`: model x system prompt x tool set; without `--matrix`, each
task's own), each as an ordinary `run` in its own folder
(`OUT/<n>-<configuration>/<task>/results.json`) with `--repeat`, `--jobs`
and `--isolation` as given. Everything is validated first: every suite, the
matrix, every configuration against every task, every endpoint. Then a table
per configuration (`results.benchmark`) is printed and written to
`OUT/benchmark.md` and `OUT/benchmark.json`, rewritten after every task so
an interrupted benchmark still says what it saw. Exit 0 when every run
passed, 1 when any did not, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

from ci_evals.endpoints.registry import endpoint_for
from ci_evals.endpoints.replay import PREFIX as REPLAY_PREFIX
from ci_evals.errors import EXIT_INTERRUPTED, EXIT_OK, Problems, UserError
from ci_evals.fs import upload
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.names import name_problem
from ci_evals.results.benchmark import ConfigurationTable, TaskRow, as_json, render, task_row
from ci_evals.results.model import Shard, read_results
from ci_evals.run import run_command as single
from ci_evals.run import shard, shard_mac
from ci_evals.run.process_environment import RunEnvironment
from ci_evals.suite.load import SUITE_FILE, Suite, load_suite
from ci_evals.suite.matrix import Configuration, load_matrix

BENCHMARK_JSON = "benchmark.json"
BENCHMARK_MD = "benchmark.md"


def run(args: argparse.Namespace, started: RunEnvironment) -> int:
    """`ci-evals run --tasks`, with the environment the command took (as `run_command.run`)."""
    out, code = _benchmark(args, started.variables)
    key = started.shard_key
    if key is not None and args.shard:  # the whole benchmark folder: every task run of this shard
        shard_mac.sign(out, key)
    return code


def _benchmark(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[Path, int]:
    for option, given in (
        ("--from-stage", args.from_stage),
        ("--base", args.base),
        ("--scenario", args.scenario),
    ):
        if given:
            raise UserError(f"{option} selects within one suite; --tasks runs every task whole")
    tasks = find_tasks(args.tasks)
    configurations = _configurations(args)
    chosen: shard.Assignment | None = None
    index = 0
    if args.shard:
        index, count = shard.parse_spec(args.shard)
        durations = shard.read_durations(args.durations)
        chosen = _assignment(args, tasks, configurations, durations, count)
        shard.shard_of(chosen, index, count)  # K is what `plan` printed
    for number, configuration in enumerate(configurations, start=1):  # every mistake first
        for name, suite in tasks:
            endpoint = endpoint_for(_model(configuration, number, name, args.model))
            endpoint.check(environ, "ci-evals run --tasks")
            single.refuse_recording_a_replay(args, endpoint.name)
            configuration.apply(suite, name)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = (args.out or single.RUNS_DIR / f"tasks-{stamp}").resolve()
    if (out / BENCHMARK_JSON).exists():
        raise UserError(f"{out} already holds a benchmark", field="--out", hint="choose another")
    with upload.sealed(out, "the benchmark folder"):  # every task run in it, before signing
        tables: list[ConfigurationTable] = []
        code = EXIT_OK
        for number, configuration in enumerate(configurations, start=1):
            rows: list[TaskRow] = []
            for name, suite in tasks:
                run_dir = out / configuration.folder(number) / name
                record = None
                if chosen is not None:
                    run = f"{configuration.folder(number)}/{name}"
                    record = chosen.record(index, run, suite.budget_usd)
                    if not record.units:
                        continue  # another shard's
                model = _model(configuration, number, name, args.model)
                ended = _run_task(args, environ, configuration, model, name, suite, run_dir, record)
                rows.append(
                    task_row(name, run_dir.relative_to(out).as_posix(), read_results(run_dir))
                )
                _write(out, [*tables, ConfigurationTable(configuration.label, tuple(rows))])
                if ended == EXIT_INTERRUPTED:
                    print(f"ci-evals: interrupted; the benchmark so far: {out}", file=sys.stderr)
                    return out, EXIT_INTERRUPTED
                code = code or ended
            tables.append(ConfigurationTable(configuration.label, tuple(rows)))
        print(render(tables), end="")
        print(f"benchmark: {out / BENCHMARK_MD}")
    return out, code


def _configurations(args: argparse.Namespace) -> tuple[Configuration, ...]:
    # `--model` is the model of every configuration the matrix leaves it to: named so.
    return tuple(
        dataclasses.replace(c, model=args.model) if c.model is None and args.model else c
        for c in load_matrix(args.matrix)
    )


def assignment(args: argparse.Namespace, durations: shard.Durations) -> shard.Assignment:
    """`ci-evals plan --tasks`: every task x configuration x scenario x repeat, split."""
    return _assignment(args, find_tasks(args.tasks), _configurations(args), durations, args.shards)


def _assignment(
    args: argparse.Namespace,
    tasks: list[tuple[str, Suite]],
    configurations: tuple[Configuration, ...],
    durations: shard.Durations,
    count: int,
) -> shard.Assignment:
    units: list[shard.Unit] = []
    stages: dict[str, list[int]] = {}
    for number, configuration in enumerate(configurations, start=1):
        for name, suite in tasks:
            varied = configuration.apply(suite, name)
            run = f"{configuration.folder(number)}/{name}"
            scenarios = varied.scenarios
            if args.repeat:  # as `run`: --repeat overrides a case's runs
                scenarios = tuple(dataclasses.replace(s, repeat=None) for s in scenarios)
            units += shard.suite_units(scenarios, args.repeat or varied.grading.repeat, run)
            stages[run] = [stage.number for stage in varied.stages]
    return shard.plan_units(units, lambda unit: stages[unit.run], durations, count)


def find_tasks(folder: Path) -> list[tuple[str, Suite]]:
    """Every `folder/<task>/ci-evals.yaml`, loaded and validated, by task name."""
    if not folder.is_dir():
        raise UserError(f"not a folder: {folder}", field="--tasks")
    found = sorted(path for path in folder.iterdir() if (path / SUITE_FILE).is_file())
    if not found:
        raise UserError(
            f"no task in {folder}", field="--tasks", hint=f"a task is a folder with a {SUITE_FILE}"
        )
    for path in found:  # a task's name is a folder of the benchmark and of each shard
        problem = name_problem(path.name)
        if problem:
            raise UserError(f"bad task name: {problem}", file=path, hint="rename the folder")
    return [(path.name, load_suite(path / SUITE_FILE)) for path in found]


def _model(configuration: Configuration, number: int, task: str, given: str | None) -> str | None:
    """The task's `--model`: the configuration's, else `given`. `replay:DIR` of a
    benchmark folder (`run --tasks --record --out DIR`) is, for configuration N's
    task T, the run that recorded it: `replay:DIR/N-*/T` (docs/replay.md)."""
    model = configuration.model or given
    if model is None or not model.startswith(REPLAY_PREFIX):
        return model
    recorded = Path(model.removeprefix(REPLAY_PREFIX))
    if not (recorded / BENCHMARK_JSON).is_file():
        return model  # one run's recording, served to every task
    runs = sorted(recorded.glob(f"{number}-*/{task}"))
    if len(runs) != 1:
        raise UserError(
            f"the recorded benchmark {recorded} has no run of task {task} for configuration "
            f"{number} ({len(runs)} found: {recorded}/{number}-*/{task})",
            field="--model",
            hint="replay the benchmark with the tasks and configurations it recorded",
        )
    return f"{REPLAY_PREFIX}{runs[0]}"


def _run_task(  # noqa: PLR0917 - one private call site
    args: argparse.Namespace,
    environ: Mapping[str, str],
    configuration: Configuration,
    model: str | None,
    name: str,
    suite: Suite,
    run_dir: Path,
    record: Shard | None = None,
) -> int:
    varied = configuration.apply(suite, name)
    task_args = argparse.Namespace(**{**vars(args), "model": model, "out": run_dir, "shard": None})
    ready = single.prepare(task_args, environ, Problems(), suite=varied)
    assert ready is not None and ready.endpoint is not None  # it raises at a problem
    endpoint = ready.endpoint
    ready = dataclasses.replace(ready, shard=record)  # the whole plan's units in this task
    plan = single.build(ready, task_args, environ)
    print(f"ci-evals: task {name}, configuration {configuration.label}", file=sys.stderr)
    return single.execute(plan, endpoint, record=args.record, verbosity=args.verbosity)


def _write(out: Path, tables: list[ConfigurationTable]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / BENCHMARK_MD, render(tables).encode())
    write_atomic(out / BENCHMARK_JSON, (json.dumps(as_json(tables), indent=2) + "\n").encode())
