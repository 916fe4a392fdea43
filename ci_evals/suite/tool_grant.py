"""The operator's tool grant of a run of `claude plugin eval` cases, as the CLI applies it.

`claude plugin eval --allow-tools LIST` (here `plugin_evals.allow_tools:` and
`ci-evals run --allow-tools LIST`) decides what the model is offered. Read from
the bundled CLI (2.1.337) and checked by running it against a recording stub
(tests/suite/test_plugin_evals_grant.py): the read-only set (`READ_ONLY`, of
which the CLI's `-p` child offers `OFFERED`) always; every other tool only when
the operator grants it, then in every case of the run (a case's `allowed_tools`
never narrows); Write, Edit and NotebookEdit as one family; mocked servers'
tools (`Grant.with_mocked`); `disallowed_tools` removing last. The child runs
with `--permission-mode dontAsk`: a tool withheld or a call no rule allows is a
tool error the model sees.

Inside ci-evals the agent still runs in the sandbox; the grant only decides
what the model is offered and allowed (`StageTools.offered`, `.allowed`).
docs/plugin-evals.md (*Tools: the operator's grant*).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ci_evals.agents import StageTools
from ci_evals.errors import UserError
from ci_evals.grading.kinds.plugin_eval import (
    CaseGrader,
    FileExists,
    FileTarget,
    Llm,
    Regex,
    ToolOrder,
    ToolUsed,
)

# The CLI's read-only set (its `zi`), and ToolSearch, which it never withholds.
READ_ONLY = (
    "Read",
    "Glob",
    "Grep",
    "NotebookRead",
    "Skill",
    "AskUserQuestion",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskUpdate",
    "TaskStop",
    "Agent",
    "TodoWrite",
    "ToolSearch",
)
# What of it the CLI's child (`claude -p`) has, and so offers: not the task list's
# TaskCreate/Get/List/Update, which the SDK's streaming mode would add (deferred).
OFFERED = tuple(
    t for t in READ_ONLY if t not in ("TaskCreate", "TaskGet", "TaskList", "TaskUpdate")
)
EDIT_FAMILY = ("Write", "Edit", "NotebookEdit")
SHELL = ("Bash", "PowerShell")
# What can create a file a `file_exists` grader looks for (the CLI's `nc`).
CREATES_FILES = (*EDIT_FAMILY, *SHELL)
# Never available inside an eval run, whatever the grant (the CLI refuses the flag).
NEVER = ("Monitor", "EnterWorktree", "ExitWorktree")
MCP_PREFIX = "mcp__"
# `Name` or `Name(rule content)`, as a permission rule is written.
_ENTRY = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)(?:\((.*)\))?", re.DOTALL)


@dataclass(frozen=True)
class Grant:
    """What the operator grants every case of the run, and the mocked tools."""

    tools: tuple[str, ...] = ()  # permission rules as written: `Write`, `Bash(npm test:*)`
    mocked: tuple[str, ...] = ()  # the MCP tools of mocked servers: always granted

    def with_mocked(self, names: Iterable[str]) -> Grant:
        """This grant plus the tools of the case's mocked MCP servers (granted, as the
        CLI grants them: the mocks' hook)."""
        return Grant(self.tools, tuple(dict.fromkeys((*self.mocked, *names))))

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.tools, *self.mocked)))

    @property
    def names(self) -> frozenset[str]:
        """The tool names granted (a rule's name; a family member brings the family)."""
        names = {tool_name(rule) for rule in self.rules}
        if names & set(EDIT_FAMILY):
            names |= set(EDIT_FAMILY)
        return frozenset(names)


def tool_name(rule: str) -> str:
    """`Bash(npm test:*)` -> `Bash`."""
    return rule.split("(", 1)[0].strip()


def split_entries(text: str) -> list[str]:
    """A list as `--allow-tools` takes it: commas or spaces between entries, none
    inside a rule's parentheses (`Bash(git commit -m "a, b")` is one)."""
    entries: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (char == "," or char.isspace()):
            if current:
                entries.append(current)
            current = ""
            continue
        current += char
    if current:
        entries.append(current)
    return entries


