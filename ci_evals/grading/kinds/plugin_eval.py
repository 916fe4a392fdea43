"""The `plugin_eval` kind: the graders of `claude plugin eval` cases, with the CLI's semantics.

A grader object is the CLI's (case.yaml schema 1.x, or a `graders/<name>.md`
front matter): `regex`, `tool_used`, `tool_order`, `file_exists`, `llm` and
`baseline` (the judge: `plugin_eval_judge`). Each is one checklist criterion
named after the grader, weighted by its `weight` (through the stage's scoring
policy, so the binary score is the CLI's run score x 100). It reads what the CLI
reads: the last message, the CLI's stream-json trace (`STREAM_FILE`), the files
the stage created less those its scaffold left (`SCAFFOLD_FILES`), a file's text,
the trajectory's tool calls, and the mocked tools' calls (`mock_calls_text`, by
the names the runner wrote to `MOCKS_FILE`); a judge's votes go to `JUDGE_FILE`.

Patterns are JavaScript's, translated at load (`js_regex`). Fail closed where
the CLI does not: an unreadable trajectory, text a pattern cannot match as
JavaScript would, or a judge with no verdict make the grader an error. Loading
is the kind's (`load_grader`, file:line:col); `suite.plugin_evals` finds and
merges the cases. Every target and rule, and where ci-evals differs from the
CLI: docs/plugin-evals.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from ci_evals.agents import STREAM_CUT, STREAM_FILE, STREAM_MAX_BYTES
from ci_evals.config.yaml_source import LocatedNode
from ci_evals.errors import UserError
from ci_evals.fs.json_input import load_file
from ci_evals.fs.links import Unreadable, read_inside
from ci_evals.fs.walk import walk
from ci_evals.grading.kinds import plugin_eval_judge as judge
from ci_evals.grading.kinds.base import GradeContext, LoadContext, ModelEndpoint
from ci_evals.grading.kinds.js_json import stringify
from ci_evals.grading.kinds.js_regex import JsRegex, JsRegexError, compile_js
from ci_evals.grading.kinds.trajectory import ToolUse, last_assistant_text, tool_uses
from ci_evals.results import normalize_id
from ci_evals.results.verdict import PolicyOverride

if TYPE_CHECKING:
    from ci_evals.results.criteria import GraderResult, RawOutput

TYPES = ("regex", "tool_order", "tool_used", "file_exists", "llm", "baseline")
# The SDK's control protocol on the CLI's stdout, and the frames it writes for an SDK
# host only (`"sdk_host_only": true`), which `claude plugin eval`'s child never writes.
_SDK_FRAMES = frozenset({"control_request", "control_response", "control_cancel_request"})
JUDGE_FILE = "plugin-eval-judge.json"  # in the stage's folder: every judge's votes and evidence
# In the stage's folder: the paths the case's scaffold left in the workspace (a JSON list).
SCAFFOLD_FILES = "scaffold-files.json"
_SCAFFOLD_FILES_MAX = 64 << 20
# In the stage's folder, written by the runner before the stage (never by the agent):
# the mocked tools' names as the model calls them, and the run's abort nonce.
MOCKS_FILE = "plugin-eval-mocks.json"
ABORT_MARK = "eval aborted by mock"  # the CLI's: an abort answer starts "<mark> <nonce>:"
NO_MOCKS = (
    "no mock stand-ins were active in this run (no mocks/ directory applies to this "
    "case) \u2014 a mock_calls grader has nothing to check"
)
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
_COUNT = re.compile(r"count:(\d+)")
_FILE_MAX = 10 << 20  # the CLI reads a `{source: file}` target (and a baseline) up to 10 MiB
# What the CLI sends a judge as an image, by the file's first bytes (regex fails on one).
_IMAGES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_GLOB_SPECIAL = frozenset(".+^${}()|[]\\")


@dataclass(frozen=True)
class FileTarget:
    path: str  # relative to the case's working folder


Target = Literal["last_message", "trace", "files", "mock_calls"] | FileTarget
Match = Literal["contains", "not_contains"] | int  # an int: `count:N`
Arm = Literal["with-only", "both"]


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
    arm: Arm | None = None  # as written: `with-only`, `both`, or not given


@dataclass(frozen=True)
class ToolUsed:
    name: str
    weight: float
    ref: ToolRef
    min: int = 1  # the CLI's default: `max: 0` alone can never pass (load warns)
    max: int | None = None
    arm: Arm | None = None  # as written: `with-only`, `both`, or not given


@dataclass(frozen=True)
class ToolOrder:
    name: str
    weight: float
    before: ToolRef
    after: ToolRef
    arm: Arm | None = None  # as written: `with-only`, `both`, or not given


@dataclass(frozen=True)
class FileExists:
    name: str
    weight: float
    path: str
    glob: re.Pattern[str]
    exists: bool = True
    arm: Arm | None = None  # as written: `with-only`, `both`, or not given


@dataclass(frozen=True)
class Llm:
    name: str
    weight: float
    criteria: str
    focus: Target = "last_message"
    arm: Arm | None = None  # as written: `with-only`, `both`, or not given


@dataclass(frozen=True)
class Baseline:
    name: str
    weight: float
    criteria: str
    baseline_file: str  # as written, relative to the case's folder
    baseline: tuple[str, ...]  # its messages, each as JSON.stringify writes it
    arm: Arm | None = None  # as written: `with-only`, `both`, or not given


CaseGrader = Regex | ToolUsed | ToolOrder | FileExists | Llm | Baseline


# -- the grader kind ------------------------------------------------------------


@dataclass(frozen=True)
class PluginEvalGrader:
    """A case's graders, graded together as one `GraderResult` ("plugin_eval")."""

    graders: tuple[CaseGrader, ...]
    name: str = "plugin_eval"
    writes: bool = False
    sandboxed: bool = False  # reads files in this process; runs nothing
    judge_model: str = judge.DEFAULT_MODEL  # for `llm` and `baseline` graders
    # The case has a scaffold: what it left (`SCAFFOLD_FILES`) is no file the run created.
    scaffolded: bool = False
    # The arm of a run with and without the plugin (`ablation: with-without`); None:
    # a single-arm run, where every grader is graded and scored.
    arm: Literal["with", "without"] | None = None
    # The case has MCP mocks: its `mock_calls` graders are with-only (`with_only`).
    mocked: bool = False

    @property
    def scoring(self) -> PolicyOverride:
        """Each grader's `weight`, as the weight of its criterion; in the with-arm the
        with-only graders are advisory: graded and shown, never scored."""
        weights = MappingProxyType({g.name: g.weight for g in self.graders})
        return PolicyOverride(weights=weights, advisory=frozenset(self.not_scored))

    @property
    def not_scored(self) -> tuple[str, ...]:
        """The graders this arm runs but leaves out of its score: the with-only ones,
        in the with-arm of a two-arm run, unless every grader of the case is one."""
        if self.arm != "with" or self._all_with_only:
            return ()
        return tuple(g.name for g in self.graders if with_only(g, mocked=self.mocked))

    @property
    def graded(self) -> tuple[CaseGrader, ...]:
        """What this arm runs: the without-arm leaves the with-only graders out
        (unless every grader is one, as the CLI does)."""
        if self.arm != "without" or self._all_with_only:
            return self.graders
        return tuple(g for g in self.graders if not with_only(g, mocked=self.mocked))

    @property
    def _all_with_only(self) -> bool:
        return all(with_only(g, mocked=self.mocked) for g in self.graders)

    def for_arm(self, arm: Literal["with", "without"] | None) -> PluginEvalGrader:
        """These graders as `arm` of a two-arm run grades them (None: single-arm)."""
        return replace(self, arm=arm)

    @property
    def asks_model(self) -> bool:
        """Whether a judge (`llm`, `baseline`) grades: it needs the run's model endpoint."""
        return any(isinstance(g, (Llm, Baseline)) for g in self.graders)

    def files_only(self) -> PluginEvalGrader:
        """Without what reads the trajectory (a fixture has none) or asks a model."""
        kept = tuple(g for g in self.graders if _files_only(g))
        return PluginEvalGrader(
            kept,
            name=self.name,
            judge_model=self.judge_model,
            scaffolded=self.scaffolded,
            arm=self.arm,
            mocked=self.mocked,
        )

    def grade(self, ctx: GradeContext) -> GraderResult:
        from ci_evals.results.criteria import Criterion, GraderResult  # noqa: PLC0415 - pydantic

        run = _Run(ctx.folder, ctx.trajectory, scaffolded=self.scaffolded)
        judged = _Judged(self.judge_model, ctx.endpoint)
        criteria = []
        error = None
        aborted = run.aborted()
        for grader in self.graded:
            try:
                if aborted is not None:  # the CLI grades nothing: the run scores 0
                    raise _Aborted(aborted)
                if isinstance(grader, (Llm, Baseline)):
                    passed, detail = judged.grade(grader, run)
                else:
                    passed, detail = _grade_one(grader, run)
            except _Unreadable as exc:
                error = f"{grader.name}: {exc}"
                break
            except _Aborted as exc:
                passed, detail = False, str(exc)
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
        if not judged.records:
            if error is not None:
                return GraderResult(grader=self.name, error=error)
            return GraderResult(grader=self.name, criteria=tuple(criteria))
        return GraderResult(
            grader=self.name,
            criteria=() if error is not None else tuple(criteria),
            error=error,
            judge_model=self.judge_model,
            cost_usd=judged.cost_usd,
            raw_output=judged.write(ctx.out_dir),
        )


