"""Does a results file agree with the evidence in its run folder? `problems` says
where it does not.

`report.verify` re-evaluates each verdict from the criteria the file records; a
file rewritten from end to end into a consistent pass passes that. What the file
cannot rewrite alone is what the graders left beside it, in each stage's folder:
for every graded stage its saved state (`after/`), every grader output it records
(`raw_output`, of its recorded size and SHA-256), the reviewer's `scorecard.json`
and final message (read again as a scorecard: the same scores), and nothing the
file does not account for (a grader log beside a stage whose verdict records no
such grader).

The folder is a shard's artifact, hostile: ids were checked as names first
(`results.model.require_path_names`), no link is followed, no file read beyond
its cap. What no check here can see is evidence forged with the file — the
shard's MAC is for that (docs/scale-out.md, *Who can forge a verdict*).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.fs import json_input
from ci_evals.fs.state import AFTER_DIR
from ci_evals.grading.reviewer.review import GRADER, SCORECARD_FILE
from ci_evals.results.consistency import stage_where

if TYPE_CHECKING:
    from ci_evals.results.criteria import GraderResult
    from ci_evals.results.model import RunResult, StageResult

_LOGS = ("command-", "mcp-")  # a command grader's and an MCP check's log prefixes
_CAP = 16 * 1024 * 1024  # no grader output of a shard is read beyond this


def problems(result: RunResult, folder: Path) -> list[str]:
    """Where `result`'s graded stages disagree with the files in `folder` (its run
    folder), one line each."""
    found: list[str] = []
    for scenario in result.scenarios:
        base = PurePosixPath(result.folder_of(scenario))
        for stage in scenario.stages:
            rel = base / f"{stage.number}-{stage.name}"
            where = stage_where(result, scenario, stage)
            found += [f"{where}: {p}" for p in _stage(stage, folder, rel)]
    return found


def _stage(stage: StageResult, folder: Path, rel: PurePosixPath) -> list[str]:
    stage_dir = folder / rel
    if _is_dir(stage_dir) and not Path(os.path.realpath(stage_dir)).is_relative_to(
        os.path.realpath(folder)
    ):
        return [f"its folder {rel} leads out of the run folder"]
    held = _evidence_held(stage_dir)
    verdict = stage.grading
    if verdict is None:
        return [f"{name} lies beside it, but it records no verdict" for name in sorted(held)]
    found: list[str] = []
    if not _is_dir(stage_dir / AFTER_DIR):
        found.append(f"its verdict has no saved state ({rel}/{AFTER_DIR}) beside it")
    accounted: set[str] = set()
    for grader in verdict.graders:
        raw: bytes | None = None
        if grader.raw_output is not None and grader.raw_output.path is not None:
            name = _inside(grader.raw_output.path, rel)
            if name is None:
                found.append(f"{grader.grader}'s output {grader.raw_output.path!r} is not in {rel}")
                continue
            accounted.add(name)
            raw, problem = _read(stage_dir / name, grader.raw_output.size)
            if raw is not None and hashlib.sha256(raw).hexdigest() != grader.raw_output.sha256:
                problem = "its SHA-256 is not the one recorded"
            if problem:
                found.append(f"{grader.grader}'s output {name}: {problem}")
                raw = None
        if grader.grader == GRADER:
            accounted.add(SCORECARD_FILE)
            found += _reviewer(grader, stage_dir, raw)
    found += [
        f"{name} lies beside it, but no grader of its verdict records it"
        for name in sorted(held - accounted)
    ]
    return found


def _reviewer(grader: GraderResult, stage_dir: Path, raw: bytes | None) -> list[str]:
    """The recorded reviewer result against its `scorecard.json` and its final message."""
    from ci_evals.results.criteria import GraderResult  # noqa: PLC0415 - pydantic

    data, problem = _read(stage_dir / SCORECARD_FILE, _CAP)
    if data is None:
        if grader.error is not None and grader.raw_output is None:
            return []  # never run (no agent, budget spent): an error, no scorecard written
        return [f"the reviewer's {SCORECARD_FILE}: {problem}"]
    try:
        record = json_input.parse(data.decode("utf-8"), file=SCORECARD_FILE)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        saved = GraderResult.model_validate(record.get("result"))
        text = record.get("raw")
    except (UserError, ValueError, UnicodeDecodeError) as exc:
        return [f"the reviewer's {SCORECARD_FILE} is unreadable: {_first_line(exc)}"]
    found: list[str] = []
    if _scores(saved) != _scores(grader) or saved.error != grader.error:
        found.append(
            f"the reviewer's {SCORECARD_FILE} says {_shown(saved)}, the results file "
            f"{_shown(grader)}"
        )
    if grader.error is None:
        if (
            raw is None
            or not isinstance(text, str)
            or text.encode("utf-8", "surrogateescape") != raw
        ):
            found.append(f"the reviewer's final message is not the one {SCORECARD_FILE} holds")
        else:
            again = _parsed(raw, grader)
            if again != _scores(grader):
                found.append(
                    "the reviewer's final message, read again, scores "
                    f"{_listed(again)}, the results file {_listed(_scores(grader))}"
                )
    return found


Scores = tuple[tuple[str, str, float | None], ...] | str


def _scores(grader: GraderResult) -> Scores:
    return tuple((c.id, c.kind, c.score) for c in grader.criteria)


def _parsed(raw: bytes, grader: GraderResult) -> Scores:
    """The final message read again as `grade_scorecard` read it, against the rubrics
    (id and kind) the result records; the reason when it is no scorecard."""
    from ci_evals.grading.reviewer.rubrics import Rubric, RubricError, RubricSet  # noqa: PLC0415
    from ci_evals.grading.reviewer.scorecard import grade_scorecard  # noqa: PLC0415

    try:
        rubrics = RubricSet(Rubric(r.id, r.kind, Path(r.path), r.sha256) for r in grader.rubrics)
    except RubricError as exc:
        return f"no rubric set ({exc.message})"
    again = grade_scorecard(raw.decode("utf-8", "surrogateescape"), rubrics or None)
    return again.error or _scores(again)


def _listed(scores: Scores) -> str:
    if isinstance(scores, str):
        return scores
    return ", ".join(f"{i} {'-' if s is None else f'{s:g}'}" for i, _, s in scores) or "nothing"


def _shown(grader: GraderResult) -> str:
    return f"error {grader.error!r}" if grader.error else _listed(_scores(grader))


def _evidence_held(stage_dir: Path) -> set[str]:
    """The grader evidence files in a stage folder (none when it is no folder)."""
    if not _is_dir(stage_dir):
        return set()
    try:
        names = os.listdir(stage_dir)
    except OSError:
        return set()
    return {n for n in names if n == SCORECARD_FILE or (n.startswith(_LOGS) and n.endswith(".log"))}


def _inside(recorded: str, rel: PurePosixPath) -> str | None:
    """The file name of a recorded output path when it is directly in the stage folder."""
    path = PurePosixPath(recorded)
    if path.parent != rel or path.name in ("", ".", ".."):
        return None
    return path.name


def _read(path: Path, size: int) -> tuple[bytes | None, str]:
    """A regular file's bytes (never through a link), at most `size` and the cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, "missing" if exc.errno == errno.ENOENT else f"unreadable ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        limit = min(size, _CAP)
        if info.st_size > limit:
            return None, f"{info.st_size} bytes, more than {limit}"
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return stream.read(limit + 1), ""
    finally:
        os.close(fd)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