def entry_problem(entry: str) -> str | None:
    """Why the CLI refuses a grant entry (None: it takes it)."""
    found = _ENTRY.fullmatch(entry.strip())
    if found is None:
        return "malformed (write Tool or Tool(rule), e.g. Write or Bash(npm test:*))"
    if found.group(1) in NEVER:
        return f"{found.group(1)} is never available in an evaluation"
    if found.group(2) is not None and found.group(1).startswith(MCP_PREFIX):
        return "an mcp__ tool takes no rule in parentheses"
    return None


def check_entries(entries: Sequence[str], where: str) -> tuple[str, ...]:
    """The grant's entries, each one the CLI takes; else one `UserError` naming them."""
    refused = [f"{e} ({problem})" for e in entries if (problem := entry_problem(e)) is not None]
    if refused:
        raise UserError(
            f"refused {len(refused)} entr{'y' if len(refused) == 1 else 'ies'}: "
            + "; ".join(refused),
            field=where,
            hint="as claude plugin eval --allow-tools: Write, Edit, Bash, WebFetch, mcp__*",
        )
    return tuple(dict.fromkeys(e.strip() for e in entries))


# -- one case ------------------------------------------------------------------------


class GrantedCase(Protocol):
    """What the grant reads of a case (`suite.plugin_evals.Case`)."""

    @property
    def name(self) -> str: ...

    @property
    def allowed_tools(self) -> tuple[str, ...]: ...

    @property
    def disallowed_tools(self) -> tuple[str, ...]: ...

    @property
    def append_system_prompt(self) -> str | None: ...

    @property
    def graders(self) -> tuple[CaseGrader, ...]: ...


def case_grant(case: GrantedCase, grant: Grant) -> tuple[StageTools, list[str]]:
    """A case unit's tools under `grant`, and the CLI's lines about it: the entries of
    its `allowed_tools` not granted, and each grader that cannot pass."""
    notes = []
    missing = not_granted(case.allowed_tools, grant)
    if missing:
        notes.append(
            f"{case.name}: not granted (missing --allow-tools grant, or a malformed entry): "
            + ", ".join(missing)
        )
    notes += [
        f'case "{case.name}": {line}'
        for line in advisories(case.graders, grant, case.disallowed_tools)
    ]
    tools = case_tools(grant, case.disallowed_tools, case.append_system_prompt)
    return tools, notes


def case_tools(
    grant: Grant,
    disallowed: Sequence[str],
    append_system_prompt: str | None,
) -> StageTools:
    """What a case unit's agent is offered and allowed under `grant`."""
    names = grant.names
    built_in = [n for n in names if not n.startswith(MCP_PREFIX)]
    removed = set(disallowed)
    offered = tuple(n for n in dict.fromkeys((*OFFERED, *sorted(built_in))) if n not in removed)
    allowed = [r for r in grant.rules if tool_name(r) not in removed]
    # A Write grant writes with Edit too (the CLI grants the family's Edit rule).
    if any(r in EDIT_FAMILY for r in allowed) and "Edit" not in removed:
        allowed.append("Edit")
    return StageTools(
        disallowed=tuple(disallowed),
        claude_code_prompt=True,
        append_system_prompt=append_system_prompt,
        offered=offered,
        allowed=tuple(dict.fromkeys(allowed)),
    )


def not_granted(allowed_tools: Sequence[str], grant: Grant) -> list[str]:
    """The entries of a case's `allowed_tools` the run does not grant (the CLI's line:
    `not granted (missing --allow-tools grant, or a malformed entry)`): the read-only
    set is always granted; any other entry needs a grant of its tool."""
    names = grant.names
    return [
        entry
        for entry in allowed_tools
        if entry_problem(entry) is not None
        or (tool_name(entry) not in READ_ONLY and tool_name(entry) not in names)
    ]