def with_only(grader: CaseGrader, *, mocked: bool = False) -> bool:
    """`claude plugin eval`'s with-only rule: `arm: with-only`, and, with no `arm`
    written, a `tool_used` on `Skill` (a sign the plugin fired, not a score of it)
    and, in a case with mocks (`mocked`), a `regex` on or an `llm` focused on
    `mock_calls` (the plugin's servers are not there without it). `arm: both`
    always scores."""
    if grader.arm is not None:
        return grader.arm == "with-only"
    if mocked and (
        (isinstance(grader, Regex) and grader.target == "mock_calls")
        or (isinstance(grader, Llm) and grader.focus == "mock_calls")
    ):
        return True
    return isinstance(grader, ToolUsed) and grader.ref.tool == "Skill"


def _files_only(grader: CaseGrader) -> bool:
    if isinstance(grader, Regex):
        return grader.target not in ("last_message", "trace", "mock_calls")
    return isinstance(grader, FileExists)


class _PluginEvalKind:
    """`plugin_eval: [...]` in a stage: grader objects as a case.yaml's `graders:`."""

    name = "plugin_eval"

    def available(self) -> str | None:
        return None  # it reads files in this process

    def load(self, value: LocatedNode, ctx: LoadContext) -> tuple[PluginEvalGrader, ...]:
        items = value.sequence(allow_empty=False)
        graders = [load_grader(item, folder=ctx.suite_dir) for item in items]
        check_names(graders, value)
        return (PluginEvalGrader(tuple(graders)),)


