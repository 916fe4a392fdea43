"""Deterministic checks: facts about the files a stage left, and what it called.

No model is involved. Each check becomes one checklist criterion (source
`check`), so a report shows checks and reviewer scores side by side. The
shapes in `ci-evals.yaml` (one key names the kind, see docs/grading.md):

```yaml
checks:
  - { files: "lab/chapters/*.md", min: 3 }                  # count / min / max
  - { headings: "lab/content/*.md", require: ["## Steps", "Check your work"] }
  - { json_schema: "lab/plan.json", schema: "plugin:templates/plan.schema.json" }
  - { equals_length: "lab/plan.json", field: chapter_count, array: chapters }
  - { trajectory: { subagent: "labsmith:lab-planner" } }    # or tool: / skill:, used: false
  - { trajectory: { hook: SessionStart } }                  # a hook on that event ran, exit 0
```

Paths are globs relative to the folder being graded (the stage's workspace).
A file that resolves outside that folder (a link the agent made to somewhere
else) is never read: the check fails.

Loading (`load_checks`) is cheap and gives file:line errors; running
(`run_checks`) imports jsonschema and pydantic only when called.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import yaml

from ci_evals.config.front_matter import read_front_matter
from ci_evals.fs.copyable import named_problem
from ci_evals.fs.links import Unreadable, read_inside
from ci_evals.grading.kinds.trajectory import (
    Trajectory,
    What,
    count_calls,
    hook_runs,
    read_trajectory,
)
from ci_evals.text import one_line

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import GradeContext, LoadContext
    from ci_evals.results.criteria import GraderResult

# Cap what a check reads: a 2 GB "JSON" file written by a runaway agent must
# not take the grader down with it.
MAX_READ_BYTES = 16 * 1024 * 1024


# -- the checks as data --------------------------------------------------------


@dataclass(frozen=True)
class FilesExist:
    id: str
    globs: tuple[str, ...]
    count: int | None = None
    min: int | None = None
    max: int | None = None


@dataclass(frozen=True)
class HasHeadings:
    id: str
    globs: tuple[str, ...]
    # "## Steps" needs a level-2 heading "Steps"; "Steps" accepts any level.
    require: tuple[str, ...]


@dataclass(frozen=True)
class FrontMatter:
    id: str
    globs: tuple[str, ...]
    require: tuple[str, ...]  # keys of the YAML front matter (`---` block at the top)


@dataclass(frozen=True)
class JsonSchema:
    id: str
    globs: tuple[str, ...]
    schema: Mapping[str, Any] = field(hash=False)
    schema_source: str = "inline"  # the schema's file, for messages and results


@dataclass(frozen=True)
class EqualsLength:
    id: str
    file: str
    field: str  # dotted path to an integer: "chapter_count", "meta.count"
    array: str  # dotted path to a list: "chapters", "plan.chapters"


@dataclass(frozen=True)
class TrajectoryUse:
    id: str
    what: What
    name: str  # "Bash"; "research-product"; "labsmith:lab-planner" or "lab-planner"
    used: bool = True


Check = FilesExist | HasHeadings | FrontMatter | JsonSchema | EqualsLength | TrajectoryUse

KINDS = ("files", "headings", "front_matter", "json_schema", "equals_length", "trajectory")
_COMMON = ("id",)
_KEYS = {
    "files": ("files", "count", "min", "max"),
    "headings": ("headings", "require"),
    "front_matter": ("front_matter", "require"),
    "json_schema": ("json_schema", "schema"),
    "equals_length": ("equals_length", "field", "array"),
    "trajectory": ("trajectory",),
}


# -- the grader kind ------------------------------------------------------------


@dataclass(frozen=True)
class ChecksGrader:
    """A stage's `checks:`, graded together as one `GraderResult` ("checks")."""

    checks: tuple[Check, ...]
    name: str = "checks"
    writes: bool = False
    sandboxed: bool = False  # reads files in this process; runs nothing
    scoring: None = None  # no defaults of its own for its criteria

    def grade(self, ctx: GradeContext) -> GraderResult:
        return run_checks(self.checks, ctx.folder, ctx.trajectory, grader=self.name)

    def files_only(self) -> ChecksGrader:
        """Without the trajectory checks (a fixture has no trajectory)."""
        return replace(
            self, checks=tuple(c for c in self.checks if not isinstance(c, TrajectoryUse))
        )


