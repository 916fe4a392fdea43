"""A change that touches only graders: re-grade the base's saved run, run no agent.

The agent under test reads the plugin, the fixtures and the suite's prompts;
the graders read the rubrics, the reviewer's agent file and the suite's
grading keys. When every changed path a stage reads is a grader's, the
agent's behaviour cannot have changed, and re-grading the base branch's saved
run (`ci-evals grade` on the baseline artifact) answers the question for the
cost of the reviewer calls alone. What counts as a grader file is read from the
suite at HEAD (a file that stops being a grader there is the agent's); a rubric
is never one Claude Code loads for the agent (`_loaded`), a reviewer's agent file
counts only while its front matter is unchanged.

Fail closed, and the answer is "run": any other relevant path, a suite or file
that cannot be read or parsed, no merge base, or a grader file that a file the
agent reads names (`git grep -F` over the plugin at HEAD and the stages'
prompts). Each rule: docs/compute-stage.md.

Hot path (compute-stage): PyYAML and git only.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals import git
from ci_evals.selection.decide import Selection, quote_path
from ci_evals.selection.suite_change import suite_paths

if TYPE_CHECKING:
    from ci_evals.selection.stage_map import StageMap

# The grading keys (docs/grading.md): what only graders read of the suite.
STAGE_GRADER_KEYS = ("reviewer", "checks", "graders", "scoring")
SUITE_GRADER_KEYS = ("scoring", "pass_at_least")
SUITE_PREFIX = "suite:"


@dataclass(frozen=True)
class GraderFiles:
    """What the suite at one commit says the graders read."""

    agents: frozenset[str]  # repo-relative reviewer agent files
    rubric_folders: frozenset[str]  # repo-relative rubric folders (or files)
    prompts: tuple[str, ...]  # the stages' own prompts: what the agent is asked
    rest: Any  # the suite less its grading keys, to compare


@dataclass(frozen=True)
class Verdict:
    """`reason`: why a re-grade suffices ("" when the change must run)."""

    regrade: bool
    reason: str


def _run(why: str) -> Verdict:
    return Verdict(False, why)


def decide(repo: Path, chosen: Selection, stage_map: StageMap) -> Verdict:
    """Whether `chosen`'s change touches only graders (see the module doc)."""
    if chosen.from_stage is None or chosen.head is None or not chosen.merge_bases:
        return _run(f"nothing to run, or the change is not known exactly ({chosen.reason})")
    suites = sorted(suite_paths(stage_map.global_paths))
    if len(suites) != 1:
        return _run("the stage map names no single suite file among its globals")
    sides = _sides(repo, chosen, suites[0], stage_map.root)
    if isinstance(sides, str):
        return _run(sides)
    changed = _changed_graders(repo, chosen, suites[0], sides, stage_map.root)
    if isinstance(changed, str):
        return _run(changed)
    named = _named_elsewhere(repo, chosen.head, stage_map.root, changed, sides)
    if named:
        return _run(named)
    shown = ", ".join(quote_path(p) for p in changed[:3])
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return Verdict(True, f"only graders changed: {shown}{more}")


def _sides(repo: Path, chosen: Selection, suite: str, root: str) -> list[GraderFiles] | str:
    """The suite's graders at each merge base and at HEAD (last); a string: why the
    change runs."""
    assert chosen.head is not None
    # HEAD's suite first: most changes touch a file no grader reads, and stop there
    # (compute-stage is a hot path: one `git cat-file` more, not one per merge base).
    head = _grader_files(repo, chosen.head, suite, root)
    if isinstance(head, str):
        return head
    for match in chosen.matches:
        if match.stage is not None and not _is_grader(match.path, suite, head):
            return f"{quote_path(match.path)} is read by the agent, not only by graders"
    sides: list[GraderFiles] = []
    for commit in chosen.merge_bases:
        read = _grader_files(repo, commit, suite, root)
        if isinstance(read, str):
            return read
        sides.append(read)
    return [*sides, head]


def _changed_graders(
    repo: Path, chosen: Selection, suite: str, sides: Sequence[GraderFiles], root: str
) -> list[str] | str:
    """Every relevant changed path, each a grader's; a string: why one is not."""
    changed: list[str] = []
    for match in chosen.matches:
        path = match.path
        if match.stage is None:
            continue  # no stage reads it
        if path == suite:
            if any(s.rest != sides[-1].rest for s in sides):
                return f"{quote_path(suite)} changed more than its grading keys"
        elif not all(_is_grader(path, suite, side) for side in sides) or _loaded(path, root, sides):
            # A grader's on every side: one the change itself made a rubric was the
            # agent's at the base.
            return f"{quote_path(path)} is read by the agent, not only by graders"
        elif path in sides[-1].agents:
            why = _front_matter_changed(repo, chosen, path)
            if why:
                return why
        changed.append(path)
    return changed or "no grader changed"