KIND = _PluginEvalKind()


# -- loading -------------------------------------------------------------------


def load_grader(
    item: LocatedNode, *, folder: Path, name: str | None = None, body: str = ""
) -> CaseGrader:
    """One grader object of the case in `folder`. `name`/`body`: a `graders/<name>.md`
    file's stem and body (the front matter's own `name` wins, as in the CLI; the
    body fills `pattern` or `criteria` when absent). Every mistake is an
    `item`-relative `LocatedNode.error`."""
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
    grader_name, weight = _common(keys, name)
    grader = _load_kind(kind, keys, item, (grader_name, weight), body=body, folder=folder)
    if "arm" in keys:
        arm: Arm = "with-only" if keys["arm"].as_str() == "with-only" else "both"
        grader = replace(grader, arm=arm)
    return grader


def _load_kind(
    kind: str,
    keys: Mapping[str, LocatedNode],
    item: LocatedNode,
    named: tuple[str, float],
    *,
    body: str,
    folder: Path,
) -> CaseGrader:
    grader_name, weight = named
    if kind == "regex":
        return _load_regex(keys, item, grader_name, weight, body)
    if kind in ("llm", "baseline"):
        return _load_judged(kind, keys, item, named, body=body, folder=folder)
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


def _common(keys: Mapping[str, LocatedNode], name: str | None) -> tuple[str, float]:
    """The name (the file's stem unless the front matter names it) and the weight;
    `arm` is checked here (`with_only` reads it)."""
    weight = 1.0
    if "weight" in keys:
        weight = keys["weight"].as_number()
        if weight <= 0:
            raise keys["weight"].error(f"must be greater than 0, got {weight:g}")
    if "arm" in keys and keys["arm"].as_str() not in ("with-only", "both"):
        raise keys["arm"].error(f"unknown arm {keys['arm'].as_str()!r}", hint="with-only or both")
    return (keys["name"].as_str() if "name" in keys else str(name)), weight


