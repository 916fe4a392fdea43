"""`ci-evals run --resume RUN_DIR`: finish an interrupted or partly errored run.

The run folder is read back as evidence, not trusted: the results file must
agree with itself and with the graders' files beside it (the checks `report`
makes, passed down by the command), and each stage kept must still hold what
the file says it produced. Then, per unit (a scenario's repeat, in its arm),
the stages that passed from its first on are **kept**; a unit whose first stage
not kept *failed* or hit a *limit* is final (a verdict, not an accident: running
it again would roll the dice until it passes); every other stage (an `error`, one
never graded, still `running`, or skipped by the interrupt, the budget or the
endpoint) **runs again** with every stage after it, from the last kept stage's
saved state. A kept stage that cannot be verified sends its unit back to its
first stage. What the earlier sessions spent stays spent
(`results.model.Resumed`).

Refused in one line, before anything starts: a folder without a run, one another
ci-evals holds, a run of another suite or commit, a merged or imported run, a
run that passed, and a run where every stage has its verdict. Every rule:
docs/run.md (*Resuming a broken run*).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ci_evals.errors import UserError
from ci_evals.fs import owned
from ci_evals.fs.digest import file_sha256, tree_sha256
from ci_evals.fs.state import AFTER_DIR, links_file, state_links
from ci_evals.results.consistency import GOES_ON
from ci_evals.results.model import (
    RESULTS_FILE,
    FileChange,
    RunResult,
    ScenarioResult,
    StageResult,
    read_results,
    require_own_run,
)
from ci_evals.results.summary import SINGLE_ARM, exit_code
from ci_evals.suite.load import Suite
from ci_evals.text import inert

# Every way a saved run disagrees with itself or with its folder, one line each
# (`report.verify` and `report.evidence`, a layer above: the command passes them).
Problems = Callable[[RunResult, Path], list[str]]
# A unit of the run: (scenario id, repeat, arm).
UnitKey = tuple[str, int, str]
# Options that choose what runs: the resumed run's are the ones it recorded.
_FIXED = (
    ("from_stage", "--from-stage"),
    ("base", "--base"),
    ("scenario", "--scenario"),
    ("units", "--units"),
    ("repeat", "--repeat"),
    ("ablation", "--ablation"),
    ("shard", "--shard"),
    ("durations", "--durations"),
    ("out", "--out"),
    ("model", "--model"),
    ("allow_tools", "--allow-tools"),
    ("tasks", "--tasks"),
)


@dataclass(frozen=True)
class Kept:
    """A unit's stages kept from the earlier session, and the saved state the
    next stage starts from (None: nothing kept, it starts from its fixtures)."""

    stages: tuple[StageResult, ...] = ()
    state: Path | None = None


@dataclass(frozen=True)
class Resume:
    """A run folder read back for `run --resume` (`read`)."""

    run_dir: Path
    saved: RunResult
    digest: str  # results.json's SHA-256 as read: the runner refuses it changed since
    kept: Mapping[UnitKey, Kept] = field(default_factory=dict)
    final: frozenset[UnitKey] = frozenset()  # units with every verdict: nothing runs again

    def kept_of(self, scenario: ScenarioResult) -> Kept:
        return self.kept.get(key_of(scenario), Kept())

    def is_final(self, scenario: ScenarioResult) -> bool:
        return key_of(scenario) in self.final

    @property
    def kept_count(self) -> int:
        final = sum(len(s.stages) for s in self.saved.scenarios if key_of(s) in self.final)
        return final + sum(len(kept.stages) for kept in self.kept.values())

    @property
    def rerun_count(self) -> int:
        return sum(len(s.stages) for s in self.saved.scenarios) - self.kept_count

    @property
    def discarded_usd(self) -> float:
        """What the earlier sessions spent that no kept stage accounts for any more
        (the attempts discarded now); a metered run's `forwarded` counts it anyway."""
        kept = sum(
            _stage_cost(stage)
            for s in self.saved.scenarios
            for stage in (s.stages if key_of(s) in self.final else self.kept_of(s).stages)
        )
        # Less what earlier resumes discarded already: the file counts that apart.
        return max(0.0, self.saved.total_cost_usd - kept - self.saved.discarded_usd)


def key_of(scenario: ScenarioResult) -> UnitKey:
    return (scenario.id, scenario.repeat, scenario.arm)


def _stage_cost(stage: StageResult) -> float:
    return (stage.cost_usd or 0.0) + (stage.grading_cost_usd or 0.0)


