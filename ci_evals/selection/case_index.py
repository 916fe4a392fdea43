"""The cases of an eval folder as `compute-stage` needs them: folder, name, tags.

A light reading of what `ci_evals.suite.plugin_evals` reads in full (that
module, with the graders, is too heavy for the hook path): a folder holding
`case.yaml` or `prompt.md` is a case and is not descended into; `.git`,
`node_modules`, `.claude`, `results` and `mocks` are skipped; nothing deeper
than 16 folders. The name is prompt.md's front matter `name`, else
case.yaml's, else the folder's; the tags likewise. Links are not followed: a
case folder is what git lists. Whatever cannot be read is a `problem`, and
the caller then selects every case (`selection.units`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

CASE_FILE = "case.yaml"
PROMPT_FILE = "prompt.md"
# As `plugin_evals.SKIPPED` and `MAX_DEPTH` (the CLI's discovery rules).
_SKIPPED = frozenset({".git", "node_modules", ".claude", "results", "mocks"})
# A prompt.md without front matter (most) needs no YAML: the hook path stays light.
_OPENS_BLOCK = re.compile(r"\ufeff?---\s*\n")
_MAX_DEPTH = 16
_MAX_BYTES = 1 << 20
_UNIT_ID = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class CaseInfo:
    folder: str  # repo-relative POSIX path of the case's folder
    name: str
    tags: tuple[str, ...]

    @property
    def unit_id(self) -> str:
        """Its unit's id in a run (`plugin_evals.Case.unit_id`)."""
        return _UNIT_ID.sub("-", self.name).strip("-.") or "case"


@dataclass(frozen=True)
class CaseIndex:
    evals: str  # repo-relative eval folder
    cases: tuple[CaseInfo, ...]  # in sorted folder order
    problem: str | None = None  # why a case could not be read (then: every case)

    def case_at(self, path: str) -> CaseInfo | None:
        """The case whose folder holds repo-relative `path`, if any."""
        for case in self.cases:
            if path.startswith(case.folder + "/"):
                return case
        return None

    def under(self, folder: str) -> tuple[CaseInfo, ...]:
        """The cases inside `folder` (repo-relative), or the one it is."""
        prefix = folder + "/"
        return tuple(c for c in self.cases if c.folder == folder or c.folder.startswith(prefix))


def read_cases(repo_root: Path, evals: str) -> CaseIndex:
    """Every case under the eval folder `evals` (repo-relative) of the work tree."""
    found: list[CaseInfo] = []
    problems: list[str] = []
    top = repo_root / evals
    for folder, names, files in os.walk(top):
        relative = Path(folder).relative_to(repo_root).as_posix()
        depth = 0 if folder == str(top) else len(Path(folder).relative_to(top).parts)
        if CASE_FILE in files or PROMPT_FILE in files:
            names[:] = []
            found.append(_case(repo_root, relative, files, problems))
            continue
        names[:] = sorted(
            n
            for n in names
            if n not in _SKIPPED
            and n.lower() != ".git"
            and depth < _MAX_DEPTH
            and not os.path.islink(os.path.join(folder, n))
        )
    cases = tuple(sorted(found, key=lambda c: c.folder))
    return CaseIndex(evals, cases, problems[0] if problems else None)


def _case(repo_root: Path, folder: str, files: list[str], problems: list[str]) -> CaseInfo:
    keys: dict[str, object] = {}
    for file_name in (CASE_FILE, PROMPT_FILE):  # prompt.md's keys override case.yaml's
        if file_name not in files:
            continue
        path = f"{folder}/{file_name}"
        read = _keys(repo_root / path, file_name == PROMPT_FILE)
        if isinstance(read, str):
            problems.append(f"{path}: {read}")
        else:
            keys.update(read)
    name: object = keys.get("name", Path(folder).name)
    tags = keys.get("tags", [])
    if not isinstance(name, str) or not name:
        problems.append(f"{folder}: name is not a string")
        name = ""
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        problems.append(f"{folder}: tags is not a list of strings")
        tags = []
    return CaseInfo(folder, str(name) or Path(folder).name, tuple(tags))


def _keys(path: Path, prose: bool) -> dict[str, object] | str:
    """The file's top keys, or why they cannot be read."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return "not a regular file of at most 1 MiB"
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read ({exc})"
    if prose and not _OPENS_BLOCK.match(text):
        return {}
    import yaml  # noqa: PLC0415 - see `_OPENS_BLOCK`

    from ci_evals.config.front_matter import read_front_matter  # noqa: PLC0415

    if prose:
        found = read_front_matter(text)
        return found.problem or dict(found.fields)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return "not valid YAML"
    return data if isinstance(data, dict) else "not a mapping"