def with_regrade(repo: Path, chosen: Selection, stage_map: StageMap) -> Selection:
    """`chosen` with `regrade` set when only graders changed (else as it was)."""
    verdict = decide(repo, chosen, stage_map)
    return replace(chosen, regrade=verdict.reason if verdict.regrade else None)


def _is_grader(path: str, suite: str, side: GraderFiles) -> bool:
    """`path` is the suite, or a file its graders read (at that side)."""
    return (
        path == suite
        or path in side.agents
        or any(_under(path, folder) for folder in side.rubric_folders)
    )


# What Claude Code loads of a plugin by itself (docs/suite.md): under a rubric folder
# too, the agent under test reads it. A reviewer's own agent file is judged apart.
LOADED_FOLDERS = ("commands", "agents", "hooks", ".claude-plugin")
LOADED_FILES = (".mcp.json",)
SKILL_FILE = "SKILL.md"


def _loaded(path: str, root: str, sides: Sequence[GraderFiles]) -> bool:
    """`path` is a plugin file Claude Code loads for the agent (a command, an agent
    other than a reviewer, a hook, the manifest, a skill's SKILL.md)."""
    if any(path in side.agents for side in sides) or not (not root or _under(path, root)):
        return False
    inside = posixpath.relpath(path, root) if root else path
    return (
        inside.split("/", 1)[0] in LOADED_FOLDERS
        or inside in LOADED_FILES
        or posixpath.basename(inside) == SKILL_FILE
    )


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _grader_files(repo: Path, commit: str, suite: str, root: str) -> GraderFiles | str:
    """The suite at `commit`, read for its graders; a string: why it cannot be."""
    import yaml  # noqa: PLC0415 - only when a change is weighed for a re-grade

    data = git.blob_at(repo, commit, suite)
    if data is None:
        return f"{quote_path(suite)} is missing at {commit[:12]}"
    try:
        parsed = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        return f"{quote_path(suite)} does not parse at {commit[:12]}"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("stages", []), list):
        return f"{quote_path(suite)} is not a suite of stages at {commit[:12]}"
    folder = posixpath.dirname(suite)
    agents: set[str] = set()
    rubrics: set[str] = set()
    prompts: list[str] = []
    stages: list[Any] = []
    for stage in parsed.get("stages") or []:
        if not isinstance(stage, dict):
            return f"{quote_path(suite)}: a stage is not a mapping at {commit[:12]}"
        prompts.append(str(stage.get("prompt", "")))
        reviewer = stage.get("reviewer")
        if isinstance(reviewer, dict):
            if isinstance(reviewer.get("agent"), str):
                agents.add(posixpath.normpath(posixpath.join(root, reviewer["agent"])))
            for rubric in reviewer.get("rubrics") or []:
                if not isinstance(rubric, str):
                    return f"{quote_path(suite)}: a rubric is not a path at {commit[:12]}"
                rubrics.add(_rubric_path(rubric, folder, root))
        stages.append({k: v for k, v in stage.items() if k not in STAGE_GRADER_KEYS})
    rest = {k: v for k, v in parsed.items() if k not in SUITE_GRADER_KEYS}
    rest["stages"] = stages
    return GraderFiles(frozenset(agents), frozenset(rubrics), tuple(prompts), rest)


def _rubric_path(rubric: str, suite_folder: str, root: str) -> str:
    """A reviewer's rubric, repo-relative: `suite:X` beside the suite, else in the plugin."""
    if rubric.startswith(SUITE_PREFIX):
        return posixpath.normpath(posixpath.join(suite_folder, rubric[len(SUITE_PREFIX) :]))
    return posixpath.normpath(posixpath.join(root, rubric))


def _front_matter(data: bytes | None) -> bytes | None:
    """The `---` front matter of a Markdown file (None: the file is missing)."""
    if data is None:
        return None
    if not data.startswith(b"---"):
        return b""
    end = data.find(b"\n---", 3)
    return data if end < 0 else data[: end + 4]


def _agent_name(data: bytes | None) -> str | None:
    """The `name:` of an agent file's front matter (None: none there)."""
    front = _front_matter(data) or b""
    found = re.search(rb"^name:[ \t]*['\"]?([^'\"\r\n]+?)['\"]?[ \t]*\r?$", front, re.MULTILINE)
    return found.group(1).decode(errors="replace") if found else None