class _ChecksKind:
    name = "checks"

    def available(self) -> str | None:
        return None  # it reads files in this process

    def load(self, value: LocatedNode, ctx: LoadContext) -> tuple[ChecksGrader, ...]:
        return (
            ChecksGrader(
                load_checks(
                    value, suite_dir=ctx.suite_dir, plugin_dir=ctx.plugin_dir, within=ctx.within
                )
            ),
        )


KIND = _ChecksKind()


# -- loading -------------------------------------------------------------------


def load_checks(
    field: LocatedNode, *, suite_dir: Path, plugin_dir: Path, within: Path
) -> tuple[Check, ...]:
    """A stage's `checks:` list. Schema files are read now, so a typo fails at load.

    A schema path is relative to the suite file's folder, or to the plugin
    folder when written `plugin:PATH`.
    """
    checks: list[Check] = []
    seen: dict[str, LocatedNode] = {}
    for item in field.sequence():
        check = _load_one(item, _Where(suite_dir, plugin_dir, within))
        if check.id in seen:
            raise item.error(
                f"duplicate check id {check.id!r} (also line {seen[check.id].line})",
                hint="give one of them an explicit 'id:'",
            )
        seen[check.id] = item
        checks.append(check)
    return tuple(checks)


def _load_one(item: LocatedNode, where: _Where) -> Check:
    raw = item.mapping([*_COMMON, *{k for keys in _KEYS.values() for k in keys}], what="check")
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        raise item.error(
            "a check names exactly one kind" + (f", got {', '.join(kinds)}" if kinds else ""),
            hint="one of: " + ", ".join(KINDS),
        )
    kind = kinds[0]
    extra = [k for k in raw if k not in _COMMON and k not in _KEYS[kind]]
    if extra:
        raise raw[extra[0]].error(
            f"{extra[0]!r} does not apply to a {kind!r} check",
            hint="keys for it: " + ", ".join(_KEYS[kind][1:] or ("(none)",)),
        )
    explicit_id = raw["id"].as_str() if "id" in raw else None
    loader = _LOADERS[kind]
    return loader(item, raw, explicit_id, where)


def _load_files(
    item: LocatedNode, raw: dict[str, LocatedNode], explicit_id: str | None, *_: object
) -> FilesExist:
    globs = _globs(raw["files"])
    bounds = {k: raw[k].as_int(minimum=0) for k in ("count", "min", "max") if k in raw}
    if "count" in bounds and len(bounds) > 1:
        raise raw["count"].error("use either 'count' or 'min'/'max'")
    if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
        raise raw["max"].error(f"max {bounds['max']} is below min {bounds['min']}")
    if not bounds:
        bounds = {"min": 1}
    return FilesExist(
        id=explicit_id or f"files:{','.join(globs)}",
        globs=globs,
        count=bounds.get("count"),
        min=bounds.get("min"),
        max=bounds.get("max"),
    )


def _load_headings(
    item: LocatedNode, raw: dict[str, LocatedNode], explicit_id: str | None, *_: object
) -> HasHeadings:
    if "require" not in raw:
        raise item.error("missing required key 'require'")
    require = tuple(normalize_heading(h) for h in raw["require"].as_str_list(False))
    globs = _globs(raw["headings"])
    return HasHeadings(
        id=explicit_id or f"headings:{','.join(globs)}", globs=globs, require=require
    )


def _load_front_matter(
    item: LocatedNode, raw: dict[str, LocatedNode], explicit_id: str | None, *_: object
) -> FrontMatter:
    if "require" not in raw:
        raise item.error("missing required key 'require'")
    globs = _globs(raw["front_matter"])
    return FrontMatter(
        id=explicit_id or f"front_matter:{','.join(globs)}",
        globs=globs,
        require=tuple(raw["require"].as_str_list(False)),
    )


def _load_json_schema(
    item: LocatedNode, raw: dict[str, LocatedNode], explicit_id: str | None, where: _Where
) -> JsonSchema:
    if "schema" not in raw:
        raise item.error("missing required key 'schema'")
    schema, source = load_schema(raw["schema"], where.suite_dir, where.plugin_dir, where.within)
    globs = _globs(raw["json_schema"])
    return JsonSchema(
        id=explicit_id or f"json_schema:{','.join(globs)}",
        globs=globs,
        schema=schema,
        schema_source=source,
    )


