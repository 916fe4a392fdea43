"""`run --base REV --base-run DIR` when only graders changed: re-grade the base's run.

compute-stage's `regrade` (`ci_evals.selection.grader_change`) says the change
touches only graders: the agent's behaviour at HEAD is the agent's behaviour
at the merge base, which the base branch's saved run (the baseline artifact,
`baseline fetch --out DIR`, or any run folder) already recorded. So instead of
running the agent, that run is copied into the new run folder and re-graded
there with HEAD's graders (`ci-evals grade`): its `results.json` is the
re-graded run (`regraded_at` set, the base's `run_id`), the base's own results
kept beside it as `results.base.json`. `report --baseline` then reads every
delta as the graders' ("the graders changed: N criteria now fail on main's own
outputs").

Fail closed: the base run is used only when it is a run of this suite at the
change's merge base (its recorded `revision.commit`), clean, that ran every
selected scenario from the selected stage or earlier. Anything else — no
`--base-run`, a run of another commit, a missing scenario — and the agent runs,
with the reason on stderr.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import UserError

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult
    from ci_evals.run.grade import Inconsistencies
    from ci_evals.selection.decide import Selection
    from ci_evals.suite.load import Scenario

BASE_RESULTS = "results.base.json"
ARTIFACT_FOLDER = "artifact"  # `baseline fetch --out DIR` unpacks the run folder here


def run_folder(given: Path) -> Path:
    """The run folder in `given`: itself, or the artifact `baseline fetch` unpacked."""
    inner = given / ARTIFACT_FOLDER
    if not (given / "results.json").is_file() and (inner / "results.json").is_file():
        return inner
    if (inner / "results.json").is_file() and any(inner.glob("*/")):
        return inner  # the whole artifact: its stage folders are there, not beside it
    return given


def why_not(
    base: RunResult, selection: Selection, scenarios: tuple[Scenario, ...], suite_file: Path
) -> str:
    """Why the saved run cannot stand for the base's ("" when it can)."""
    revision = base.revision
    ran = {s.id for s in base.scenarios}
    missing = [s.id for s in scenarios if s.id not in ran]
    reasons = [
        (revision is None or revision.commit is None, "the base run recorded no commit"),
        (revision is not None and revision.dirty, "the base run had uncommitted changes"),
        (
            revision is not None and revision.commit not in selection.merge_bases,
            f"the base run is not of the merge base "
            f"{', '.join(m[:12] for m in selection.merge_bases)}",
        ),
        (
            Path(base.suite_file).name != suite_file.name,
            f"the base run is of another suite ({base.suite_file})",
        ),
        (
            selection.from_stage is not None and base.from_stage > selection.from_stage,
            f"the base run started at stage {base.from_stage}, after stage "
            f"{selection.from_stage} that the change reaches",
        ),
        (bool(missing), f"the base run did not run {', '.join(missing)}"),
    ]
    return next((why for failed, why in reasons if failed), "")


def regrade(
    args: argparse.Namespace,
    selection: Selection,
    *,
    scenarios: tuple[Scenario, ...],
    suite_file: Path,
    out: Path,
    environ: Mapping[str, str],
    inconsistencies: Inconsistencies,
) -> int | None:
    """Re-grade `--base-run` into `out` (its exit code), or None: run the agent instead;
    `environ`: what the run hands on (`grade.run`'s)."""
    from ci_evals.results.model import read_results  # noqa: PLC0415 - pydantic
    from ci_evals.run import grade  # noqa: PLC0415

    given: Path | None = getattr(args, "base_run", None)
    if selection.regrade is None:
        return None
    if given is None:
        _say(f"{selection.regrade}, but no --base-run to re-grade: the agent runs")
        return None
    source = run_folder(given.resolve())
    try:
        base = read_results(source)
    except UserError as exc:
        _say(f"the base run cannot be read ({exc.message}): the agent runs")
        return None
    why = why_not(base, selection, scenarios, suite_file)
    if why:
        _say(f"{selection.regrade}, but {why}: the agent runs")
        return None
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out} is not empty", field="--out", hint="choose an empty folder")
    _say(f"{selection.regrade}: re-grading the base run {base.run_id} instead of running the agent")
    shutil.copytree(source, out, symlinks=True, dirs_exist_ok=True)
    regraded = out / "results.regraded.json"
    grade_args = argparse.Namespace(
        run_dir=out,
        suite=suite_file,
        reviewer="auto",
        model=args.model,
        output=regraded,
        isolation=getattr(args, "isolation", None),
    )
    code = grade.run(grade_args, environ, inconsistencies=inconsistencies)
    _record_change(regraded, selection)
    (out / "results.json").replace(out / BASE_RESULTS)
    regraded.replace(out / "results.json")
    print(f"re-graded run: {out} (the base's own results: {out / BASE_RESULTS})")
    return code


def _record_change(path: Path, selection: Selection) -> None:
    """The re-graded file's revision names the change's base and merge base, as a run
    with `--base` records them: `report --baseline` then checks the baseline's age."""
    from ci_evals.grade_state.regrade import write  # noqa: PLC0415 - pydantic
    from ci_evals.results.model import read_results  # noqa: PLC0415

    result = read_results(path)
    if result.revision is None or not selection.merge_bases:
        return
    result.revision = result.revision.model_copy(
        update={"base": selection.base, "merge_base": selection.merge_bases[0]}
    )
    write(path, result)


def _say(line: str) -> None:
    print(f"ci-evals run: {line}", file=sys.stderr)
