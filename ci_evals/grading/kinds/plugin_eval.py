"""The `plugin_eval` kind: the graders of `claude plugin eval` cases, with the CLI's semantics.

A grader object is the CLI's (case.yaml schema 1.x, or a `graders/<name>.md`
front matter): `regex`, `tool_used`, `tool_order`, `file_exists`. Each is one
checklist criterion named after the grader, weighted by its `weight` (through
the stage's scoring policy, so the binary score is the CLI's run score x 100).
What each reads, as the CLI reads it (docs/plugin-evals.md):

- `last_message`: the text of the last assistant message that has text;
- `trace`: the stage's messages, one compact JSON line each;
- `files`: the paths (relative, `/`-separated, sorted) of the files the stage
  created: a case unit's workspace starts empty, so every file the stage left;
- `{source: file, path}`: that file's text, from the stage's files (missing:
  the grader fails, as the CLI's throws and counts as failed);
- tool calls: every `tool_use` in the trajectory, subagents' included, with its
  input as JavaScript's `JSON.stringify` writes it for `input_match`.

Patterns are JavaScript's, translated at load (`js_regex`); a pattern that
would match differently is refused there. Fail closed where the CLI does not:
a trajectory that cannot be read, or text a pattern cannot match as
JavaScript would, makes the grader an error, never a silent fail. `llm`,
`baseline` and the `mock_calls` target are refused at load: not supported yet.
Loading is the kind's (`load_grader`, file:line:col); `suite.plugin_evals`
finds and merges the cases.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from ci_evals.config.yaml_source import Field
from ci_evals.grading.kinds.base import GradeContext, LoadContext
from ci_evals.grading.kinds.js_regex import JsRegex, JsRegexError, compile_js
from ci_evals.grading.kinds.trajectory import ToolUse, last_assistant_text, tool_uses
from ci_evals.grading.scoring import PolicyOverride

if TYPE_CHECKING:
    from ci_evals.results.criteria import GraderResult

TYPES = ("regex", "tool_order", "tool_used", "file_exists", "llm", "baseline")
NOT_YET = ("llm", "baseline")
TARGETS = ("last_message", "trace", "files", "mock_calls")
_COMMON = ("type", "name", "weight", "arm")
_KEYS = {
    "regex": ("target", "pattern", "flags", "match"),
    "tool_order": ("before", "after"),
    "tool_used": ("tool", "input_match", "min", "max"),
    "file_exists": ("path", "exists"),
    "llm": ("criteria", "focus"),
    "baseline": ("baseline_file", "criteria"),
}
# The key a `graders/<name>.md` body fills when the front matter leaves it out.
BODY_KEY = {"regex": "pattern", "llm": "criteria", "baseline": "criteria"}
_COUNT = re.compile(r"count:(\d+)")
_FILE_MAX = 10 << 20  # the CLI reads a `{source: file}` target up to 10 MiB
_GLOB_SPECIAL = frozenset(".+^${}()|[]\\")


@dataclass(frozen=True)
class FileTarget:
    path: str  # relative to the case's working folder


Target = Literal["last_message", "trace", "files"] | FileTarget
Match = Literal["contains", "not_contains"] | int  # an int: `count:N`


@dataclass(frozen=True)
class ToolRef:
    tool: str
    input_match: JsRegex | None = None


@dataclass(frozen=True)
class Regex:
    name: str
    weight: float
    pattern: JsRegex
    target: Target = "last_message"
    match: Match = "contains"


@dataclass(frozen=True)
class ToolUsed:
    name: str
    weight: float
    ref: ToolRef
    min: int = 1  # the CLI's default: `max: 0` alone can never pass (load warns)
    max: int | None = None


@dataclass(frozen=True)
class ToolOrder:
    name: str
    weight: float
    before: ToolRef
    after: ToolRef


@dataclass(frozen=True)
class FileExists:
    name: str
    weight: float
    path: str
    glob: re.Pattern[str]
    exists: bool = True


CaseGrader = Regex | ToolUsed | ToolOrder | FileExists


# -- the grader kind ------------------------------------------------------------


@dataclass(frozen=True)
class PluginEvalGrader:
    """A case's graders, graded together as one `GraderResult` ("plugin_eval")."""

    graders: tuple[CaseGrader, ...]
    name: str = "plugin_eval"
    writes: bool = False
    sandboxed: bool = False  # reads files in this process; runs nothing

    @property
    def scoring(self) -> PolicyOverride:
        """Each grader's `weight`, as the weight of its criterion."""
        return PolicyOverride(weights=MappingProxyType({g.name: g.weight for g in self.graders}))

    def files_only(self) -> PluginEvalGrader:
        """Without what reads the trajectory (a fixture has none)."""
        kept = tuple(g for g in self.graders if _files_only(g))
        return PluginEvalGrader(kept, name=self.name)

    def grade(self, ctx: GradeContext) -> GraderResult:
        from ci_evals.results.criteria import Criterion, GraderResult  # noqa: PLC0415 - pydantic

        run = _Run(ctx.folder, ctx.trajectory)
        criteria = []
        for grader in self.graders:
            try:
                passed, detail = _grade_one(grader, run)
            except _Unreadable as exc:
                return GraderResult(grader=self.name, error=f"{grader.name}: {exc}")
            criteria.append(
                Criterion(
                    id=grader.name,
                    kind="checklist",
                    score=1.0 if passed else 0.0,
                    passed=passed,
                    source="plugin_eval",
                    detail=detail,
                )
            )
        return GraderResult(grader=self.name, criteria=tuple(criteria))


