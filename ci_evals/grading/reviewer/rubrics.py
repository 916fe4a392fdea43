"""Find a reviewer's rubric files and what kind of criterion each defines.

Rubrics are the plugin's own markdown files (the same ones its reviewer reads
at runtime); ci-evals only reads them to learn, for every criterion id a
scorecard may name, its kind and the file (and hash) that defines it. A rubric
file defines the criterion named by its file stem, or the ones its front
matter's `criteria:` lists; its kind is its `type:`, else the nearest folder on
its path named `checklist` or `analytic` (neither: unknown, and a scorecard
naming it is an error).

Rubric paths are relative to the plugin folder; `suite:PATH` is relative to the
suite's folder instead, for rubrics kept outside a plugin you do not own (the
reviewer gets a read-only copy of them, see `review`). Ids are compared
normalised (case, and `_` or spaces vs `-`); two rubric files defining the same
normalised id is an error. The convention: docs/grading.md (*Rubrics: where a
criterion's kind comes from*).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from ci_evals.config.front_matter import read_front_matter
from ci_evals.errors import UserError
from ci_evals.fs.copyable import host_state_problem
from ci_evals.fs.walk import files_ending
from ci_evals.results import normalize_id

Kind = Literal["checklist", "analytic"]
KINDS: tuple[Kind, ...] = ("checklist", "analytic")
Origin = Literal["plugin", "suite"]
SUITE_PREFIX = "suite:"


class RubricError(UserError):
    """A rubric file the reviewer relies on is malformed or ambiguous."""


@dataclass(frozen=True)
class Rubric:
    """One criterion id and the rubric file that defines it."""

    id: str
    kind: Kind | None  # None: unknown, and a scorecard naming it is an error
    path: Path
    sha256: str
    origin: Origin = "plugin"  # the folder its path is relative to in the config


class RubricSet(Mapping[str, Rubric]):
    """Normalised criterion id -> `Rubric`, with the files they came from."""

    def __init__(self, rubrics: Iterable[Rubric] = ()) -> None:
        self._by_id: dict[str, Rubric] = {}
        for rubric in rubrics:
            key = normalize_id(rubric.id)
            other = self._by_id.get(key)
            if other is not None:
                raise RubricError(
                    f"criterion {rubric.id!r} is defined twice: also in {other.path}",
                    file=str(rubric.path),
                    hint="give rubric files unique names across the reviewer's rubric folders",
                )
            self._by_id[key] = rubric

    def __getitem__(self, name: str) -> Rubric:
        return self._by_id[normalize_id(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def files(self) -> list[Rubric]:
        """One entry per distinct file (for recording hashes), sorted by path."""
        seen: dict[Path, Rubric] = {}
        for rubric in self._by_id.values():
            seen.setdefault(rubric.path, rubric)
        return [seen[path] for path in sorted(seen)]


def discover(root: Path, patterns: Iterable[str], suite_dir: Path | None = None) -> RubricSet:
    """The rubrics matching `patterns` (folders or globs): relative to `root` (the
    plugin folder), or with `suite:` relative to `suite_dir` (the suite's folder).

    Patterns are matched with `Path.glob` (`**` recurses); a matched folder
    means every `*.md` below it. A pattern matching no markdown file is an error: a
    reviewer graded against no rubric would have nothing to hold it to.
    """
    found: list[Rubric] = []
    seen: set[Path] = set()
    for pattern in patterns:
        origin: Origin = "suite" if pattern.startswith(SUITE_PREFIX) else "plugin"
        base = root if origin == "plugin" else suite_dir
        relative = pattern.removeprefix(SUITE_PREFIX)
        if base is None:
            raise RubricError(f"rubric pattern {pattern!r}: no suite folder to look in")
        matches = sorted(_expand(base, relative, origin))
        if not matches:
            raise RubricError(
                f"rubric pattern {pattern!r} matches no markdown file",
                file=str(base),
                hint="rubric paths are relative to the plugin folder; "
                "suite:PATH to the suite's folder",
            )
        for path in matches:
            if path not in seen:
                seen.add(path)
                found.extend(replace(rubric, origin=origin) for rubric in read_rubric(path, base))
    return RubricSet(found)


def suite_files(rubrics: RubricSet) -> list[Path]:
    """The files of the rubrics that come from the suite's folder (`suite:`)."""
    return [rubric.path for rubric in rubrics.files() if rubric.origin == "suite"]


def _expand(root: Path, pattern: str, origin: Origin) -> Iterator[Path]:
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise RubricError(
            f"rubric pattern {pattern!r} must be relative and stay inside the {origin} folder",
            file=str(root),
        )
    for match in root.glob(pattern):
        # A folder (named or globbed) stands for every markdown file below it.
        candidates = files_ending(match, ".md") if match.is_dir() else (match,)
        for path in candidates:
            if path.is_file() and path.suffix == ".md":
                problem = host_state_problem(os.path.realpath(path))
                if problem is not None:  # read at load, copied to the reviewer: refused
                    raise RubricError(f"rubric {path} {problem}")
                yield path


def read_rubric(path: Path, root: Path | None = None) -> list[Rubric]:
    """The criteria one rubric file defines (see the module docstring).

    Only folders below `root` (when given) count for the kind, so a checkout
    living under some `/srv/checklist/` does not make every rubric a checklist.
    """
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    meta = _frontmatter(path, data.decode("utf-8", "replace"))
    parent = path.parent
    if root is not None and parent.is_relative_to(root):
        folders = parent.relative_to(root).parts
    else:
        folders = parent.parts
    file_kind = _kind_of(path, meta.get("type"), folders)
    listed = meta.get("criteria")
    if listed is None:
        return [Rubric(id=path.stem, kind=file_kind, path=path, sha256=digest)]
    if not isinstance(listed, list) or not listed:
        raise RubricError("frontmatter 'criteria' must be a non-empty list", file=str(path))
    rubrics = []
    for item in listed:
        if isinstance(item, str) and item.strip():
            rubrics.append(Rubric(id=item.strip(), kind=file_kind, path=path, sha256=digest))
        elif isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"].strip():
            unknown = set(item) - {"id", "type"}
            if unknown:
                raise RubricError(
                    f"criterion {item['id']!r}: unknown key {sorted(unknown)[0]!r}",
                    file=str(path),
                    hint="a listed criterion is a string or {id, type}",
                )
            kind = _kind_of(path, item.get("type"), ()) or file_kind
            rubrics.append(Rubric(id=item["id"].strip(), kind=kind, path=path, sha256=digest))
        else:
            raise RubricError(
                f"frontmatter 'criteria' item {item!r} is not an id or {{id, type}}",
                file=str(path),
            )
    return rubrics


def _frontmatter(path: Path, text: str) -> dict[str, Any]:
    found = read_front_matter(text)
    if found.problem is not None:
        raise RubricError(found.problem, file=str(path), line=found.problem_line)
    return found.fields


def _kind_of(path: Path, declared: object, folders: tuple[str, ...]) -> Kind | None:
    """An explicit `type:` wins; else the nearest `checklist`/`analytic` folder."""
    if declared is not None:
        if declared not in KINDS:
            raise RubricError(
                f"type must be 'checklist' or 'analytic', got {declared!r}", file=str(path)
            )
        return declared
    for part in reversed(folders):
        if part in KINDS:
            return part
    return None
