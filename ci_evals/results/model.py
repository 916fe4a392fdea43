"""`results.json`: the typed, versioned record of one run.

The run writes it (again after every stage, so an interrupted run still leaves
one); `grade`, `report` and the PR comment only read it. Models reject unknown
fields. A file of an earlier `version` is migrated forward step by step
(`ci_evals.results.migrate`) before it is validated; a newer one is refused
with a clear message rather than half-read. Bump `VERSION` when an old reader
would misread or reject a new file -- a new field too, even an optional one: the
models reject unknown fields -- and add the migration from the previous version.

This module imports pydantic (~0.15 s): only run/grade/report import it, never
the hook or compute-stage path.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.atomic import write_atomic
from ci_evals.fs.names import name_problem
from ci_evals.fs.snapshot import Change
from ci_evals.results import RESULTS_FILE, model_id_problem
from ci_evals.results.criteria import StageVerdict
from ci_evals.results.migrate import VERSION, migrate
from ci_evals.results.stats import StageSummary

__all__ = [
    "RESULTS_FILE",
    "VERSION",
    "EndpointMiss",
    "FileChange",
    "Forwarded",
    "ImportedCase",
    "ImportedFrom",
    "LimitHit",
    "ReplayedFrom",
    "ResourceLimits",
    "Resumed",
    "Revision",
    "RunResult",
    "RunStatus",
    "ScenarioResult",
    "Shard",
    "ShardTiming",
    "ShardUnit",
    "StageResult",
    "StageStatus",
    "SuiteIdentity",
    "dump_results",
    "endpoint_miss_error",
    "file_changes",
    "json_schema",
    "printable_path",
    "read_results",
    "record_endpoint_misses",
    "require_own_run",
    "write_results",
]

WITHOUT_DIR = "without"  # a unit's run without the plugin, below its folder
# A results file holds no trajectory and bounded listings (`LISTING_BUDGET`): a
# run of thousands of stages stays far below. No more of one is ever read.
MAX_RESULTS_BYTES = 256 * 1024 * 1024

RunStatus = Literal["running", "completed", "interrupted", "error"]
StageStatus = Literal[
    "completed",  # ran to the end; no graders (yet) to say passed or failed
    "passed",
    "failed",
    "error",  # the CLI failed, reported is_error, or crashed
    "limit",  # a turn, time or budget limit was hit: a failure, not an error
    "skipped",  # an earlier stage did not complete, or the run budget was spent
    "pending",  # not started yet
    "running",
]
LimitHit = Literal["turns", "time", "budget", "output"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FileChange(_Model):
    path: str  # POSIX, relative to the workspace
    change: Literal["added", "modified", "deleted"]
    kind: Literal["file", "link"] = "file"
    sha256: str  # new content; for `deleted`, the content that was removed
    size: int
    target: str | None = None  # a link's target

    @classmethod
    def from_change(cls, change: Change) -> FileChange:
        return cls(
            path=printable_path(change.path),
            change=change.change,
            kind=change.kind,
            sha256=change.sha256,
            size=change.size,
            target=None if change.target is None else printable_path(change.target),
        )


def printable_path(path: str) -> str:
    """A file name as valid UTF-8 text: bytes that are not UTF-8 become `\\xNN`.

    Names come from the file system with `surrogateescape`; JSON cannot hold
    those, and one odd name the agent wrote must not lose the whole results file.
    """
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def file_changes(changes: Iterable[Change]) -> list[FileChange]:
    """Snapshot changes (`Changes.all`) as result records."""
    return [FileChange.from_change(change) for change in changes]


class EndpointMiss(_Model):
    """A request of the stage (or its reviewers) a local model endpoint had no
    answer for: the stub model's script (no rule matched it, or the rule that
    did had run out of turns) or, replaying a recording (`diverged`), the
    recording (no exchange left for it). The script (the recording) and the
    suite disagree, so the stage is an `error`, whatever its graders said
    (docs/stub-model.md, docs/replay.md). Named `StubMiss`, in `stub_misses`,
    before version 6."""

    outcome: Literal["unmatched", "exhausted", "diverged"]
    rule: str | None = None  # exhausted: the rule whose turns ran out
    turn: int | None = None  # exhausted: the turn asked for (1-based)
    subagent: bool = False
    text: str  # what the endpoint answered instead (one line, names the request)


def endpoint_miss_error(misses: list[EndpointMiss]) -> str:
    """The one-line `error` of a stage with stub misses (the first one quoted)."""
    diverged = [m for m in misses if m.outcome == "diverged"]
    if diverged:
        return (
            f"the replayed recording had no exchange for {len(diverged)} request(s): "
            f"{diverged[0].text}"
        )
    unmatched = sum(1 for m in misses if m.outcome == "unmatched")
    exhausted = len(misses) - unmatched
    kinds = [f"{unmatched} no rule matched"] if unmatched else []
    kinds += [f"{exhausted} past a rule's last turn"] if exhausted else []
    return (
        f"the stub model had no scripted answer for {len(misses)} request(s) "
        f"({', '.join(kinds)}): {misses[0].text}"
    )


def record_endpoint_misses(stage: StageResult, misses: list[EndpointMiss]) -> None:
    """Record what the stub (or the replay) had no answer for; any makes the stage an `error`.

    An unmatched request (or one past a rule's last turn) means the script and
    the suite disagree: whatever the graders then said is about an answer
    nobody scripted, so it is neither a pass nor a failure of the plugin. A
    stage that hit a limit keeps `limit` (its `limit_hit` says which); it is
    no pass either way. Used by the runner and by `ci-evals grade`.
    """
    if not misses:
        return
    stage.endpoint_misses = [*stage.endpoint_misses, *misses]
    if stage.status == "limit":
        return
    before = stage.error
    stage.status = "error"
    stage.error = endpoint_miss_error(stage.endpoint_misses) + (
        f" (then: {before})" if before else ""
    )


class StageResult(_Model):
    number: int
    name: str
    status: StageStatus = "pending"
    # The suite configures graders for this stage: it ends `passed`, `failed` or
    # `error`, never `completed` (a graded stage left `completed` was never
    # graded, and is reported as an error). Missing means graded: fail closed.
    graded: bool = True
    limit_hit: LimitHit | None = None
    error: str | None = None
    started_at: datetime | None = None
    duration_s: float | None = None  # wall clock, measured by ci-evals
    duration_api_ms: int | None = None  # as the CLI reports it
    turns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    session_id: str | None = None
    produced: list[FileChange] = Field(default_factory=list)
    # How many more changes the stage made than `produced` lists: a listing is cut
    # at `LISTING_BUDGET` bytes (`listed`), so results.json stays small whatever the
    # agent writes; `produced/` and `after/` hold them all.
    produced_omitted: int = Field(default=0, ge=0)
    # Paths relative to the run folder (where results.json is).
    trajectory: str | None = None
    stderr: str | None = None
    produced_dir: str | None = None
    # How many times the stage was started: > 1 when an infrastructure error
    # (HTTP 5xx/529 from the model endpoint) was retried (docs/grading.md).
    attempts: int | None = None
    # False: the stage never reached the model (the CLI failed first, or answered
    # for it: a command's `!`cmd`` expansion failed); an `error`, and no live run.
    model_ran: bool = True
    # The graders' verdict (status passed/failed/error came from it): every
    # criterion, each grader's result, judge model, rubric hashes, raw output paths.
    grading: StageVerdict | None = None
    grading_cost_usd: float | None = None  # what the reviewer's model calls cost
    # Requests of this stage and its reviewers the stub model's script (`stub:PATH`)
    # or the replayed recording (`replay:RUN_DIR`) had no answer for; any makes it an error.
    endpoint_misses: list[EndpointMiss] = Field(default_factory=list)
    # What this stage changed in the plugin copy (paths relative to it): written
    # through a workspace link into it (`docs -> ../plugin/docs`) or by its path.
    # No grader sees these files, and later stages and reviewers load them.
    plugin_changes: list[FileChange] = Field(default_factory=list)
    plugin_changes_omitted: int = Field(default=0, ge=0)  # as `produced_omitted`
    # `run --resume`: `kept` -- it passed (or completed) in an earlier session of the
    # run and was kept with its evidence, not run again; `rerun` -- it ran again in a
    # later session (the earlier attempt's folder was discarded). None: it ran in the
    # run's first session.
    resumed: Literal["kept", "rerun"] | None = None


# Bytes a stage's listing (`produced`, `plugin_changes`) may take in results.json:
# the file is rewritten after every stage, read by report, merge and grade, and
# 9,900 paths of 4 KiB made it 40 MB. About a thousand ordinary paths fit.
LISTING_BUDGET = 256 * 1024
_ENTRY_OVERHEAD = 160  # a listed change's JSON besides its path and target


def listed(changes: list[FileChange]) -> tuple[list[FileChange], int]:
    """The first of `changes` (in path order) that fit `LISTING_BUDGET` bytes, and
    how many were left out."""
    kept: list[FileChange] = []
    spent = 0
    for change in changes:
        spent += _ENTRY_OVERHEAD + len(change.path.encode()) + len((change.target or "").encode())
        if spent > LISTING_BUDGET:
            break
        kept.append(change)
    return kept, len(changes) - len(kept)


class ScenarioResult(_Model):
    id: str
    inputs: dict[str, str] = Field(default_factory=dict)
    repeat: int = 0  # 0-based repeat index
    # How many times the run ran this scenario: a `claude plugin eval` case runs its
    # own `runs` (None: the run's `repeat`, as every scenario before version 10).
    repeats: int | None = Field(default=None, ge=1)
    # `case`: a `claude plugin eval` case unit (`plugin_evals:`) running its own one
    # stage; `scenario`: the suite's stages, the same in every scenario.
    unit: Literal["scenario", "case"] = "scenario"
    # `with`: the plugin loaded (every run before version 12); `without`: the same unit
    # run without it (`ablation: with-without`), compared with, never a verdict.
    arm: Literal["with", "without"] = "with"
    workspace: str | None = None  # kept workspace (--keep-workspace), else None
    stages: list[StageResult] = Field(default_factory=list)


class SuiteIdentity(_Model):
    """Which suite ran: a baseline from another suite cannot be compared (docs/report.md)."""

    path: str  # the suite file, relative to the repository's top (POSIX); its name outside git
    plugin: str  # the plugin's name (plugin.json)


class Revision(_Model):
    """The source a run evaluated, so a baseline can be checked against the merge base."""

    # HEAD of the repository holding the suite when the run started; None outside git.
    commit: str | None = None
    # The suite file, plugin or fixtures had changes that commit does not hold.
    dirty: bool = False
    # With `run --base`: the base as a commit, and the merge base of HEAD and it --
    # the revision a baseline of this change should have run at.
    base: str | None = None
    merge_base: str | None = None


class Forwarded(_Model):
    """What the model endpoint forwarded for the whole run, as it charged it.

    The forwarding proxy sees every model request made with the run's token:
    the stages', the reviewers' and any the agent made itself (a script of its
    own calling the API), so this -- not the sum the CLIs report per stage -- is
    the run's cost. Each request is charged its usage at ci-evals' prices
    (`endpoints.pricing`), or its worst-case reservation when its response was
    cut short (docs/run.md, *Budget*). None on the run: an endpoint that does not
    meter (the stub).
    """

    requests: int = Field(ge=0)  # forwarded upstream (count_tokens too)
    refused: int = Field(default=0, ge=0)  # refused for the budget (HTTP 402)
    cost_usd: float = Field(ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)

    def plus(self, other: Forwarded) -> Forwarded:
        """Both together (a re-grade's reviewers added to the run's)."""
        values = self.model_dump()
        return Forwarded(**{k: v + getattr(other, k) for k, v in values.items()})


class ShardUnit(_Model):
    """One work unit of a sharded run: a scenario's repeat, and its place in the plan."""

    scenario: str
    repeat: int = Field(ge=0)  # 0-based, as `ScenarioResult.repeat`
    position: int = Field(ge=0)  # its index in the whole plan's order (the unsharded run's)


class Shard(_Model):
    """This file is shard `index` of `count` of one plan (`ci-evals plan`, docs/scale-out.md):
    it holds exactly `units`; `ci-evals merge` puts the `count` shards back together."""

    index: int = Field(ge=1)
    count: int = Field(ge=1)
    units_total: int = Field(ge=1)  # units in the whole plan
    plan_sha256: str  # the whole assignment (every unit and its shard): equal in every shard
    units: list[ShardUnit] = Field(default_factory=list)
    # The run's `budget_usd` (null: no budget, or not recorded) and this shard's part of it,
    # in proportion to the run's units it holds: the file's `budget_usd`, what the shard
    # enforced. The shards together spend at most the run's budget; `merge` records it.
    run_budget_usd: float | None = None
    budget_usd: float | None = None


class ShardTiming(_Model):
    """One shard of a merged run: its run id, when it started and finished, its units."""

    index: int = Field(ge=1)
    run_id: str
    started_at: datetime
    finished_at: datetime | None = None
    units: int = Field(ge=0)

    @property
    def wall_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class ReplayedFrom(_Model):
    """What made the answers a replayed run was served (`replay:RUN_DIR`), as its
    recording's `results.json` says (docs/replay.md, *What a replay is evidence of*).

    A replay of a stub recording is a wiring check as the stub run was; of a real
    model's, that model's recorded answers, not a fresh verdict; `unknown` (no
    results.json beside the recording, or one naming no known endpoint) is neither.
    """

    origin: Literal["stub", "anthropic", "unknown"]
    model: str | None = None  # the model the recorded run asked for (None: the CLI's default)
    recorded_on: date | None = None  # the day the recorded run started (None: not recorded)

    @field_validator("model")
    @classmethod
    def _model_id(cls, value: str | None) -> str | None:
        problem = None if value is None else model_id_problem(value)
        if problem:
            raise ValueError(problem)
        return value


IMPORTED_TOOL: Literal["claude plugin eval"] = "claude plugin eval"


class ImportedCase(_Model):
    """One case of an imported document, beside the scenario it became: its name and
    folder as the CLI gave them, its score and (with `--ablation with-without`) its
    without-plugin arm, as the CLI computed them (checked against the runs on import)."""

    scenario: str  # the scenario id it became
    name: str  # the case's name in the document
    dir: str = ""  # its folder, relative to the plugin (as the document says)
    score: float = Field(ge=0.0, le=1.0)  # the CLI's case score: the with-arm's mean run score
    score_without: float | None = Field(default=None, ge=0.0, le=1.0)
    delta: float | None = None  # score - score_without (None: no without-arm, or withheld)
    # The runs without the plugin, in the same shape as the with-arm's stages (status,
    # verdict, costs): kept, never summarised nor counted in the verdict or the costs.
    without: list[StageResult] = Field(default_factory=list)


class ImportedFrom(_Model):
    """The run is a `claude plugin eval` document (aggregate-result.json) imported with
    `ci-evals import plugin-eval`: the CLI ran and graded it, ci-evals only read it
    (docs/plugin-evals.md, *Results both ways*). Every report says so."""

    tool: Literal["claude plugin eval"] = IMPORTED_TOOL
    file: str  # the document as named on the command line
    sha256: str  # of its bytes
    schema_version: int
    claude_version: str
    # The CLI stopped early (`partialReason`: cost_ceiling, interrupted, auth_failed): the
    # run is `interrupted`, and no baseline.
    partial: bool = False
    partial_reason: str | None = None
    ablation: Literal["none", "with-without"] = "none"
    # Runs (either arm) whose llm/baseline graders the cost ceiling skipped: each is an
    # `error` stage, and the run is no baseline.
    skipped_paid_graders: int = Field(default=0, ge=0)
    cost_usd: float = Field(ge=0.0)  # the document's total: both arms, judges, agent mocks
    cases: list[ImportedCase] = Field(default_factory=list)

    @property
    def baseline_refusal(self) -> str | None:
        """Why this imported run may not be a baseline, or None: a partial document or
        skipped paid graders leave cases unjudged, which a comparison would read as
        regressions or passes that never happened."""
        if self.partial:
            why = f" ({self.partial_reason})" if self.partial_reason else ""
            return f"it was imported from a partial {IMPORTED_TOOL} document{why}"
        if self.skipped_paid_graders:
            return (
                f"it was imported from a {IMPORTED_TOOL} document in which "
                f"{self.skipped_paid_graders} run(s) skipped their paid graders (cost ceiling)"
            )
        return None

    @property
    def note(self) -> str:
        """What every report says of the run: who ran and graded it."""
        partial = f"; partial: {self.partial_reason or 'stopped early'}" if self.partial else ""
        return (
            f"imported from {IMPORTED_TOOL} {self.claude_version} ({self.file}): run and "
            f"graded by the CLI, read by ci-evals{partial}"
        )


class ResourceLimits(_Model):
    """What bounded each sandbox's processes (docs/isolation.md, *Limits*). Besides
    these, every file and what a stage's writable folders grow by while it runs are
    bounded by that stage's `limits.max_output_mb` (`bwrap`, `local`)."""

    # "cgroup v1 + rlimit", "cgroup v2 + rlimit", "rlimit" (no cgroup could be
    # made: pids by RLIMIT_NPROC, which root ignores), or "docker".
    mechanism: str
    pids: int
    memory_bytes: int | None = None  # None: no memory cgroup (only the address space)
    address_space_bytes: int | None = None  # per process (RLIMIT_AS)
    # The seccomp filter every process of a sandbox ran under (docs/isolation.md,
    # *known limits*); None: not recorded.
    seccomp: str | None = None


class Resumed(_Model):
    """One `ci-evals run --resume` of the run: when, what it kept and ran again, and
    what the earlier sessions spent that no stage in the file accounts for any more
    (the discarded attempts of the stages it ran again): the run's cost counts it."""

    at: datetime
    kept: int = Field(ge=0)  # stages kept with their evidence
    rerun: int = Field(ge=0)  # stages set to run again (some may end skipped)
    discarded_usd: float = Field(default=0.0, ge=0.0)


class RunResult(_Model):
    version: int = VERSION
    run_id: str
    tool_version: str
    started_at: datetime
    finished_at: datetime | None = None
    status: RunStatus = "running"
    model: str | None = None
    # Which endpoint served the model calls: "anthropic" (the real API),
    # "stub:PATH" (the stub model and its script) -- a stub run's verdicts are
    # a wiring check, never evidence about the model -- or "replay:RUN_DIR".
    model_endpoint: str = "anthropic"
    # A replay: what its recording came from (None: not a replay).
    replayed_from: ReplayedFrom | None = None
    # Where the agent ran (a sandbox kind) and whether that isolated it from
    # this machine's secrets, repository and run folder (`local` does not).
    sandbox: str = "local"
    isolated: bool = False
    # The sandbox had the network (a suite's `network: true` with `sandbox: docker`).
    network: bool = False
    resource_limits: ResourceLimits | None = None  # None: not recorded
    from_stage: int
    suite_file: str
    suite: SuiteIdentity | None = None  # None: not recorded (files before version 3)
    revision: Revision | None = None  # None: not recorded (files before version 3)
    # What was run: the suite file's and the plugin folder's SHA-256 (fs.digest), so a
    # run of another revision is not promoted to a fixture unnoticed (None: not recorded).
    suite_sha256: str | None = None
    plugin_sha256: str | None = None
    budget_usd: float | None = None
    # `forwarded.cost_usd` when the endpoint meters (the real API), else the
    # stages' and reviewers' costs as their CLIs reported them.
    total_cost_usd: float = 0.0
    forwarded: Forwarded | None = None  # None: not metered (the stub; files before version 5)
    repeat: int = 1  # runs per scenario (a case unit's own: `ScenarioResult.repeats`)
    pass_at_least: int | None = None  # k of `repeat` must pass (None: all)
    # `plugin_evals.threshold` below 1.0: a stage passes when the mean of its runs'
    # scores (binary score / 100) is at least this, as `claude plugin eval --threshold`
    # (None: the k-of-n rule). Recorded so the summaries can be recomputed.
    score_at_least: float | None = Field(default=None, ge=0.0, le=1.0)
    # `with-without`: every unit also ran without the plugin (`ScenarioResult.arm`), and
    # each summary compares the arms (`StageSummary.arms`); `none`: one arm.
    ablation: Literal["none", "with-without"] = "none"
    # The mean of the summaries' deltas (score with - score without) where both arms
    # have one; None: no summary has one.
    mean_delta: float | None = None
    scenarios: list[ScenarioResult] = Field(default_factory=list)
    # One per (scenario, stage), over its repeats: the k-of-n verdict and statistics.
    summaries: list[StageSummary] = Field(default_factory=list)
    regraded_at: datetime | None = None  # set by `ci-evals grade` on the file it writes
    # `stop_repeats_early`: per scenario, the repeats not started because its k-of-K
    # verdict was decided (`ci_evals.run.adaptive`); they are the last ones.
    repeats_stopped: dict[str, int] = Field(default_factory=dict)
    # The suite's `gate:` (`stable`: `report --history` gates only on criteria stable
    # on main) and `flaky_bounds:` (None: 0,1), recorded for the report, which reads
    # the results file, not the suite.
    gate: Literal["all", "stable"] = "all"
    flaky_bounds: tuple[float, float] | None = None
    # `run --shard I/K`: the shard this file holds (None: the whole run, or a merge of shards).
    shard: Shard | None = None
    # `ci-evals merge`: the shards it was merged from, each one's wall time (None: not merged).
    merged_shards: list[ShardTiming] | None = None
    # `ci-evals import plugin-eval`: the document it was imported from (None: ci-evals ran it).
    imported_from: ImportedFrom | None = None
    # `run --resume`: each session that finished this run after the first, in order.
    resumed: list[Resumed] = Field(default_factory=list)

    @property
    def resumed_note(self) -> str:
        """How the run was finished, for a headline: "resumed once: 4 stage(s) kept
        with their evidence, 2 set to run again"; "" when it ran in one session."""
        if not self.resumed:
            return ""
        kept = sum(1 for s in self.scenarios for stage in s.stages if stage.resumed == "kept")
        rerun = sum(1 for s in self.scenarios for stage in s.stages if stage.resumed == "rerun")
        times = "once" if len(self.resumed) == 1 else f"{len(self.resumed)} times"
        return (
            f"resumed {times} (run --resume): {kept} stage(s) kept with their evidence, "
            f"{rerun} run again"
        )

    @property
    def discarded_usd(self) -> float:
        """What resumed sessions discarded: attempts no stage in the file counts."""
        return math.fsum(session.discarded_usd for session in self.resumed)

    def repeats_of(self, scenario: ScenarioResult) -> int:
        """How many times `scenario` ran: its own count, else the run's `repeat`."""
        return scenario.repeats if scenario.repeats is not None else self.repeat

    @property
    def repeated(self) -> bool:
        """Some scenario ran more than once (the over-repeats table has something to say)."""
        return any(self.repeats_of(scenario) > 1 for scenario in self.scenarios)

    @property
    def repeats_text(self) -> str:
        """How many times the scenarios ran, for a headline: "3", "1 to 3" (each case
        its own `runs`), or "" when each ran once."""
        counts = sorted({self.repeats_of(scenario) for scenario in self.scenarios})
        if not counts or counts == [1]:
            return ""
        return str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"

    def label_of(self, scenario: ScenarioResult) -> str:
        """`acme`, or `acme#2` for the second of a scenario's several repeats;
        `acme#2 (without)` for its run without the plugin."""
        label = scenario.id
        if self.repeats_of(scenario) > 1:
            label = f"{scenario.id}#{scenario.repeat + 1}"
        return label if scenario.arm == "with" else f"{label} (without)"

    def folder_of(self, scenario: ScenarioResult) -> str:
        """The scenario's repeat's folder in the run folder: `acme`, or `acme/r2` for
        the second of its several repeats (the runner's layout); its run without the
        plugin in `without/` below that (no stage folder, `<k>-<name>`, is named so)."""
        folder = scenario.id
        if self.repeats_of(scenario) > 1:
            folder = f"{scenario.id}/r{scenario.repeat + 1}"
        return folder if scenario.arm == "with" else f"{folder}/{WITHOUT_DIR}"

    @property
    def unattributed_usd(self) -> float:
        """What the endpoint charged beyond the stages' and reviewers' own costs:
        the agent's own calls (or the CLIs pricing differently); 0 when not metered."""
        if self.forwarded is None:
            return 0.0
        return max(0.0, self.forwarded.cost_usd - self.stages_cost_usd)

    @property
    def stages_cost_usd(self) -> float:
        """The stages' and reviewers' costs, as their CLIs reported them."""
        return math.fsum(
            (stage.cost_usd or 0.0) + (stage.grading_cost_usd or 0.0)
            for scenario in self.scenarios
            for stage in scenario.stages
        )

    @property
    def forwarded_note(self) -> str:
        """What to say after the total cost about the endpoint's count (the total is
        its cost): "; 14 model request(s) forwarded, $0.6100 of it outside any stage's
        cost (the agent's own calls), 3 refused for the budget", or ""."""
        forwarded = self.forwarded
        if forwarded is None:
            return ""
        note = f"; {forwarded.requests} model request(s) forwarded"
        outside = self.unattributed_usd
        if outside >= 0.00005:  # shown to four decimals
            note += (
                f", ${outside:.4f} of it outside any stage's cost "
                "(the agent's own calls, or the CLI's prices)"
            )
        if forwarded.refused:
            note += f", {forwarded.refused} refused for the budget"
        return note

    @property
    def cost_note(self) -> str:
        """What to say after a cost: a stub's cost is its scripted token counts at
        list price, never money spent (" (simulated: stub model)"); a replay's is
        the recording's usage at list price, nothing spent now; else ""."""
        if self.model_endpoint.startswith("stub:"):
            return " (simulated: stub model)"
        if self.model_endpoint.startswith("replay:"):
            return " (replayed: recorded usage, $0 spent)"
        if self.imported_from is not None:
            total = self.imported_from.cost_usd
            return f" (the with-plugin runs as the CLI priced them; in all ${total:.4f})"
        return ""

    @property
    def origin_note(self) -> str:
        """What the run's verdicts are evidence of when no model answered it afresh,
        in one line each report shows (escaped as it shows any text); "" for a live
        model. A replay says its recording's origin, and fails closed: one whose
        origin is not recorded is no model's verdict (docs/replay.md). An imported
        run says who ran and graded it."""
        if self.imported_from is not None:
            return self.imported_from.note
        if self.model_endpoint.startswith("stub:"):
            return "stub model: a wiring check, not a model verdict"
        if not self.model_endpoint.startswith("replay:"):
            return ""
        recorded = self.replayed_from
        if recorded is None or recorded.origin == "unknown":
            return "replayed, origin unknown: not a model verdict"
        if recorded.origin == "stub":
            return "replayed stub model: a wiring check, not a model verdict"
        model = recorded.model or "the CLI's default model"
        day = recorded.recorded_on.isoformat() if recorded.recorded_on else "date unknown"
        return f"replayed from a recording of {model} ({day}): not a fresh model verdict"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of `results.json` (checked in as docs/results.schema.json)."""
    schema = RunResult.model_json_schema()
    schema["$id"] = f"https://ci-evals/results/v{VERSION}.schema.json"
    return schema


def write_results(run_dir: Path, result: RunResult, data: bytes | None = None) -> Path:
    """Write `run_dir/results.json` atomically: readers see the old file or the new one
    (`data`: `dump_results(result)`, when the caller has it already)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RESULTS_FILE
    write_atomic(path, dump_results(result) if data is None else data, mode=0o644)
    return path


def dump_results(result: RunResult) -> bytes:
    """The results file's bytes (indented JSON, one trailing newline)."""
    return (result.model_dump_json(indent=2) + "\n").encode("utf-8")


def path_name_problems(result: RunResult) -> list[tuple[str, str]]:
    """(field, why) for each id of `result` a reader joins to a folder that is no safe
    name (`fs.names`): a scenario's folder (`<id>`, `r<repeat>`), a stage's
    (`<number>-<name>`), a shard unit's scenario. Reports that only print ids need
    none of this (they print them inert); a reader that makes a path of them does."""
    found: list[tuple[str, str]] = []
    for i, scenario in enumerate(result.scenarios):
        for field, name in (
            (f"scenarios[{i}].id", scenario.id),
            (f"scenarios[{i}].repeat", f"r{scenario.repeat + 1}" if scenario.repeat >= 0 else ""),
        ):
            problem = name_problem(name)
            if problem:
                found.append((field, problem))
        for j, stage in enumerate(scenario.stages):
            problem = name_problem(f"{stage.number}-{stage.name}")
            if problem:
                found.append((f"scenarios[{i}].stages[{j}].name", problem))
    for i, unit in enumerate(result.shard.units if result.shard else []):
        problem = name_problem(unit.scenario)
        if problem:
            found.append((f"shard.units[{i}].scenario", problem))
    return found


def require_path_names(result: RunResult, file: Path) -> None:
    """`UserError` naming `file` and the field when an id of `result` is no safe name:
    before any of them becomes a path (docs/scale-out.md, *Names that become paths*)."""
    found = path_name_problems(result)
    if found:
        field, problem = found[0]
        raise UserError(
            f"an id that would be a folder is refused: {problem}",
            file=file,
            field=field,
            hint=f"{len(found)} such id(s); a results file as `ci-evals run` wrote it has none",
        )


def require_own_run(result: RunResult, file: Path, doing: str) -> None:
    """`UserError` when `result` was imported (`imported_from`): it holds the CLI's
    verdicts, no saved stage state a re-grade or a fixture could take."""
    if result.imported_from is not None:
        raise UserError(
            f"cannot {doing} a run imported from {IMPORTED_TOOL} "
            f"({result.imported_from.file}): it holds the CLI's verdicts, no saved stage state",
            file=file,
            hint="run the cases with ci-evals (`plugin_evals:` in ci-evals.yaml)",
        )


def read_results(path: Path) -> RunResult:
    """Read a results file (or a run folder holding one); `UserError` when unusable."""
    if path.is_dir():
        path = path / RESULTS_FILE
    if not os.path.lexists(path):
        raise UserError("results file not found", file=path)
    # Written elsewhere (an artifact, a fork's run): no input may crash the reader, and
    # none make it wait (a FIFO) or read without end (a link to /dev/zero).
    data = json_input.load_file(path, MAX_RESULTS_BYTES, what="results file")
    if not isinstance(data, dict):
        raise UserError("not a ci-evals results file (expected a JSON object)", file=path)
    data = migrate(data, file=path)
    try:
        return RunResult.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(
            f"not a valid results file: {first['msg']}",
            file=path,
            field=where or None,
            hint=f"{exc.error_count()} problem(s)",
        ) from None