def _load_equals_length(
    item: LocatedNode, raw: dict[str, LocatedNode], explicit_id: str | None, *_: object
) -> EqualsLength:
    for key in ("field", "array"):
        if key not in raw:
            raise item.error(f"missing required key {key!r}")
    path = _relative(raw["equals_length"])
    field_path = raw["field"].as_str()
    return EqualsLength(
        id=explicit_id or f"equals_length:{path}:{field_path}",
        file=path,
        field=field_path,
        array=raw["array"].as_str(),
    )


def _load_trajectory(
    item: LocatedNode, raw: dict[str, LocatedNode], explicit_id: str | None, *_: object
) -> TrajectoryUse:
    main = raw["trajectory"]
    kinds: tuple[What, ...] = ("tool", "skill", "subagent", "hook")
    spec = main.mapping((*kinds, "used"), what="trajectory check")
    named = [k for k in kinds if k in spec]
    if len(named) != 1:
        raise main.error("a trajectory check names exactly one of tool, skill, subagent, hook")
    used = spec["used"].as_bool() if "used" in spec else True
    name = spec[named[0]].as_str()
    default_id = f"trajectory:{named[0]}{'' if used else '-not'}-used:{name}"
    return TrajectoryUse(id=explicit_id or default_id, what=named[0], name=name, used=used)


_LOADERS: dict[str, Callable[..., Check]] = {
    "files": _load_files,
    "headings": _load_headings,
    "front_matter": _load_front_matter,
    "json_schema": _load_json_schema,
    "equals_length": _load_equals_length,
    "trajectory": _load_trajectory,
}


def globs_of(value: LocatedNode) -> tuple[str, ...]:
    """A path/glob or a list of them, each relative to the graded folder."""
    return _globs(value)


def _globs(value: LocatedNode) -> tuple[str, ...]:
    if value.is_null():
        raise value.error("expected a path or glob")
    if isinstance(value.node, yaml.SequenceNode):
        return tuple(_relative(item) for item in value.sequence(allow_empty=False))
    return (_relative(value),)


def _relative(value: LocatedNode) -> str:
    text = value.as_str()
    parts = Path(text).parts
    if Path(text).is_absolute() or ".." in parts:
        raise value.error(
            f"{text!r} must be relative to the workspace and stay inside it",
            hint="checks look only at the stage's own folder",
        )
    return text


class _Where(NamedTuple):
    """Where a check's files are (`LoadContext`'s fields, without importing it)."""

    suite_dir: Path
    plugin_dir: Path
    within: Path


def load_schema(
    value: LocatedNode, suite_dir: Path, plugin_dir: Path, within: Path
) -> tuple[Mapping[str, Any], str]:
    """A JSON Schema given inline, as a suite-relative file or as `plugin:PATH`; checked.

    A file lies in the repository (`within`), outside .git, as every path a
    suite names (`fs.copyable.named_problem`): a pull request writes the suite."""
    import jsonschema  # noqa: PLC0415 - ~130 ms; only suites with schema checks pay it

    if isinstance(value.node, yaml.MappingNode):
        schema: Any = value.plain()
        source = "inline"
        if not isinstance(schema, dict):
            raise value.error("an inline schema must be a mapping")
    else:
        text = value.as_str()
        base = plugin_dir if text.startswith("plugin:") else suite_dir
        name = text.removeprefix("plugin:")
        if (problem := named_problem(name, base, within)) is not None:
            raise value.error(f"schema {text} {problem}")
        path = base / name
        source = str(path)
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise value.error(
                f"schema file not found: {path}",
                hint="relative to the suite file; write plugin:PATH for the plugin folder",
            ) from None
        except (OSError, ValueError) as exc:
            raise value.error(f"cannot read schema {path}: {exc}") from None
        if not isinstance(schema, dict):
            raise value.error(f"schema {path} is not a JSON object")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise value.error(f"invalid JSON Schema: {exc.message}") from None
    return schema, source


# -- running -------------------------------------------------------------------


class Outcome(NamedTuple):
    """One check's result before it becomes a `Criterion` (no pydantic needed)."""

    id: str
    passed: bool
    detail: str


