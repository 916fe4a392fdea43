"""MCP graders: the server the agent built, checked for protocol compliance over stdio.

```yaml
mcp:
  - id: server
    command: [python3, server.py]       # argv, started in the graded folder (never a shell)
    protocol: 2025-11-25                # the revision the task names: it must be served
    advisory: [tools-call]              # reported, not deciding (added to the defaults)
    weights: {tools-call: 2}            # in the binary score (default 1 each)
```

Each sub-test (`ci_evals.mcp.subtests`) runs against a fresh server process
inside the stage's sandbox, and becomes one checklist criterion
`<id>/<sub-test>` (source `mcp`), with the revision checked and the reason in
its detail. Advisory sub-tests and weights reach the verdict through the
stage's scoring policy (`scoring`), as if written in its `scoring:` (where ids
compare by their last part: two mcp graders of one stage share them). The
server's stderr of every session goes to `mcp-<id>.log` in the run folder.
Every key (`cwd`, `timeout_s`, `required`, `unknown_tool`, `tool`, `arguments`)
and sub-test: docs/grading.md (*MCP graders*) and docs/mcp-check.md.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import yaml

from ci_evals.grading.kinds.command import inside_folder, safe_name
from ci_evals.mcp import revisions, subtests
from ci_evals.mcp.check import DEFAULT_ADVISORY, Policy, Report
from ci_evals.results.verdict import PolicyOverride
from ci_evals.sandbox.base import SandboxConfig

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.grading.kinds.base import GradeContext, LoadContext
    from ci_evals.results.criteria import GraderResult

GRADER_KEYS = (
    "id",
    "command",
    "cwd",
    "protocol",
    "timeout_s",
    "advisory",
    "required",
    "weights",
    "unknown_tool",
    "tool",
    "arguments",
)
UNKNOWN_TOOL_RULES = ("error-or-isError", "error")
DEFAULT_TIMEOUT_S = 10.0
_DEFAULT_ENV = {"PATH": os.defpath, "LANG": "C.UTF-8"}


def _no_weights() -> Mapping[str, float]:
    return MappingProxyType({})


@dataclass(frozen=True)
class McpGrader:
    id: str
    argv: tuple[str, ...]
    cwd: str = "."  # relative to the graded folder
    protocol: str = revisions.DEFAULT
    timeout_s: float = DEFAULT_TIMEOUT_S
    advisory: frozenset[str] = DEFAULT_ADVISORY
    weights: Mapping[str, float] = field(default_factory=_no_weights, hash=False)
    unknown_tool_is_error_result: bool = True
    tool: str | None = None
    arguments: Mapping[str, Any] | None = field(default=None, hash=False)
    explicit: bool = False  # `protocol:` given: a server that does not serve it fails

    @property
    def name(self) -> str:
        return f"mcp:{self.id}"

    writes = True  # the server may write (a database file): it gets a private copy
    sandboxed = True  # it is the agent's code

    @property
    def scoring(self) -> PolicyOverride:
        """Its criteria's advisory flags and weights, for the stage's policy (`config`)."""
        return PolicyOverride(
            weights=MappingProxyType({f"{self.id}/{k}": v for k, v in self.weights.items()}),
            advisory=frozenset(f"{self.id}/{name}" for name in self.advisory),
        )

    def files_only(self) -> McpGrader:
        return self  # it starts the server in the folder; no trajectory

    def options(self) -> subtests.Options:
        return subtests.Options(
            revision=self.protocol,
            timeout_s=self.timeout_s,
            unknown_tool_is_error_result=self.unknown_tool_is_error_result,
            tool=self.tool,
            arguments=None if self.arguments is None else dict(self.arguments),
            explicit=self.explicit,
        )

    def grade(self, ctx: GradeContext) -> GraderResult:
        from ci_evals.results.criteria import GraderResult  # noqa: PLC0415

        folder = ctx.folder.resolve()
        cwd = (folder / self.cwd).resolve()
        if not cwd.is_dir() or not cwd.is_relative_to(folder):
            # The folder is the agent's output: a missing (or escaping) cwd is its failure.
            return GraderResult(grader=self.name, criteria=(self._not_run(),))
        report = self._check(ctx.sandbox, folder, cwd, ctx.env)
        raw = None
        if ctx.out_dir is not None:
            raw = _write_log(report, ctx.out_dir / f"mcp-{safe_name(self.id)}.log")
        return GraderResult(grader=self.name, criteria=self._criteria(report), raw_output=raw)

    def _check(
        self, sandbox: SandboxConfig, folder: Path, cwd: Path, env: Mapping[str, str] | None
    ) -> Report:
        from ci_evals.mcp.check import run_check  # noqa: PLC0415 - only when a grader runs
        from ci_evals.sandbox.base import SandboxSpec  # noqa: PLC0415
        from ci_evals.sandbox.registry import open_sandbox  # noqa: PLC0415

        env = dict(_DEFAULT_ENV if env is None else env)
        spec = SandboxSpec(writable=(folder,), readonly=program_paths(self.argv[0], env))
        policy = Policy(advisory=self.advisory, weights=self.weights)
        with open_sandbox(sandbox, spec) as box:
            return run_check(
                box, self.argv, cwd=cwd, env=env, options=self.options(), policy=policy
            )

    def _criteria(self, report: Report) -> tuple[Any, ...]:
        from ci_evals.results.criteria import Criterion  # noqa: PLC0415

        return tuple(
            Criterion(
                id=f"{self.id}/{sub.id}",
                kind="checklist",
                score=1.0 if sub.passed else 0.0,
                passed=sub.passed,
                weight=sub.weight,
                advisory=not sub.required,
                source="mcp",
                detail=f"MCP {report.protocol}: {sub.reason}",
            )
            for sub in report.subtests
        )

    def _not_run(self) -> Any:
        from ci_evals.results.criteria import Criterion  # noqa: PLC0415

        return Criterion(
            id=f"{self.id}/server",
            kind="checklist",
            score=0.0,
            passed=False,
            source="mcp",
            detail=f"not run: {self.cwd} is not a folder inside the graded folder",
        )


def program_paths(program: str, env: Mapping[str, str]) -> tuple[Path, ...]:
    """What an isolating sandbox must show read-only for `program` to start: nothing
    for a system program, else the installation it belongs to (a virtualenv's
    `bin/python` needs the virtualenv and the interpreter it was made from)."""
    found = program if os.sep in program else shutil.which(program, path=env.get("PATH"))
    if found is None or not Path(found).is_absolute():
        return ()
    paths = []
    for path in (Path(found), Path(found).resolve()):
        prefix = path.parent.parent
        if path.parts[1:2] not in (("usr",), ("bin",), ("sbin",), ("lib",)) and prefix != Path("/"):
            paths.append(prefix)
    return tuple(dict.fromkeys(paths))


def _write_log(report: Report, path: Path) -> Any:
    from ci_evals.results.criteria import RawOutput  # noqa: PLC0415

    lines = [f"MCP {report.protocol}, score {report.score:.1f}"]
    for sub in report.subtests:
        mark = "pass" if sub.passed else "FAIL"
        kind = "required" if sub.required else "advisory"
        lines.append(f"\n== {sub.id}: {mark} ({kind}): {sub.reason}")
        if sub.stderr.strip():
            lines.append("-- stderr:\n" + sub.stderr.rstrip())
    data = ("\n".join(lines) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return RawOutput(path=str(path), sha256=hashlib.sha256(data).hexdigest(), size=len(data))


# -- loading -------------------------------------------------------------------


class _McpKind:
    name = "mcp"

    def available(self) -> str | None:
        return None  # the run's sandbox says whether the server can start

    def load(self, value: LocatedNode, ctx: LoadContext) -> tuple[McpGrader, ...]:
        graders: list[McpGrader] = []
        seen: dict[str, int] = {}
        for item in value.sequence(allow_empty=False):
            grader = load_mcp_grader(item)
            if grader.id in seen:
                raise item.error(
                    f"duplicate mcp grader id {grader.id!r} (also line {seen[grader.id]})"
                )
            seen[grader.id] = item.line
            graders.append(grader)
        return tuple(graders)


KIND = _McpKind()


def load_mcp_grader(item: LocatedNode) -> McpGrader:
    keys = item.mapping(GRADER_KEYS, required=("id", "command"), what="mcp grader")
    command = keys["command"]
    if not isinstance(command.node, yaml.SequenceNode):
        raise command.error("command must be a list of arguments", hint="e.g. [python3, server.py]")
    protocol = revisions.DEFAULT
    if "protocol" in keys:
        protocol = _revision(keys["protocol"])
    advisory = set(DEFAULT_ADVISORY)
    if "tool" in keys and "arguments" in keys:  # a call named must succeed
        advisory.discard(subtests.TOOLS_CALL_SUCCESS)
    for key, add in (("advisory", True), ("required", False)):
        for name in _subtest_ids(keys[key]) if key in keys else ():
            (advisory.add if add else advisory.discard)(name)
    weights = {}
    if "weights" in keys:
        for name, weight in (
            keys["weights"].mapping(subtests.ALL_IDS, what="mapping of sub-test: weight").items()
        ):
            weights[name] = weight.as_number(minimum=0.0)
    rule = "error-or-isError"
    if "unknown_tool" in keys:
        rule = keys["unknown_tool"].as_str()
        if rule not in UNKNOWN_TOOL_RULES:
            raise keys["unknown_tool"].error(f"must be one of {', '.join(UNKNOWN_TOOL_RULES)}")
    arguments = None
    if "arguments" in keys:
        arguments = keys["arguments"].plain()
        if not isinstance(arguments, dict):
            raise keys["arguments"].error("must be a mapping (the tool's arguments)")
    return McpGrader(
        id=keys["id"].as_str(),
        argv=tuple(command.as_str_list(allow_empty=False)),
        cwd=inside_folder(keys["cwd"]) if "cwd" in keys else ".",
        protocol=protocol,
        timeout_s=keys["timeout_s"].as_number(minimum=0.001)
        if "timeout_s" in keys
        else DEFAULT_TIMEOUT_S,
        advisory=frozenset(advisory),
        weights=MappingProxyType(weights),
        unknown_tool_is_error_result=rule == "error-or-isError",
        tool=keys["tool"].as_str() if "tool" in keys else None,
        arguments=MappingProxyType(arguments) if arguments is not None else None,
        explicit="protocol" in keys,
    )


def _revision(value: LocatedNode) -> str:
    plain = value.plain()
    # `protocol: 2025-11-25` unquoted is a YAML date.
    text = plain.isoformat() if isinstance(plain, datetime.date) else plain
    if not isinstance(text, str) or text not in revisions.KNOWN:
        raise value.error(
            f"unknown MCP revision {plain!r}", hint=f"known: {', '.join(revisions.KNOWN)}"
        )
    return text


def _subtest_ids(value: LocatedNode) -> list[str]:
    names = value.as_str_list()
    for index, name in enumerate(names):
        if name not in subtests.ALL_IDS:
            raise value.child(value.node.value[index], index).error(
                f"unknown sub-test {name!r}", hint=f"known: {', '.join(subtests.ALL_IDS)}"
            )
    return names