def _files_only(grader: CaseGrader) -> bool:
    if isinstance(grader, Regex):
        return grader.target not in ("last_message", "trace")
    return isinstance(grader, FileExists)


class _PluginEvalKind:
    """`plugin_eval: [...]` in a stage: grader objects as a case.yaml's `graders:`."""

    name = "plugin_eval"

    def available(self) -> str | None:
        return None  # it reads files in this process

    def load(self, value: Field, ctx: LoadContext) -> tuple[PluginEvalGrader, ...]:
        graders = [load_grader(item) for item in value.sequence(allow_empty=False)]
        check_names(graders, value)
        return (PluginEvalGrader(tuple(graders)),)


KIND = _PluginEvalKind()


# -- loading -------------------------------------------------------------------


def load_grader(item: Field, *, name: str | None = None, body: str = "") -> CaseGrader:
    """One grader object. `name`/`body`: a `graders/<name>.md` file's stem and body
    (the front matter's own `name` wins, as in the CLI; the body fills `pattern` or
    `criteria` when absent). Every mistake is an `item`-relative `Field.error`."""
    kind_field = item.mapping((*_COMMON, *{k for keys in _KEYS.values() for k in keys})).get("type")
    if kind_field is None:
        raise item.error(
            'missing "type:"', hint=f"one of {' | '.join(TYPES)}, as `claude plugin eval` needs"
        )
    kind = kind_field.as_str()
    if kind not in TYPES:
        raise kind_field.error(f"unknown grader type {kind!r}", hint=f"one of {', '.join(TYPES)}")
    required = () if name is not None else ("name",)
    keys = item.mapping((*_COMMON, *_KEYS[kind]), required=required)
    if kind in NOT_YET:
        raise kind_field.error(
            f"grader type {kind!r} is not supported yet by ci-evals",
            hint="docs/plugin-evals.md, Not supported yet; run this case with "
            "`claude plugin eval` meanwhile",
        )
    grader_name, weight = _common(keys, name)
    if kind == "regex":
        return _load_regex(keys, item, grader_name, weight, body)
    if kind == "tool_used":
        return _load_tool_used(keys, item, grader_name, weight)
    if kind == "tool_order":
        for key in ("before", "after"):
            if key not in keys:
                raise item.error(f"missing required key {key!r}")
        return ToolOrder(grader_name, weight, _tool_ref(keys["before"]), _tool_ref(keys["after"]))
    if "path" not in keys:
        raise item.error("missing required key 'path'")
    path = keys["path"].as_str(allow_empty=True)
    exists = keys["exists"].as_bool() if "exists" in keys else True
    return FileExists(grader_name, weight, path, cli_glob(path), exists)


def _common(keys: Mapping[str, Field], name: str | None) -> tuple[str, float]:
    """The name (the file's stem unless the front matter names it) and the weight;
    `arm` is checked (it matters only with a without-plugin arm, which is not yet)."""
    weight = 1.0
    if "weight" in keys:
        weight = keys["weight"].as_number()
        if weight <= 0:
            raise keys["weight"].error(f"must be greater than 0, got {weight:g}")
    if "arm" in keys and keys["arm"].as_str() not in ("with-only", "both"):
        raise keys["arm"].error(f"unknown arm {keys['arm'].as_str()!r}", hint="with-only or both")
    return (keys["name"].as_str() if "name" in keys else str(name)), weight


def check_names(graders: Sequence[CaseGrader], where: Field) -> None:
    """Grader names are unique (the CLI's rule), also as criterion ids compare them
    (lower case, `_` and spaces as `-`): a criterion's weight is looked up so."""
    from ci_evals.grading.reviewer.rubrics import normalize_id  # noqa: PLC0415

    seen: dict[str, str] = {}
    for grader in graders:
        key = normalize_id(grader.name)
        if grader.name in seen.values():
            raise where.error(f'duplicate grader name "{grader.name}"')
        if key in seen:
            raise where.error(
                f'grader names "{seen[key]}" and "{grader.name}" are the same criterion id '
                f"{key!r} to ci-evals",
                hint="rename one of them",
            )
        seen[key] = grader.name