def _front_matter_changed(repo: Path, chosen: Selection, path: str) -> str:
    assert chosen.head is not None
    head = _front_matter(git.blob_at(repo, chosen.head, path))
    for base in chosen.merge_bases:
        before = _front_matter(git.blob_at(repo, base, path))
        if before is None or head is None:
            return f"the reviewer agent {quote_path(path)} was added or removed"
        if before != head:
            return (
                f"the front matter of the reviewer agent {quote_path(path)} changed: the agent "
                "under test sees every plugin agent's name and description"
            )
    return ""


# A path component as a glob writes it (`*`, `*-chapter`, `[a-z]*`): a file that names
# a rubric folder through a glob (`references/evaluation/*/plan-lab/`) names it too.
_GLOB_ERE = "[^/[:space:]]*[][*?][^/[:space:]]*"
_GLOB_RE = r"[^/\s]*[\]\[*?][^/\s]*"
_ERE_SPECIAL = frozenset(".[]()*+?{}|^$\\")


@dataclass(frozen=True)
class Needle:
    """What a file the agent reads would write to reach a changed grader: `ere` for
    `git grep -E`, `regex` (the same) for the stages' prompts."""

    label: str
    ere: str
    regex: str


def _literal(text: str) -> Needle:
    ere = "".join("\\" + c if c in _ERE_SPECIAL else c for c in text)
    return Needle(text, ere, re.escape(text))


def _folder_needle(folder: str) -> Needle:
    """A rubric folder (plugin-relative) as a file may name it: it or any folder
    above it from two levels deep (`read everything in references/evaluation/`,
    the start of the folder's own path), its second component written out or as a
    glob (`references/*/plan-lab/`)."""
    parts = folder.split("/")
    if len(parts) == 1:
        return _literal(folder)
    first, second = _literal(parts[0]), _literal(parts[1])
    return Needle(
        "/".join(parts[:2]),
        f"{first.ere}/({second.ere}|{_GLOB_ERE})",
        f"{first.regex}/(?:{second.regex}|{_GLOB_RE})",
    )


def _needles(changed: Sequence[str], root: str, sides: Sequence[GraderFiles]) -> list[Needle]:
    """What a file the agent reads would name to reach a changed grader: a reviewer
    agent's name (its file's stem), a rubric folder as the plugin names it."""
    needles: dict[str, Needle] = {}
    for path in changed:
        for side in sides:
            if path in side.agents:
                stem = posixpath.splitext(posixpath.basename(path))[0]
                if stem:
                    needles.setdefault(stem, _literal(stem))
            for folder in side.rubric_folders:
                if _under(path, folder):
                    inside = posixpath.relpath(folder, root) if root else folder
                    if inside.startswith(".."):  # beside the suite: named as the repo does
                        needles.setdefault(folder, _literal(folder))
                    elif inside != ".":
                        needle = _folder_needle(inside)
                        needles.setdefault(needle.ere, needle)
    return [needles[key] for key in sorted(needles)]


def _named_elsewhere(
    repo: Path, head: str, root: str, changed: Sequence[str], sides: Sequence[GraderFiles]
) -> str:
    """Why a changed grader may be read by the agent: a file it reads, or a stage's
    prompt, names it ("" when none does)."""
    grader_paths = set().union(*(s.agents for s in sides))
    folders = set().union(*(s.rubric_folders for s in sides))
    # Claude Code calls an agent by its front matter's `name:`, which may not be its stem.
    named = (_agent_name(git.blob_at(repo, head, p)) for p in changed if p in grader_paths)
    needles = _needles(changed, root, sides)
    names = {name for name in named if name} - {n.label for n in needles}
    needles += [_literal(name) for name in sorted(names)]
    for needle in needles:
        for prompt in sides[-1].prompts:
            if re.search(needle.regex, prompt):
                return f"a stage's prompt names {needle.label!r}: the agent is asked to read it"
        args = ["grep", "-l", "-z", "-I", "-E", "-e", needle.ere, head, "--"]
        found = git.run(repo, *args, root or ".", check=False)
        if found.returncode not in (0, 1):
            return f"cannot search the plugin for {needle.label!r}: {found.stderr.strip()}"
        for hit in git.split_z(found.stdout):
            path = hit.split(":", 1)[1] if hit.startswith(head + ":") else hit
            if path in grader_paths or any(_under(path, f) for f in folders):
                continue
            return (
                f"{quote_path(path)} names {needle.label!r}: the agent under test may read "
                "the grader, so it is not only a grader's"
            )
    return ""