def advisories(graders: Sequence[CaseGrader], grant: Grant, disallowed: Sequence[str]) -> list[str]:
    """The CLI's `cannot pass` advisories for a case under `grant`: a grader of a
    created file with no tool that can create one, a grader counting calls of a tool
    the run withholds."""
    names = grant.names - set(disallowed)
    found: list[str] = []
    creators = [n for n in names if n in CREATES_FILES or n.startswith(MCP_PREFIX)]
    if not creators:
        blocked = [t for t in disallowed if t in CREATES_FILES]
        for grader in graders:
            if not _checks_created_file(grader):
                continue
            if blocked:
                found.append(
                    f'grader "{grader.name}" cannot pass: it checks a file the run creates, '
                    "but no tool the run may use can create one (a plugin hook still could), "
                    f"and the case's disallowed_tools or --disallow-tools lists "
                    f"{', '.join(blocked)} \u2014 take one off that list and grant it "
                    "(allowed_tools and --allow-tools), or drop the grader"
                )
            else:
                found.append(
                    f'grader "{grader.name}" cannot pass with the granted tools: it checks a '
                    "file the run creates, but no tool the run may use can create one (a "
                    "plugin hook still could; a skill's own allowed-tools does not count "
                    "inside a run) \u2014 add Write (or Edit / Bash) to the case's "
                    "allowed_tools and grant it with --allow-tools"
                )
    for counted, tool in _counted_calls(graders):
        if tool in disallowed:
            found.append(
                f'grader "{counted}" cannot pass: it needs a {tool} call in the trace, but '
                f"{tool} is in the case's disallowed_tools or --disallow-tools, so no call "
                "can occur \u2014 change that list (and grant the tool if it is not "
                "granted), or drop the grader"
            )
        elif withheld(tool, names):
            fix = (
                f"{tool} is never available inside an eval run, so drop the grader"
                if tool in NEVER
                else f"add {tool} to the case's allowed_tools and grant it with "
                f"--allow-tools {tool}"
            )
            found.append(
                f'grader "{counted}" cannot pass with the granted tools: it needs a {tool} '
                f"call in the trace, but {tool} is not granted, so the run withholds it "
                f"from the model and no call (not even a refused one) can occur \u2014 {fix}"
            )
    return found


def withheld(tool: str, granted: frozenset[str]) -> bool:
    """Whether the run keeps a built-in tool from the model (an MCP tool, or a name
    the CLI does not know, is not withheld: it is refused when called)."""
    if tool.startswith(MCP_PREFIX) or tool in READ_ONLY or tool in granted:
        return False
    return tool in KNOWN_GATED


# The CLI's own tools outside the read-only set (2.1.337's list, in a `-p` child).
KNOWN_GATED = frozenset(
    {
        *EDIT_FAMILY,
        *SHELL,
        *NEVER,
        "WebFetch",
        "WebSearch",
        "ListAgents",
        "ReportFindings",
        "ScheduleWakeup",
        "Workflow",
        "CronCreate",
        "CronDelete",
        "CronList",
        "SendMessage",
        "ExitPlanMode",
        "EnterPlanMode",
        "KillShell",
        "BashOutput",
    }
)


def _checks_created_file(grader: CaseGrader) -> bool:
    """The CLI's `jm`: a grader that only a file the run created can pass."""
    if isinstance(grader, FileExists):
        return grader.exists
    if isinstance(grader, Regex):
        if isinstance(grader.target, FileTarget):
            return True
        return grader.target == "files" and grader.match not in ("not_contains", 0)
    if isinstance(grader, Llm):
        return isinstance(grader.focus, FileTarget)
    return False


def _counted_calls(graders: Sequence[CaseGrader]) -> list[tuple[str, str]]:
    """(grader, tool) for each tool a `tool_used` (min >= 1) or `tool_order` needs."""
    found: list[tuple[str, str]] = []
    for grader in graders:
        if isinstance(grader, ToolUsed) and grader.min >= 1:
            found.append((grader.name, grader.ref.tool))
        elif isinstance(grader, ToolOrder):
            for tool in dict.fromkeys((grader.before.tool, grader.after.tool)):
                found.append((grader.name, tool))
    return found
