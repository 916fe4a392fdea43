"""The fixtures against the phase contracts: is any fixture stale?

For each fixture set (the suite's, and each scenario's own) and each stage k
with a contract:

- fixture k, laid over the seed and fixtures 1..k-1 as a run would lay them,
  must satisfy stage k's `produces`;
- the seed and fixtures 1..k-1 — what a run from stage k starts from — must
  satisfy stage k's `consumes`.

Each item runs the same deterministic checks the `contract` grader runs
(`grading.kinds.checks`). A failure is one line naming the fixture file, the
contract field and the contract's line in the suite file. No model, no
plugin copy: only the fixtures' files are laid down, so it is fast enough for
a pre-commit hook.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.fs.copy import copy_file
from ci_evals.fs.walk import walk
from ci_evals.grading.kinds.checks.files import FilesExist
from ci_evals.grading.kinds.checks.front_matter import HasFrontMatter
from ci_evals.grading.kinds.checks.headings import HasHeadings
from ci_evals.grading.kinds.checks.json_schema import JsonSchema
from ci_evals.grading.kinds.checks.run import check_outcomes
from ci_evals.suite.contracts import CONTRACT_GRADER, Consumed, Produced, seed_folder

if TYPE_CHECKING:
    from ci_evals.suite.load import Scenario, Stage, Suite

# The checks a contract item compiles to: each looks at files matching globs.
_FileCheck = FilesExist | HasHeadings | HasFrontMatter | JsonSchema


@dataclass(frozen=True)
class ContractReport:
    problems: tuple[str, ...]  # one line each: file, field, contract line
    checked: int  # contract items checked
    notes: tuple[str, ...]  # what could not be checked (a missing fixture folder)


def fixture_sets(suite: Suite, scenario: Scenario | None) -> list[Scenario | None]:
    """`scenario`'s set alone, or every distinct set: the suite's and each scenario's own."""
    if scenario is not None:
        return [scenario]
    own = {s.fixtures: s for s in suite.scenarios if s.fixtures is not None}
    return [None, *own.values()]


def check(suite: Suite, scenario: Scenario | None = None) -> ContractReport:
    """Every contract of `suite` against the fixtures (see the module doc)."""
    problems: list[str] = []
    notes: list[str] = []
    checked = 0
    with tempfile.TemporaryDirectory(prefix="ci-evals-contracts-") as temp:
        for index, chosen in enumerate(fixture_sets(suite, scenario)):
            layout = _Layout(suite, chosen, Path(temp) / str(index))
            for stage in suite.stages:
                contract = stage.contract
                if contract is None or contract.empty:
                    continue
                if contract.consumes:
                    root = layout.before(stage)
                    if root is None:
                        notes.append(layout.missing_note(stage, "consumes"))
                    else:
                        for item in contract.consumes:
                            checked += 1
                            problems.extend(_problems(suite, stage, item, root, layout))
                if contract.produces:
                    root = layout.after(stage)
                    if root is None:
                        # The last stage usually has no fixture: nothing to hold. Any
                        # other stage's missing fixture is said, never passed unseen.
                        if stage.number < len(suite.stages):
                            notes.append(layout.missing_note(stage, "produces"))
                        continue
                    for produced in contract.produces:
                        checked += 1
                        problems.extend(_problems(suite, stage, produced, root, layout))
    return ContractReport(tuple(problems), checked, tuple(dict.fromkeys(notes)))