def check_names(graders: Sequence[CaseGrader], where: LocatedNode) -> None:
    """Grader names are unique (the CLI's rule), also as criterion ids compare them
    (lower case, `_` and spaces as `-`): a criterion's weight is looked up so."""

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
    keys: Mapping[str, LocatedNode], item: LocatedNode, name: str, weight: float, body: str
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


def _load_judged(
    kind: str,
    keys: Mapping[str, LocatedNode],
    item: LocatedNode,
    common: tuple[str, float],
    *,
    body: str,
    folder: Path,
) -> Llm | Baseline:
    name, weight = common
    if "criteria" in keys:
        criteria = keys["criteria"].as_str(allow_empty=True)
    elif body:
        criteria = body
    else:
        raise item.error("missing required key 'criteria'", hint="or write it as the file's body")
    if kind == "llm":
        focus: Target = _target(keys["focus"]) if "focus" in keys else "last_message"
        return Llm(name, weight, criteria, focus)
    if "baseline_file" not in keys:
        raise item.error("missing required key 'baseline_file'")
    written = keys["baseline_file"]
    return Baseline(name, weight, criteria, written.as_str(), _baseline(written, folder))


def _baseline(value: LocatedNode, folder: Path) -> tuple[str, ...]:
    """The baseline trajectory's messages (JSON lines, blank ones skipped), read now:
    a baseline that cannot be read fails its grader at every run of the CLI."""
    path = os.path.normpath(os.path.join(folder, value.as_str()))
    shown = value.as_str()
    top = os.path.realpath(folder)
    if not os.path.realpath(path).startswith(top + os.sep):
        raise value.error(f"baseline file {shown} leads out of the case's folder")
    try:
        with open(path, "rb") as handle:
            data = handle.read(_FILE_MAX + 1)
    except FileNotFoundError:
        raise value.error(
            f"baseline file {shown} does not exist",
            hint="a trajectory as JSON lines, relative to the case's folder",
        ) from None
    except OSError as exc:
        raise value.error(f"baseline file {shown}: {exc.strerror}") from None
    if len(data) > _FILE_MAX:
        raise value.error(f"baseline file {shown} is larger than 10 MiB")
    lines = []
    for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            lines.append(stringify(json.loads(line)))
        except (ValueError, RecursionError):
            raise value.error(
                f"baseline file {shown}, line {number}: not JSON",
                hint="one JSON message per line, as a trace.jsonl holds them",
            ) from None
    return tuple(lines)


def _target(value: LocatedNode) -> Target:
    if value.is_null() or not isinstance(value.plain(), (str, dict)):
        raise value.error("expected last_message, trace, files or {source: file, path: P}")
    if isinstance(value.plain(), dict):
        keys = value.mapping(("source", "path"), required=("source", "path"))
        if keys["source"].as_str() != "file":
            raise keys["source"].error("the only source is 'file'")
        return FileTarget(keys["path"].as_str())
    written = value.as_str()
    if written not in TARGETS:
        raise value.error(
            f"unknown target {written!r}", hint="last_message, trace, files or mock_calls"
        )
    return _PLAIN[written]


_PLAIN: dict[str, Target] = {
    "last_message": "last_message",
    "trace": "trace",
    "files": "files",
    "mock_calls": "mock_calls",
}


def _load_tool_used(
    keys: Mapping[str, LocatedNode], item: LocatedNode, name: str, weight: float
) -> ToolUsed:
    if "tool" not in keys:
        raise item.error("missing required key 'tool'")
    match = None
    if "input_match" in keys:
        match = _js(keys["input_match"], keys["input_match"].as_str(allow_empty=True), "")
    low = keys["min"].as_int(minimum=0) if "min" in keys else 1
    high = keys["max"].as_int(minimum=0) if "max" in keys else None
    return ToolUsed(name, weight, ToolRef(keys["tool"].as_str(), match), low, high)


def _tool_ref(value: LocatedNode) -> ToolRef:
    if isinstance(value.plain(), str):
        return ToolRef(value.as_str())
    keys = value.mapping(("tool", "input_match"), required=("tool",))
    match = None
    if "input_match" in keys:
        match = _js(keys["input_match"], keys["input_match"].as_str(allow_empty=True), "")
    return ToolRef(keys["tool"].as_str(), match)


def _js(where: LocatedNode, pattern: str, flags: str) -> JsRegex:
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