def read(run_dir: Path, problems: Problems) -> Resume:
    """The run in `run_dir`, checked and split into what is kept and what runs
    again; `UserError` (one line) when it cannot or need not be resumed."""
    run_dir = run_dir.resolve()
    file = run_dir / RESULTS_FILE
    if not file.is_file():
        raise UserError(
            "no run to resume here (no results.json)", file=run_dir, field="--resume",
            hint="give the folder a `ci-evals run` wrote (its `run folder:` line)",
        )  # fmt: skip
    _require_free(run_dir)
    data = file.read_bytes()
    saved = read_results(file)
    require_own_run(saved, file, "resume")
    if saved.merged_shards is not None:
        raise UserError(
            "cannot resume a merged run: its shards ran in their own folders",
            file=file, hint="resume each shard's run folder, then merge them again",
        )  # fmt: skip
    found = problems(saved, run_dir)
    if found:
        for problem in found:
            print(f"ci-evals run --resume: {inert(problem)}", file=sys.stderr)
        raise UserError(
            f"the run folder disagrees with its results file ({len(found)} problem(s), "
            "listed above): nothing in it can be kept", file=file,
            hint="start a new run",
        )  # fmt: skip
    if saved.status == "completed" and exit_code(saved) == 0:
        raise UserError(
            "the run passed: nothing to resume", file=file, hint="start a new run to run it again"
        )
    kept: dict[UnitKey, Kept] = {}
    final: set[UnitKey] = set()
    for scenario in saved.scenarios:
        if _final(scenario):
            final.add(key_of(scenario))
        else:
            kept[key_of(scenario)] = _kept(saved, scenario, run_dir)
    if not kept:
        raise UserError(
            "nothing to resume: every stage has its verdict (a failure is a result, not "
            "an accident: resuming does not roll the dice again)",
            file=file, hint="start a new run to run it again",
        )  # fmt: skip
    return Resume(
        run_dir=run_dir,
        saved=saved,
        digest=hashlib.sha256(data).hexdigest(),
        kept=kept,
        final=frozenset(final),
    )


def _require_free(run_dir: Path) -> None:
    """Refuse a folder another ci-evals holds (a run still going, another resume).
    The runner takes the lock for good and checks the file is the one read here."""
    try:
        fd = owned.own(run_dir)
    except owned.Taken:
        raise UserError(
            f"{run_dir} is in use by another ci-evals run", field="--resume",
            hint="wait for it to end, then resume",
        ) from None  # fmt: skip
    owned.release(fd)


def _went_on(stage: StageResult) -> bool:
    """The stage passed, or completed without graders. A `completed` stage with
    graders was never graded (the process was killed while they ran: results.json
    is written as the run goes): no pass, it runs again."""
    return stage.status in GOES_ON and (stage.status == "passed" or not stage.graded)


def _final(scenario: ScenarioResult) -> bool:
    """Every stage of the unit has its verdict: all went on, or the first that did
    not failed, hit a limit, or cannot run without the plugin (a plan's property)."""
    for stage in scenario.stages:
        if _went_on(stage):
            continue
        if stage.status in ("failed", "limit"):
            return True
        return stage.status == "skipped" and (stage.error or "").startswith(SINGLE_ARM)
    return True


def _kept(saved: RunResult, scenario: ScenarioResult, run_dir: Path) -> Kept:
    """The unit's stages that passed from its first on, each verified; none when one
    cannot be (said on stderr: the unit runs again from its start)."""
    folder = run_dir / saved.folder_of(scenario)
    stages: list[StageResult] = []
    for stage in scenario.stages:
        if not _went_on(stage):
            break
        why = unverified(stage, run_dir, folder / f"{stage.number}-{stage.name}")
        if why is not None:
            label = f"{saved.label_of(scenario)} stage {stage.number} ({stage.name})"
            print(
                f"ci-evals: {label} is not kept ({why}): {saved.label_of(scenario)} runs "
                "again from its first stage",
                file=sys.stderr,
            )
            return Kept()
        stages.append(stage)
    if not stages:
        return Kept()
    last = stages[-1]
    return Kept(tuple(stages), folder / f"{last.number}-{last.name}" / AFTER_DIR)


def unverified(stage: StageResult, run_dir: Path, stage_dir: Path) -> str | None:
    """Why a passed stage's folder cannot be kept, or None: its saved state is
    there, holds what the stage is recorded to have produced, and the stage left
    the plugin copy (which no state saves) as it was."""
    if stage.plugin_changes or stage.plugin_changes_omitted:
        return "it changed the plugin copy, which no saved state holds"
    after = stage_dir / AFTER_DIR
    missing = _missing(stage, run_dir, stage_dir)
    if missing is not None:
        return missing
    try:
        links = state_links(after)
    except UserError as exc:
        return str(exc)
    return next((w for c in stage.produced if (w := _holds(after, links, c)) is not None), None)