class _Layout:
    """The fixtures of one set merged into folders, one per "after stage k", on demand."""

    def __init__(self, suite: Suite, scenario: Scenario | None, temp: Path) -> None:
        self.suite = suite
        self.scenario = scenario
        self.temp = temp
        self.sources: dict[str, str] = {}  # relative path -> fixture file (of the last lay-down)
        self.seed = seed_folder(suite.fixtures_for(scenario))  # as the run lays it

    def _folders(self, upto: int) -> list[Path] | None:
        folders = [] if self.seed is None else [self.seed]
        for stage in self.suite.stages[:upto]:
            folder = self.suite.fixture_dir(stage, self.scenario)
            if not folder.is_dir():
                return None
            folders.append(folder)
        return folders

    def before(self, stage: Stage) -> Path | None:
        return self._lay(stage.number - 1)

    def after(self, stage: Stage) -> Path | None:
        return self._lay(stage.number)

    def _lay(self, upto: int) -> Path | None:
        folders = self._folders(upto)
        if folders is None:
            return None
        root = self.temp / f"after-{upto}"
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        self.sources = {}
        for folder in folders:
            self.sources.update(_overlay(folder, root))
        return root

    def missing_note(self, stage: Stage, role: str) -> str:
        whose = f" of scenario {self.scenario.id!r}" if self.scenario else ""
        which = "a fixture before it" if role == "consumes" else "its fixture (or one before)"
        return f"stage {stage.number} ({stage.name}): {role} not checked: {which}{whose} is missing"


def _overlay(fixture: Path, root: Path) -> Iterator[tuple[str, str]]:
    """Copy `fixture` onto `root` (a later fixture replaces a file); yield (rel, source)."""
    base = str(root) + os.sep
    for rel, kind, entry in walk(fixture, skip_vanished=True, skip_unreadable=True):
        dest = base + rel
        if kind == "dir":
            if os.path.isfile(dest) or os.path.islink(dest):
                raise UserError(f"fixture folder {entry.path} replaces a file of an earlier one")
            os.makedirs(dest, exist_ok=True)
            continue
        if os.path.isdir(dest) and not os.path.islink(dest):
            raise UserError(f"fixture file {entry.path} replaces a folder of an earlier one")
        if os.path.lexists(dest):
            os.unlink(dest)
        if kind == "link":
            os.symlink(os.readlink(entry.path), dest)
        elif kind == "file":
            copy_file(entry.path, dest)
        else:
            continue
        yield rel, entry.path


def _problems(
    suite: Suite, stage: Stage, item: Produced | Consumed, root: Path, layout: _Layout
) -> list[str]:
    lines = []
    for one in item.checks():
        [criterion] = check_outcomes((one,), root)
        if criterion.passed:
            continue
        field = one.id.removeprefix(f"{CONTRACT_GRADER}:")
        assert isinstance(one, _FileCheck)  # what contract items compile to
        where, failing = _where(one, root, layout, _expected(suite, stage, item, layout))
        detail = criterion.detail
        if len(failing) == 1:  # the detail starts with the file the line already names
            detail = detail.removeprefix(f"{failing[0]}: ")
        whose = f"stage {stage.number} ({stage.name}) {field}"
        if isinstance(item, Consumed):
            producer = (
                "the seed fixture"
                if item.producer == 0
                else f"stage {item.producer} ({suite.stages[item.producer - 1].name})"
            )
            whose += f" (produced by {producer})"
        lines.append(f"{where}: {detail} -- {whose}, {suite.display}:{item.line}")
    return lines


def _expected(suite: Suite, stage: Stage, item: Produced | Consumed, layout: _Layout) -> Path:
    """The fixture folder that should hold the item's files: the stage's own for
    `produces`, the producer's for `consumes` (the seed for stage 0)."""
    number = item.producer if isinstance(item, Consumed) else stage.number
    if number == 0 and layout.seed is not None:
        return layout.seed
    return suite.fixture_dir(max(number, 1), layout.scenario)


def _where(one: _FileCheck, root: Path, layout: _Layout, expected: Path) -> tuple[str, list[str]]:
    """The fixture files that fail `one` (each checked alone) and their relative
    paths, or the fixture folder(s) that hold (or should hold) its files and []."""
    matched = sorted({str(p.relative_to(root)) for g in one.globs for p in root.glob(g)})
    matched = [rel for rel in matched if rel in layout.sources]
    if matched and not isinstance(one, FilesExist):
        failing = [
            rel
            for rel in matched
            if not check_outcomes((replace(one, globs=(rel,)),), root)[0].passed
        ]
        if failing:
            return ", ".join(_shown(layout.sources[rel]) for rel in failing), failing
    if matched:
        return ", ".join(_shown(layout.sources[rel]) for rel in matched), []
    return _shown(str(expected)), []


def _shown(path: str) -> str:
    """A path relative to the current folder when it is below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