class _Aborted(Exception):
    """The run was aborted by a mock: the CLI runs no grader, the run scores 0."""


class _Unreadable(Exception):
    """What the graders read cannot be read, or matched as JavaScript would: an error."""


class _Run:
    """What one stage run left, read once and only when a grader needs it."""

    def __init__(self, folder: Path, trajectory: Path | None, *, scaffolded: bool = False) -> None:
        self.folder = folder
        self.trajectory = trajectory
        self.scaffolded = scaffolded
        self._lines: list[str] | None = None
        self._uses: list[ToolUse] | None = None
        self._trace: list[str] | None = None
        self._records: list[object] = []

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

    def created(self) -> list[str]:
        """The files the stage created: all it left, less what the scaffold left
        (a stage with a scaffold and no record of it: no list is trusted)."""
        found = created_files(self.folder)
        if not self.scaffolded:
            return found
        if self.trajectory is None:
            raise _Unreadable("no record of what the case's scaffold left (a fixture)")
        path = self.trajectory.parent / SCAFFOLD_FILES
        try:
            left = load_file(path, _SCAFFOLD_FILES_MAX, what="scaffold's file list")
        except UserError as exc:
            raise _Unreadable(str(exc)) from None
        if not isinstance(left, list) or not all(isinstance(p, str) for p in left):
            raise _Unreadable(f"{SCAFFOLD_FILES}: not a list of paths")
        before = set(left)
        return [p for p in found if p not in before]

    def trace(self) -> list[str]:
        """The CLI's trace: each JSON line of its stdout (`STREAM_FILE`, beside the
        trajectory) as JSON.stringify writes it, lines that are no JSON skipped as
        the CLI skips them, and the SDK's own protocol frames left out (a `claude
        plugin eval` child has no SDK on its stdin: it writes none)."""
        if self._trace is not None:
            return self._trace
        if self.trajectory is None:
            raise _Unreadable("no trajectory was recorded for this stage")
        path = self.trajectory.parent / STREAM_FILE
        try:
            with open(path, "rb") as handle:
                data = handle.read(STREAM_MAX_BYTES + len(STREAM_CUT) + 1)
        except OSError as exc:
            raise _Unreadable(f"the CLI's stream {STREAM_FILE}: {exc.strerror}") from None
        lines = data.decode("utf-8", "replace").split("\n")
        if STREAM_CUT.strip() in lines or len(data) > STREAM_MAX_BYTES + len(STREAM_CUT):
            raise _Unreadable(
                f"the CLI wrote more than {STREAM_MAX_BYTES >> 20} MiB to its stdout: the "
                "trace was cut, and a pattern over it cannot be matched as the CLI would"
            )
        trace = []
        for line in lines:
            try:
                record = json.loads(line.strip())
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict) and (
                record.get("type") in _SDK_FRAMES or record.get("sdk_host_only") is True
            ):
                continue
            trace.append(compact_json(record))
            self._records.append(record)
        self._trace = trace
        return trace

    def aborted(self) -> str | None:
        """How a mock aborted the run (`MOCKS_FILE`'s `aborted`, the runner's), or None."""
        if self.trajectory is None:
            return None
        try:
            document = json.loads((self.trajectory.parent / MOCKS_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        found = document.get("aborted") if isinstance(document, dict) else None
        if not isinstance(found, dict):
            return None
        where = f"{found.get('server', '?')}/{found.get('tool', '?')}"
        return f"not graded: the run was aborted by mock {where}: {found.get('reason', '')}"

    def mock_calls(self) -> tuple[str | None, str]:
        """The CLI's `mock_calls` text (None: no mock was active, the reason second)."""
        if self.trajectory is None:
            raise _Unreadable("no trajectory was recorded for this stage")
        path = self.trajectory.parent / MOCKS_FILE
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, NO_MOCKS
        except (OSError, ValueError) as exc:
            raise _Unreadable(f"{MOCKS_FILE} unreadable: {exc}") from None
        tools = document.get("tools") if isinstance(document, dict) else None
        nonce = document.get("nonce") if isinstance(document, dict) else None
        if not isinstance(tools, list) or not isinstance(nonce, str):
            raise _Unreadable(f"{MOCKS_FILE} is not what the runner writes")
        if not tools:
            return None, NO_MOCKS
        self.trace()
        return mock_calls_text(self._records, frozenset(map(str, tools)), nonce), "mock_calls"

    def text(self, target: Target) -> tuple[str | None, str]:
        """The target's text (None: it cannot be read, the reason second)."""
        if isinstance(target, FileTarget):
            return _file_text(self.folder, target.path)
        if target == "files":
            return "\n".join(self.created()), "files"
        if target == "trace":
            return "\n".join(self.trace()), "trace"
        if target == "mock_calls":
            return self.mock_calls()
        try:
            found = last_assistant_text(self.lines())
        except ValueError as exc:
            raise _Unreadable(f"trajectory unreadable: {exc}") from None
        return found or "", "last_message"


def mock_calls_text(records: Sequence[object], mocked: frozenset[str], nonce: str) -> str:
    """One JSON line per call of a mocked tool, in the trace's order, as the CLI writes
    them: `{tool, input, output?, isError?, verdict}`, the output and error from the
    call's `tool_result` (verdict `no_result` without one, `abort` for the stand-in's
    abort answer)."""
    mark = f"{ABORT_MARK} {nonce}:"
    lines = []
    for call in _calls(records):
        if call["name"] not in mocked:
            continue
        shown: dict[str, object] = {"tool": call["name"]}
        shown.update((k, call[k]) for k in ("input", "output") if k in call)
        if call.get("isError") is True:
            shown["isError"] = True
        if "isError" not in call:
            verdict = "no_result"
        elif call["isError"] is not True:
            verdict = "ok"
        else:
            verdict = "abort" if str(call.get("output", "")).startswith(mark) else "tool_error"
        shown["verdict"] = verdict
        lines.append(compact_json(shown))
    return "\n".join(lines)


def _calls(records: Sequence[object]) -> list[dict[str, object]]:
    """Every `tool_use` of the trace with its `tool_result`'s text and error, if any."""
    calls: list[dict[str, object]] = []
    by_id: dict[object, dict[str, object]] = {}
    for record in records:
        message = record.get("message") if isinstance(record, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        kind = record.get("type") if isinstance(record, dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if kind == "assistant" and block.get("type") == "tool_use":
                call: dict[str, object] = {"name": str(block.get("name", ""))}
                if "input" in block:
                    call["input"] = block["input"]
                calls.append(call)
                by_id[block["id"] if isinstance(block.get("id"), str) else object()] = call
            elif kind == "user" and block.get("type") == "tool_result":
                found = by_id.get(block.get("tool_use_id"))
                if found is not None:
                    found["output"] = _result_text(block.get("content"))
                    found["isError"] = block.get("is_error") is True
    return calls


def _result_text(content: object) -> str:
    """A tool_result's content as the CLI reads it: a string, or its blocks' texts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(item["text"]) if isinstance(item, dict) and "text" in item else ""
            for item in content
        )
    return ""


def compact_json(value: object) -> str:
    """`value` as JavaScript's `JSON.stringify` writes it (numbers included)."""
    return stringify(value)


def created_files(folder: Path) -> list[str]:
    """Every file and link under `folder`, relative, sorted: what the stage created."""
    walked = walk(folder, skip_vanished=True, skip_unreadable=True)
    return sorted(rel for rel, kind, _ in walked if kind != "dir")  # a linked folder too


def _file_text(folder: Path, path: str) -> tuple[str | None, str]:
    """The file's text as the CLI reads it (UTF-8, a leading BOM dropped); None and
    the reason when it cannot be read."""
    data, shown = _file_bytes(folder, path)
    if data is None:
        return None, shown
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff"), shown


def _image_type(data: bytes) -> str | None:
    for magic, kind in _IMAGES:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _file_bytes(folder: Path, path: str) -> tuple[bytes | None, str]:
    """The file's bytes, read by descriptor from `folder` with no link followed on
    the way (`fs.links.read_inside`): a path through a link the agent made is
    refused, never read on the host. None and the reason when it cannot be read."""
    shown = f"file {path}"
    rel = os.path.normpath(path).replace(os.sep, "/")
    if os.path.isabs(rel) or rel == ".." or rel.startswith("../"):
        return None, f'{shown}: path "{path}" leaves the run\'s folder'
    try:
        return read_inside(folder, rel, _FILE_MAX), shown
    except Unreadable as exc:
        text = str(exc)
        if text.startswith('path "') and text.endswith("does not exist"):
            return None, f'{shown}: path "{path}" does not exist'
        if "is larger than" in text:
            return None, f"{shown}: larger than 10 MiB"
        return None, f"{shown}: unreadable ({text})"


def _grade_one(grader: Regex | ToolUsed | ToolOrder | FileExists, run: _Run) -> tuple[bool, str]:
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
        found = any(grader.glob.search(path) for path in run.created())
        passed = found == grader.exists
        state = "exists" if found else "missing"
        want = "present" if grader.exists else "absent"
        return passed, f"{grader.path} {state} (expected {want})"
    except JsRegexError as exc:
        raise _Unreadable(str(exc)) from None


class _Judged:
    """The judge graders of one stage run: asked through the run's endpoint, their
    votes, answers and evidence kept for `JUDGE_FILE`."""

    def __init__(self, model: str, endpoint: ModelEndpoint | None) -> None:
        self.model = model
        self.endpoint = endpoint
        self.records: list[dict[str, object]] = []
        self.cost_usd = 0.0

    def grade(self, grader: Llm | Baseline, run: _Run) -> tuple[bool, str]:
        """Pass/fail and the CLI's explanation; `_Unreadable` when no verdict is trusted."""
        note = ""
        if isinstance(grader, Baseline):
            prompt = judge.baseline_prompt(grader.criteria, grader.baseline, run.trace())
            evidence = prompt
        else:
            shown, text = _focus(grader.focus, run)
            if text is None:
                return False, f"grader threw: {shown}"  # the CLI's: a fail
            if text == "" and grader.focus == "files":
                text = "(no file changes)"
            if text == "" and grader.focus == "mock_calls":
                text = "(no mocked tool calls)"
            prompt, evidence = judge.llm_prompt(grader.criteria, shown, text)
            length = len(text.encode("utf-16-le", "surrogatepass")) // 2
            if isinstance(grader.focus, FileTarget) and length > judge.LONG_FILE:
                note = (
                    f" \u2014 note: long file ({length} chars); llm judges are noisy on long "
                    "inputs, prefer a regex grader for large artifacts"
                )
        record: dict[str, object] = {"name": grader.name, "type": type(grader).__name__.lower()}
        self.records.append(record)
        if self.endpoint is None:
            record["error"] = "no model endpoint to judge with (`run` and `grade` have one)"
            raise _Unreadable(str(record["error"]))
        try:
            ballot = judge.judge(self.endpoint, self.model, prompt)
        except judge.JudgeError as exc:
            self._keep(record, exc.ballot, evidence)
            record["error"] = str(exc)
            raise _Unreadable(f"judge: {exc}") from None
        self._keep(record, ballot, evidence)
        record["passed"] = ballot.passed
        return ballot.passed, ballot.shown + note

    def _keep(self, record: dict[str, object], ballot: judge.Ballot, evidence: str) -> None:
        self.cost_usd += ballot.cost_usd
        record.update(judgeVotes=ballot.votes, answers=ballot.answers, evidence=evidence)

    def write(self, out_dir: Path | None) -> RawOutput | None:
        """`JUDGE_FILE` in the stage's folder; what results record of it."""
        from ci_evals.results.criteria import RawOutput  # noqa: PLC0415 - pydantic

        if out_dir is None:
            return None
        document = {"judgeModel": self.model, "graders": self.records}
        data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode(
            "utf-8", "surrogatepass"
        )
        path = out_dir / JUDGE_FILE
        path.write_bytes(data)
        return RawOutput(path=str(path), sha256=hashlib.sha256(data).hexdigest(), size=len(data))


def _focus(focus: Target, run: _Run) -> tuple[str, str | None]:
    """An `llm` grader's focus as the CLI names it and its text (None: unreadable,
    a fail, the reason first). A trace is its first and last 12 messages past 24."""
    if isinstance(focus, FileTarget):
        data, shown = _file_bytes(run.folder, focus.path)
        if data is None:
            return shown, None
        kind = _image_type(data)
        if kind is not None:
            raise _Unreadable(
                f"{shown} is an image ({kind}): a judge shown an image is not supported "
                "yet by ci-evals (docs/plugin-evals.md)"
            )
        if b"\0" in data:
            return (
                f"{shown} cannot be shown to the judge as text \u2014 it contains a NUL byte "
                f"at offset {data.index(0)}",
                None,
            )
        return shown, data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    if focus == "trace":
        return "trace", judge.messages_text(run.trace())
    text, shown = run.text(focus)
    return shown, text


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