def check_outcomes(
    checks: Sequence[Check], folder: Path, trajectory: Path | None = None
) -> list[Outcome]:
    """Run every check on `folder` (and the stage's trajectory JSONL); one outcome each.

    A check never raises on what the agent wrote: a missing or malformed file
    is a failed outcome with the reason in its `detail`. Imports no pydantic:
    what the fixtures' contract check (a commit hook) runs.
    """
    folder = folder.resolve()
    uses: Trajectory | str | None = None  # read once, and only if a check needs it
    outcomes = []
    for check in checks:
        if isinstance(check, TrajectoryUse):
            if uses is None:
                uses = _read_trajectory(trajectory)
            outcomes.append(_trajectory(check, uses))
        else:
            outcomes.append(_RUNNERS[type(check)](check, folder))
    return outcomes


def run_checks(
    checks: Sequence[Check],
    folder: Path,
    trajectory: Path | None = None,
    *,
    grader: str = "checks",
) -> GraderResult:
    """`check_outcomes` as one `GraderResult` named `grader`: a checklist criterion each."""
    from ci_evals.results.criteria import Criterion, GraderResult  # noqa: PLC0415 - see module doc

    criteria = tuple(
        Criterion(
            id=outcome.id,
            kind="checklist",
            score=1.0 if outcome.passed else 0.0,
            passed=outcome.passed,
            source="check",
            detail=outcome.detail,
        )
        for outcome in check_outcomes(checks, folder, trajectory)
    )
    return GraderResult(grader=grader, criteria=criteria)


def _criterion(check_id: str, passed: bool, detail: str) -> Outcome:
    return Outcome(check_id, passed, detail)