def _load_regex(
    keys: Mapping[str, Field], item: Field, name: str, weight: float, body: str
) -> Regex:
    if "pattern" in keys:
        pattern = keys["pattern"].as_str(allow_empty=True)
    elif body:
        pattern = body
    else:
        raise item.error("missing required key 'pattern'", hint="or write it as the file's body")
    flags = keys["flags"].as_str(allow_empty=True) if "flags" in keys else ""
    where = keys.get("pattern", keys.get("flags", item))
    compiled = _js(where, pattern, flags)
    target: Target = "last_message"
    if "target" in keys:
        target = _target(keys["target"])
    match: Match = "contains"
    if "match" in keys:
        written = keys["match"].as_str()
        count = _COUNT.fullmatch(written)
        if count is not None:
            match = int(count.group(1))
        elif written in ("contains", "not_contains"):
            match = "contains" if written == "contains" else "not_contains"
        else:
            raise keys["match"].error(f"must be contains | not_contains | count:N, got {written!r}")
    return Regex(name, weight, compiled, target, match)


def _target(value: Field) -> Target:
    if value.is_null() or not isinstance(value.plain(), (str, dict)):
        raise value.error("expected last_message, trace, files or {source: file, path: P}")
    if isinstance(value.plain(), dict):
        keys = value.mapping(("source", "path"), required=("source", "path"))
        if keys["source"].as_str() != "file":
            raise keys["source"].error("the only source is 'file'")
        return FileTarget(keys["path"].as_str())
    written = value.as_str()
    if written == "mock_calls":
        raise value.error(
            "target mock_calls is not supported yet by ci-evals (no MCP mocks yet)",
            hint="docs/plugin-evals.md, Not supported yet",
        )
    if written not in TARGETS:
        raise value.error(f"unknown target {written!r}", hint="last_message, trace or files")
    return "last_message" if written == "last_message" else _plain_target(written)


def _plain_target(written: str) -> Target:
    return "trace" if written == "trace" else "files"


def _load_tool_used(keys: Mapping[str, Field], item: Field, name: str, weight: float) -> ToolUsed:
    if "tool" not in keys:
        raise item.error("missing required key 'tool'")
    match = None
    if "input_match" in keys:
        match = _js(keys["input_match"], keys["input_match"].as_str(allow_empty=True), "")
    low = keys["min"].as_int(minimum=0) if "min" in keys else 1
    high = keys["max"].as_int(minimum=0) if "max" in keys else None
    return ToolUsed(name, weight, ToolRef(keys["tool"].as_str(), match), low, high)


def _tool_ref(value: Field) -> ToolRef:
    if isinstance(value.plain(), str):
        return ToolRef(value.as_str())
    keys = value.mapping(("tool", "input_match"), required=("tool",))
    match = None
    if "input_match" in keys:
        match = _js(keys["input_match"], keys["input_match"].as_str(allow_empty=True), "")
    return ToolRef(keys["tool"].as_str(), match)


def _js(where: Field, pattern: str, flags: str) -> JsRegex:
    try:
        return compile_js(pattern, flags)
    except JsRegexError as exc:
        raise where.error(
            f"JavaScript pattern {pattern!r}: {exc}",
            hint="docs/plugin-evals.md lists the constructs ci-evals refuses and why",
        ) from None


def cli_glob(path: str) -> re.Pattern[str]:
    """The CLI's `file_exists` glob: `**/` any folders, `**` anything, `*` no `/`, `?` one
    character (not a newline, as JavaScript's `.`); everything else literal."""
    out = ["^"]
    i = 0
    while i < len(path):
        c = path[i]
        if c == "*" and path.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if c == "*" and path.startswith("**", i):
            out.append("[^\\n\\r\\u2028\\u2029]*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^\\n\\r\\u2028\\u2029]")
        elif c in _GLOB_SPECIAL:
            out.append("\\" + c)
        else:
            out.append(re.escape(c))
        i += 1
    out.append("\\Z")
    return re.compile("".join(out))


# -- grading -------------------------------------------------------------------


class _Unreadable(Exception):
    """What the graders read cannot be read, or matched as JavaScript would: an error."""