def _missing(stage: StageResult, run_dir: Path, stage_dir: Path) -> str | None:
    """What of the stage's folder is not there: its saved state, its record of
    links, its trajectory."""
    after = stage_dir / AFTER_DIR
    if not _real_dir(stage_dir) or not _real_dir(after):
        return f"its saved state {after} is missing"
    if not _real_file(links_file(after)):
        return f"its record of links {links_file(after)} is missing"
    if stage.trajectory is not None and not _real_file(run_dir / stage.trajectory):
        return f"its trajectory {stage.trajectory} is missing"
    return None


def _holds(after: Path, links: Mapping[str, str], change: FileChange) -> str | None:
    """Whether the saved state holds `change` as the stage recorded it."""
    path = after / change.path
    if change.change == "deleted":
        if os.path.lexists(path) or change.path in links:
            return f"its saved state holds {change.path!r}, which it deleted"
        return None
    if change.kind == "link":
        if links.get(change.path) != change.target:
            return f"its saved state does not hold the link {change.path!r} it made"
        return None
    if not _real_file(path) or file_sha256(path) != change.sha256:
        return f"its saved state does not hold {change.path!r} as it wrote it"
    return None


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _real_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def arguments(args: argparse.Namespace, saved: RunResult, run_dir: Path) -> argparse.Namespace:
    """`args` for the run as it was: its suite, first stage, scenarios, repeats,
    arms, shard and model, which no option may change (one line if one tries)."""
    for name, option in _FIXED:
        if getattr(args, name, None) not in (None, [], False):
            raise UserError(
                f"{option} cannot change a resumed run: it runs what it recorded",
                field="--resume", hint=f"leave {option} out, or start a new run",
            )  # fmt: skip
    values = vars(args) | {
        "suite": args.suite or Path(saved.suite_file),
        "from_stage": str(saved.from_stage),
        "scenario": list(dict.fromkeys(s.id for s in saved.scenarios)),
        # A case's own runs are its suite's; an explicit --repeat overrode them.
        "repeat": None if any(s.unit == "case" for s in saved.scenarios) else saved.repeat,
        "ablation": saved.ablation,
        "model": _recorded_model(saved),
        "out": run_dir,
    }
    return argparse.Namespace(**values)


def _recorded_model(saved: RunResult) -> str | None:
    """The `--model` the run was started with: its stub script or recording, else
    the model it asked (the real API's default when none was recorded)."""
    if saved.model_endpoint == "anthropic":
        return saved.model
    return saved.model_endpoint


def require_same_suite(saved: RunResult, suite: Suite, commit: str | None) -> None:
    """Refuse to resume a run of another suite or commit: its kept stages were
    graded on what is not here any more."""
    changed = []
    if saved.suite_sha256 != file_sha256(suite.file):
        changed.append(f"the suite file {suite.display}")
    if saved.plugin_sha256 != tree_sha256(suite.plugin.path, suite.plugin.files):
        changed.append(f"the plugin {suite.plugin.name}")
    recorded = saved.revision.commit if saved.revision is not None else None
    if recorded is not None and commit is not None and recorded != commit:
        changed.append(f"the commit (the run was of {recorded[:12]}, HEAD is {commit[:12]})")
    if changed:
        raise UserError(
            f"the run folder holds a run of another suite or commit: {', '.join(changed)} "
            "changed since (its digest differs)",
            field="--resume", hint="start a new run",
        )  # fmt: skip


def without_git_history(resume: Resume, suite: Suite) -> Resume:
    """`resume` less the kept stages of a scenario with `git: true`: its workspace's
    `.git` (the commits, branches and index its stages left) is in no saved state,
    so a stage after them would start from a repository they never left. Such a
    unit runs again from its first stage, said on stderr."""
    with_git = {scenario.id for scenario in suite.scenarios if scenario.git}
    kept = dict(resume.kept)
    for scenario in resume.saved.scenarios:
        key = key_of(scenario)
        if scenario.id in with_git and key in kept and kept[key].stages:
            print(
                f"ci-evals: {resume.saved.label_of(scenario)}: no stage is kept (its "
                "workspace is a git repository, whose .git no saved state holds): it runs "
                "again from its first stage",
                file=sys.stderr,
            )
            kept[key] = Kept()
    return replace(resume, kept=kept)


def require_same_units(resume: Resume, result: RunResult) -> None:
    """The resumed plan runs exactly the units and stages the run folder holds."""

    def shape(run: RunResult) -> list[tuple[UnitKey, tuple[int, ...]]]:
        return [(key_of(s), tuple(stage.number for stage in s.stages)) for s in run.scenarios]

    if shape(resume.saved) != shape(result):
        raise UserError(
            "the suite now runs other scenarios, repeats or stages than the run folder holds",
            file=resume.run_dir / RESULTS_FILE, field="--resume", hint="start a new run",
        )  # fmt: skip