def _matches(folder: Path, globs: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Files matching any glob (sorted, deduplicated), and the ones refused as outside.

    `folder` is resolved. A match is inside unless a link on its way leads out;
    links are looked for per folder (cached) and per file, which is ~4x
    cheaper than resolving every path on a 10,000-file workspace.
    """
    prefix = str(folder) + os.sep
    folder_ok: dict[str, bool] = {}

    def inside(path: str) -> bool:
        parent = os.path.dirname(path)
        ok = folder_ok.get(parent)
        if ok is None:
            real = os.path.realpath(parent)
            ok = folder_ok[parent] = real == str(folder) or real.startswith(prefix)
        if ok and os.path.islink(path):
            ok = os.path.realpath(path).startswith(prefix)
        return ok

    found: dict[Path, None] = {}
    outside: set[str] = set()
    for given in globs:
        # Before Python 3.13 a trailing `**` matches folders only.
        pattern = given + "/*" if given == "**" or given.endswith("/**") else given
        for path in folder.glob(pattern):
            text = str(path)
            if not os.path.isfile(text):
                continue
            if inside(text):
                found[path] = None
            else:
                outside.add(text.removeprefix(prefix))
    return sorted(found), sorted(outside)


def _outside_note(outside: Sequence[str]) -> str:
    """Files skipped as links out of the folder (e.g. the plugin folders linked into
    the workspace): named, capped, never read."""
    if not outside:
        return ""
    shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
    return f" (skipped, outside the folder: {shown})"


def _rel(folder: Path, path: Path) -> str:
    return str(path).removeprefix(str(folder) + os.sep)


def _parse_json(text: str) -> Any:
    """`json.loads`, with absurd nesting (which the agent controls) as a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _read_text(path: Path) -> str:
    """A matched file's text: `_matches` kept it only when its real path lies inside
    the folder, and that real path (no link in it) is what is opened, by descriptor
    from `/`, no link followed (`fs.links.read_inside`): nothing the agent linked is
    read on the host, nor a FIFO, a device or more than `MAX_READ_BYTES`."""
    real = os.path.realpath(path)
    try:
        data = read_inside(Path("/"), real.removeprefix("/"), MAX_READ_BYTES)
    except Unreadable as exc:
        raise ValueError(str(exc)) from None
    return data.decode("utf-8")


def _files_exist(check: FilesExist, folder: Path) -> Outcome:
    files, outside = _matches(folder, check.globs)
    n = len(files)
    if check.count is not None:
        want, ok = f"exactly {check.count}", n == check.count
    else:
        low = check.min if check.min is not None else 0
        high = check.max
        ok = n >= low and (high is None or n <= high)
        want = f"at least {low}" if high is None else f"{low} to {high}"
    shown = ", ".join(_rel(folder, f) for f in files[:5]) + (" ..." if n > 5 else "")
    detail = f"{n} file(s) match {', '.join(check.globs)}, expected {want}"
    if shown:
        detail += f": {shown}"
    return _criterion(check.id, ok, detail + _outside_note(outside))


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


# A heading path: "## Capabilities > ### Gripper" is a `### Gripper` inside the
# `## Capabilities` section.
PATH_SEPARATOR = " > "


def normalize_heading(text: str) -> str:
    """ "##  Steps " -> "## Steps"; a heading path has each of its parts normalised."""
    if PATH_SEPARATOR in text:
        return PATH_SEPARATOR.join(normalize_heading(part) for part in text.split(PATH_SEPARATOR))
    match = _ATX.match(text.strip())
    if match:
        return f"{match.group(1)} {one_line(match.group(2) or '')}"
    return one_line(text)


def _heading_matches(present: str, want: str) -> bool:
    """`present` ("## Steps") is `want` ("## Steps", or "Steps" at any level)."""
    if want.startswith("#"):
        return present == want
    return present.split(" ", 1)[1] == want


def _has_heading(present: Sequence[str], want: str) -> bool:
    """`want` (a heading or a heading path) is among the file's headings `present`."""
    parts = want.split(PATH_SEPARATOR)
    stack: list[str] = []  # the headings enclosing the current one, outermost first
    for heading in present:
        level = len(heading) - len(heading.lstrip("#"))
        while stack and len(stack[-1]) - len(stack[-1].lstrip("#")) >= level:
            stack.pop()
        if _heading_matches(heading, parts[-1]) and _within(stack, parts[:-1]):
            return True
        stack.append(heading)
    return False


def _within(enclosing: Sequence[str], parts: Sequence[str]) -> bool:
    """`parts` appear in `enclosing` in order (each one inside the one before)."""
    found = iter(enclosing)
    return all(any(_heading_matches(h, part) for h in found) for part in parts)


def headings_of(markdown: str) -> list[str]:
    """ATX headings as "## Text" (whitespace collapsed), skipping fenced code blocks."""
    found = []
    fence: str | None = None
    for line in markdown.splitlines():
        marker = _FENCE.match(line)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * 3
            elif marker.group(1).startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        match = _ATX.match(line)
        if match:
            found.append(f"{match.group(1)} {one_line(match.group(2) or '')}")
    return found


def _each_file(
    check_id: str,
    globs: Sequence[str],
    folder: Path,
    problem: Callable[[Path, str], str | None],
    passed: str,
) -> Outcome:
    """A check of every file matching `globs` (at least one): `problem(path, name)`
    says what is wrong with one (None: nothing); `passed` is the detail when all pass."""
    files, outside = _matches(folder, globs)
    if not files:
        note = _outside_note(outside)
        return _criterion(check_id, False, f"no file matches {', '.join(globs)}{note}")
    problems = [p for p in (problem(path, _rel(folder, path)) for path in files) if p]
    if problems:
        return _criterion(check_id, False, "; ".join(problems) + _outside_note(outside))
    return _criterion(check_id, True, f"{len(files)} file(s) {passed}" + _outside_note(outside))


def _has_headings(check: HasHeadings, folder: Path) -> Outcome:
    def problem(path: Path, name: str) -> str | None:
        try:
            present = headings_of(_read_text(path))
        except (OSError, ValueError) as exc:
            return f"{name}: cannot read ({exc})"
        missing = [want for want in check.require if not _has_heading(present, want)]
        return f"{name}: missing {', '.join(map(repr, missing))}" if missing else None

    return _each_file(check.id, check.globs, folder, problem, f"have all {len(check.require)}")


def _front_matter(check: FrontMatter, folder: Path) -> Outcome:
    def problem(path: Path, name: str) -> str | None:
        try:
            found = read_front_matter(_read_text(path))
        except (OSError, ValueError) as exc:
            return f"{name}: cannot read its front matter ({one_line(str(exc), 200)})"
        if not found.present:
            return f"{name}: no front matter (a leading '---' YAML block)"
        if found.problem is not None:
            return f"{found.where(name)}: {found.problem}"
        missing = [key for key in check.require if key not in found.fields]
        return f"{name}: front matter lacks {', '.join(map(repr, missing))}" if missing else None

    passed = f"have all {len(check.require)} front-matter field(s)"
    return _each_file(check.id, check.globs, folder, problem, passed)


def _json_schema(check: JsonSchema, folder: Path) -> Outcome:
    import jsonschema  # noqa: PLC0415 - see load_schema

    files, outside = _matches(folder, check.globs)
    if not files:
        note = _outside_note(outside)
        return _criterion(check.id, False, f"no file matches {', '.join(check.globs)}{note}")
    validator = jsonschema.validators.validator_for(check.schema)(check.schema)
    problems = []
    for path in files:
        name = _rel(folder, path)
        try:
            document = _parse_json(_read_text(path))
        except (OSError, ValueError) as exc:
            problems.append(f"{name}: not valid JSON ({one_line(str(exc))})")
            continue
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        except RecursionError:
            problems.append(f"{name}: nested too deeply to validate")
            continue
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            problems.append(f"{name}: at {where}: {one_line(error.message, 200)}")
    if problems:
        return _criterion(check.id, False, "; ".join(problems) + _outside_note(outside))
    detail = f"{len(files)} file(s) valid against {check.schema_source}"
    return _criterion(check.id, True, detail + _outside_note(outside))


_MISSING = object()


def dotted(document: Any, path: str) -> Any:
    """`document` at a dotted path (`a.b.0.c`; digits index lists); `_MISSING` if absent."""
    value = document
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _equals_length(check: EqualsLength, folder: Path) -> Outcome:
    files, outside = _matches(folder, (check.file,))
    if len(files) != 1:
        found = "no file" if not files else f"{len(files)} files"
        return _criterion(check.id, False, f"{found} match {check.file}{_outside_note(outside)}")
    try:
        document = _parse_json(_read_text(files[0]))
    except (OSError, ValueError) as exc:
        return _criterion(check.id, False, f"{check.file}: not valid JSON ({exc})")
    count = dotted(document, check.field)
    array = dotted(document, check.array)
    problem = None
    if count is _MISSING or array is _MISSING:
        problem = f"no field {check.field if count is _MISSING else check.array!r}"
    elif isinstance(count, bool) or not isinstance(count, int):
        problem = f"{check.field} is {json.dumps(count)}, not an integer"
    elif not isinstance(array, list):
        problem = f"{check.array} is not an array"
    if problem is not None:
        return _criterion(check.id, False, f"{check.file}: {problem}")
    relation = "==" if count == len(array) else "!="
    detail = f"{check.file}: {check.field} {count} {relation} len({check.array}) {len(array)}"
    return _criterion(check.id, count == len(array), detail)


_RUNNERS: dict[type, Any] = {
    FilesExist: _files_exist,
    HasHeadings: _has_headings,
    FrontMatter: _front_matter,
    JsonSchema: _json_schema,
    EqualsLength: _equals_length,
}


# -- trajectory --------------------------------------------------------------


def _read_trajectory(path: Path | None) -> Trajectory | str:
    """The tool calls and hook runs, or why they cannot be known (which fails
    every trajectory check)."""
    if path is None:
        return "no trajectory was recorded for this stage"
    try:
        return read_trajectory(path)
    except FileNotFoundError:
        return f"trajectory file not found: {path}"
    except (OSError, ValueError) as exc:
        return f"trajectory {path.name} unreadable: {exc}"


def _trajectory(check: TrajectoryUse, found: Trajectory | str) -> Outcome:
    label = f"{check.what} {check.name!r}"
    if isinstance(found, str):
        return _criterion(check.id, False, found)
    if check.what == "hook":
        return _hook(check, found)
    count = count_calls(found.uses, check.what, check.name)
    if check.used:
        detail = f"{label} called {count} time(s)" if count else f"{label} was never called"
        return _criterion(check.id, count > 0, detail)
    detail = f"{label} called {count} time(s), expected never" if count else f"{label} not called"
    return _criterion(check.id, count == 0, detail)


def _hook(check: TrajectoryUse, found: Trajectory) -> Outcome:
    """A hook fired: it ran to its end and succeeded (a failed hook says why)."""
    runs = hook_runs(found.hooks, check.name)
    ok = [run for run in runs if run.ok]
    label = f"hook {check.name!r}"
    if not check.used:
        detail = (
            f"{label} ran {len(runs)} time(s), expected never" if runs else f"{label} did not run"
        )
        return _criterion(check.id, not runs, detail)
    if ok:
        return _criterion(check.id, True, f"{label} ran {len(ok)} time(s)")
    if not runs:
        return _criterion(check.id, False, f"{label} never ran")
    last = runs[-1]
    code = "" if last.exit_code is None else f", exit {last.exit_code}"
    said = f": {last.said}" if last.said else ""
    return _criterion(
        check.id,
        False,
        f"{label} ({last.name}) ran {len(runs)} time(s), never succeeded "
        f"({last.outcome or 'no outcome'}{code}){said}",
    )