class _Run:
    """What one stage run left, read once and only when a grader needs it."""

    def __init__(self, folder: Path, trajectory: Path | None) -> None:
        self.folder = folder
        self.trajectory = trajectory
        self._lines: list[str] | None = None
        self._uses: list[ToolUse] | None = None

    def lines(self) -> list[str]:
        if self._lines is None:
            if self.trajectory is None:
                raise _Unreadable("no trajectory was recorded for this stage")
            try:
                text = self.trajectory.read_text(encoding="utf-8")
            except (OSError, ValueError) as exc:
                raise _Unreadable(f"trajectory {self.trajectory.name} unreadable: {exc}") from None
            self._lines = [line for line in text.splitlines() if line.strip()]
        return self._lines

    def uses(self) -> list[ToolUse]:
        if self._uses is None:
            try:
                self._uses = tool_uses(self.lines())
            except ValueError as exc:
                raise _Unreadable(f"trajectory unreadable: {exc}") from None
        return self._uses

    def text(self, target: Target) -> tuple[str | None, str]:
        """The target's text (None: it cannot be read, the reason second)."""
        if isinstance(target, FileTarget):
            return _file_text(self.folder, target.path)
        if target == "files":
            return "\n".join(created_files(self.folder)), "files"
        if target == "trace":
            records = [json.loads(line) for line in self.lines()]
            return "\n".join(compact_json(r) for r in records), "trace"
        try:
            found = last_assistant_text(self.lines())
        except ValueError as exc:
            raise _Unreadable(f"trajectory unreadable: {exc}") from None
        return found or "", "last_message"


def compact_json(value: object) -> str:
    """`value` as JavaScript's `JSON.stringify` writes it (no spaces, no ASCII escaping)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def created_files(folder: Path) -> list[str]:
    """Every file and link under `folder`, relative, sorted: what the stage created."""
    found: list[str] = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        rel = os.path.relpath(top, folder)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        found.extend(prefix + name for name in files)
        found.extend(prefix + d for d in dirs if os.path.islink(os.path.join(top, d)))
    return sorted(found)


def _file_text(folder: Path, path: str) -> tuple[str | None, str]:
    shown = f"file {path}"
    target = os.path.normpath(os.path.join(folder, path))
    if not (target + os.sep).startswith(str(folder) + os.sep) or os.path.islink(target):
        return None, f'{shown}: path "{path}" leaves the run\'s folder'
    try:
        with open(target, "rb") as handle:
            data = handle.read(_FILE_MAX + 1)
    except FileNotFoundError:
        return None, f'{shown}: path "{path}" does not exist'
    except OSError as exc:
        return None, f"{shown}: unreadable ({exc.strerror})"
    if len(data) > _FILE_MAX:
        return None, f"{shown}: larger than 10 MiB"
    return data.decode("utf-8", errors="replace"), shown


def _grade_one(grader: CaseGrader, run: _Run) -> tuple[bool, str]:
    try:
        if isinstance(grader, Regex):
            return _regex(grader, run)
        if isinstance(grader, ToolUsed):
            count = sum(1 for use in run.uses() if _is(use, grader.ref))
            high = "∞" if grader.max is None else str(grader.max)
            passed = count >= grader.min and (grader.max is None or count <= grader.max)
            return passed, f"{grader.ref.tool} called {count}x (expected {grader.min}..{high})"
        if isinstance(grader, ToolOrder):
            return _order(grader, run.uses())
        created = created_files(run.folder)
        found = any(grader.glob.search(path) for path in created)
        passed = found == grader.exists
        state = "exists" if found else "missing"
        want = "present" if grader.exists else "absent"
        return passed, f"{grader.path} {state} (expected {want})"
    except JsRegexError as exc:
        raise _Unreadable(str(exc)) from None


def _regex(grader: Regex, run: _Run) -> tuple[bool, str]:
    text, shown = run.text(grader.target)
    if text is None:
        return False, f"grader threw: {shown}"  # the CLI's: a fail, not an error
    pattern = grader.pattern
    if grader.match == "contains":
        found = pattern.test(text)
        return found, f"matched {pattern.source}" if found else f"pattern not found in {shown}"
    if grader.match == "not_contains":
        found = pattern.test(text)
        return not found, "pattern found (expected absent)" if found else "pattern absent"
    count = pattern.count(text)
    return count == grader.match, f"found {count} matches (expected {grader.match})"


def _is(use: ToolUse, ref: ToolRef) -> bool:
    if use.name != ref.tool:
        return False
    return ref.input_match is None or ref.input_match.test(compact_json(use.input))


def _order(grader: ToolOrder, uses: list[ToolUse]) -> tuple[bool, str]:
    before = next((i for i, use in enumerate(uses) if _is(use, grader.before)), -1)
    after = next((i for i, use in enumerate(uses) if _is(use, grader.after)), -1)
    if before == -1:
        return False, f'"before" tool {grader.before.tool} never called'
    if after == -1:
        return False, f'"after" tool {grader.after.tool} never called'
    verb = "precedes" if before < after else "does NOT precede"
    return before < after, f"{grader.before.tool}@{before} {verb} {grader.after.tool}@{after}"
