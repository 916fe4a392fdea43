"""`ci-evals init` on a plugin that has `claude plugin eval` cases: a suite that runs
them (`plugin_evals:`), and a stub script under which each case runs green.

The cases are read as `ci-evals run` reads them (`suite.plugin_evals`), so a case it
would refuse refuses the draft, at its `file:line:col`. Each case gets a rule
matching its prompt whose turns satisfy its graders: the tool calls its
`tool_used` and `tool_order` graders count (with an input their `input_match`
finds), the files its `file_exists` and file targets look for (with content
their patterns find), and a last message holding a sample of each pattern on
it; its `llm` and `baseline` judges get a rule answering PASS, before the
agents' rules (a judge's prompt holds the agent's words). Samples are drawn from
each pattern and checked with the grader's own matching; what the draft cannot
satisfy is named (`CaseSuiteDraft.unmet`), never silently left failing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ci_evals.fs.copyable import confinement
from ci_evals.grading.kinds.js_regex import JsRegex, JsRegexError
from ci_evals.grading.kinds.plugin_eval import (
    Baseline,
    CaseGrader,
    FileExists,
    FileTarget,
    Llm,
    Regex,
    ToolOrder,
    ToolRef,
    ToolUsed,
    compact_json,
)
from ci_evals.suite.plugin_evals import Case, confined_evals, discover, eval_dir, load_case
from ci_evals.suite.plugin_source import PluginSource
from ci_evals.suite.tool_grant import READ_ONLY, entry_problem

JUDGE_SYSTEM = "evaluation judge"  # in the CLI's judge system prompt, never an agent's
_PROMPT_MATCH = 300  # characters of a case's prompt its rule matches on
_DONE = "Done."


@dataclass(frozen=True)
class CaseSuiteDraft:
    """The suite and stub script for a plugin's cases."""

    evals: Path  # the eval folder
    cases: tuple[Case, ...]
    stub: dict[str, Any]
    unmet: tuple[str, ...] = ()  # "case: grader: why", what the stub cannot satisfy
    # The tools the stub calls that the run must grant (`plugin_evals.allow_tools`,
    # `suite.tool_grant`): without them its calls are refused, as in the CLI.
    grants: tuple[str, ...] = ()


def find_cases(source: PluginSource) -> tuple[Path, list[Path]]:
    """The plugin's eval folder (the manifest's `experimental.evals`, else `evals/`)
    and its case folders, as `claude plugin eval` finds them (none: no folder)."""
    warnings: list[str] = []
    within = confinement(source.path)
    folder = eval_dir(source.path, source.manifest, warnings, within=within)
    if not folder.is_dir():
        return folder, []
    confined_evals(folder, within)
    return folder, discover(folder, warnings, within=within)


def draft(
    folder: Path,
    found: Sequence[Path],
    plugin_dir: Path | None = None,
    *,
    fired: Sequence[str] = (),
    repeat_last: bool = False,
) -> CaseSuiteDraft:
    """Read every case (of the plugin in `plugin_dir`; a `UserError` at its place for
    one `run` would refuse) and script the stub for them. `fired`: the trace lines
    every run shows whatever the model does (the plugin's SessionStart hooks', as
    `draft_case_files.fired_lines` gives them); `repeat_last`: the plugin has a Stop
    hook that may feed a prompt back, which each rule's last turn answers."""
    cases = tuple(load_case(path, [], plugin_dir=plugin_dir) for path in found)
    judges: dict[str, dict[str, Any]] = {}
    subagents: dict[str, dict[str, Any]] = {}
    agents: list[dict[str, Any]] = []
    unmet: list[str] = []
    called: set[str] = set()
    for case in cases:
        for grader in case.graders:
            if isinstance(grader, Llm | Baseline):
                line = _first_line(grader.criteria)
                judges.setdefault(line, _judge_rule(len(judges) + 1, line))
        rule, missed = _agent_rule(case, tuple(fired))
        if repeat_last:
            rule = {"name": rule["name"], "match": rule["match"], "repeat_last": True} | rule
        calls = [call for turn in rule["turns"] for call in turn.get("tools", ())]
        called |= {_called(call) for call in calls}
        for call in calls:  # a subagent it launches asks the model too: answered
            if "agent" in call:
                name = call["agent"]["name"]
                subagents.setdefault(name, _subagent_rule(len(subagents) + 1, name))
        agents.append(rule)
        unmet += [f"{case.name}: {why}" for why in missed]
    grants = tuple(sorted(t for t in called if t not in READ_ONLY and entry_problem(t) is None))
    # Judges first (a judge's prompt holds the agent's words), then subagents (a
    # subagent's prompt may hold its case's), then the cases.
    rules = [*judges.values(), *subagents.values(), *agents]
    return CaseSuiteDraft(folder, cases, {"rules": rules}, tuple(unmet), grants)


def _called(call: Mapping[str, Any]) -> str:
    """The tool a stub script's call calls (`_call`)."""
    if "tool" in call:
        return str(call["tool"]["name"])
    return {"write": "Write", "agent": "Agent", "skill": "Skill"}.get(next(iter(call)), "Read")


def render_suite(
    plugin_line: str, plugin_name: str, evals_shown: str, grants: Sequence[str] = ()
) -> str:
    keys = "cases:, tags:, threshold:, judge_model:, allow_tools:"
    key = f"plugin_evals: {{}}                # every case; {keys}\n"
    if grants:
        key = (
            f"plugin_evals:                   # every case; {keys}\n"
            f"  allow_tools: [{', '.join(grants)}]   # granted to every case, as --allow-tools: "
            "what the cases' calls and commands need\n"
        )
    return (
        f"# Drafted by `ci-evals init` from the `claude plugin eval` cases of {plugin_name} "
        f"({evals_shown}):\n"
        "# each case runs as a unit, its own `runs` times. Format: docs/plugin-evals.md.\n"
        "version: 1\n"
        f"{plugin_line}\n"
        "budget_usd: 5.0                 # the run's budget on the real model\n" + key
    )


def render_stub(result: CaseSuiteDraft) -> str:
    header = (
        "# Drafted by `ci-evals init`: one rule per case, its turns satisfying the case's\n"
        "# graders on the stub model (a wiring check, not a verdict); judges answer PASS.\n"
        "# Format: docs/stub-model.md.\n"
    )
    unmet = "".join(f"# NOT SATISFIED: {line}\n" for line in result.unmet)
    body = yaml.safe_dump(result.stub, sort_keys=False, allow_unicode=True, width=1 << 16)
    return header + unmet + body


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)[:200]


def _subagent_rule(number: int, name: str) -> dict[str, Any]:
    return {
        "name": f"subagent-{number}",
        "match": {"agent": name},
        "turns": [{"text": f"Findings of {name} (stub)."}],
    }


def _judge_rule(number: int, criterion: str) -> dict[str, Any]:
    return {
        "name": f"judge-{number}",
        "match": {"system_contains": JUDGE_SYSTEM, "prompt_contains": criterion},
        "turns": [{"text": "PASS"}],
    }


# -- one case's turns -------------------------------------------------------------------


@dataclass
class _CasePlan:
    """What the case's run must do: tool calls in order, files, the last message."""

    calls: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (tool, input)
    files: dict[str, list[str]] = field(default_factory=dict)  # path -> content lines
    text: list[str] = field(default_factory=list)
    sep: str = "\n"  # between the last message's samples
    fired: tuple[str, ...] = ()  # trace lines every run shows (`draft`'s `fired`)


def _agent_rule(case: Case, fired: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[str]]:
    plan, missed = _planned(case, fired)
    calls = [_call(tool, given) for tool, given in plan.calls]
    # What the run writes and says first (a pattern's count then sees the rest), the
    # files written before any tool call (a Read may read them), calls last.
    # A turn per call keeps them in order (one turn's calls may run concurrently);
    # all in one turn when that would pass the case's max_turns.
    turns: list[dict[str, Any]] = (
        [{"tools": [call]} for call in calls]
        if len(calls) < case.max_turns
        else ([{"tools": calls}] if calls else [])
    )
    turns.append({"text": _last_text(plan)})
    prompt = case.prompt.strip()
    first = prompt.split(maxsplit=1)[0] if prompt else ""
    if first.startswith("/") and ":" in first:  # a plugin command: the stub sees its expansion
        match = {"command": first[1:]}
    else:
        match = {"prompt_contains": prompt[:_PROMPT_MATCH]}
    return {"name": f"case-{case.unit_id}", "match": match, "turns": turns}, missed


def _planned(case: Case, fired: tuple[str, ...] = ()) -> tuple[_CasePlan, list[str]]:
    """What the case's run does for its graders, and what of them it cannot satisfy."""
    plan = _CasePlan(fired=fired)
    missed: list[str] = []
    # What the run writes and says first (a pattern's count then sees the rest), the
    # files written before any tool call (a Read may read them), calls last.
    regexes = [g for g in case.graders if isinstance(g, Regex) and g.target != "trace"]
    for regex in sorted(regexes, key=lambda g: isinstance(g.match, int)):
        missed += _why(regex, _plan_regex(regex, plan))
    for grader in case.graders:  # a file the run writes anyway may be the one it asks for
        if not isinstance(grader, FileExists) or not grader.exists:
            continue
        if not any(grader.glob.fullmatch(path) for path in plan.files):
            plan.files.setdefault(_glob_path(grader.path), [])
    plan.calls += [("Write", {"file_path": path}) for path in plan.files]
    for grader in case.graders:
        if isinstance(grader, ToolUsed):
            missed += _why(grader, _plan_used(grader, plan))
    for grader in case.graders:
        if isinstance(grader, ToolOrder):
            missed += _why(grader, _plan_order(grader, plan))
    missed += _plan_trace(case, plan)
    for tool, given in plan.calls:  # a file's content once every grader has added to it
        if tool == "Write":
            given["content"] = _content(plan, given["file_path"])
    # Samples on lines of their own, else on one line (a `count:0` of line breaks).
    for sep in ("\n", " "):
        plan.sep = sep
        unmet = _unmet(case.graders, plan)
        if not unmet:
            break
    said = {line.split(":", 1)[0] for line in missed}  # a grader said once
    return plan, missed + [line for line in unmet if line.split(":", 1)[0] not in said]


def _plan_trace(case: Case, plan: _CasePlan) -> list[str]:
    """A trace pattern the planned calls and words do not show yet: said in the last
    message (the trace holds it)."""
    missed: list[str] = []
    for regex in (g for g in case.graders if isinstance(g, Regex) and g.target == "trace"):
        if not (regex.match == "contains" and regex.pattern.test(_trace(plan))):
            missed += _why(regex, _plan_regex(regex, plan))
    return missed


def _why(grader: CaseGrader, why: str) -> list[str]:
    return [f"{grader.name}: {why}"] if why else []


def _plan_regex(grader: Regex, plan: _CasePlan) -> str:
    if grader.match == "not_contains":
        return ""
    if grader.target == "mock_calls":  # what the mocks answer: the stub does not draft it
        return "the calls of mocked tools are not drafted (write those turns by hand)"
    sample = sample_of(grader.pattern)
    if sample is None:
        return f"no text found that /{grader.pattern.source}/ matches"
    target = grader.target
    if isinstance(target, FileTarget):
        lines = plan.files.setdefault(target.path, [])
    elif target == "files":
        lines = []
    else:  # last_message, trace: the trace holds the last message
        lines = plan.text
    times = 1
    if isinstance(grader.match, int):  # as many more as the others' samples leave to find
        have = "\n".join(plan.files if target == "files" else lines)
        times = max(0, grader.match - grader.pattern.count(have))
    if target == "files":
        for i in range(times):
            plan.files.setdefault(_as_path(sample, i), [])
    else:
        lines.extend([sample] * times)
    return ""


def _plan_used(grader: ToolUsed, plan: _CasePlan) -> str:
    call = _call_for(grader.ref, plan)
    if call is None:
        return f"no input found that {grader.ref.tool}'s input_match matches"
    have = sum(_is(tool, given, grader.ref) for tool, given in plan.calls)
    for _ in range(max(0, grader.min - have)):
        _add_call(plan, call, len(plan.calls))
    return ""


def _plan_order(grader: ToolOrder, plan: _CasePlan) -> str:
    """A call matching `before`, then one matching `after`: reusing what is planned."""
    before, after = _call_for(grader.before, plan), _call_for(grader.after, plan)
    if before is None or after is None:
        ref = grader.before if before is None else grader.after
        return f"no input found that {ref.tool}'s input_match matches"
    b = _first(plan.calls, grader.before)
    if b == -1:
        _add_call(plan, before, 0)
        b = 0
    a = _first(plan.calls, grader.after)
    if a == -1:
        _add_call(plan, after, len(plan.calls))
    elif a <= b:
        _add_call(plan, before, a)
    return ""


# The input key a tool's sample goes in (the CLI refuses a call whose input does not
# fit the tool, but the call is in the trace: `tool_used` counts it, as the CLI does).
_INPUT_KEY = {"Read": "file_path", "Skill": "skill", "Bash": "command", "Glob": "pattern"}
_INPUT_KEY |= {"Grep": "pattern", "WebFetch": "url", "WebSearch": "query", "Edit": "file_path"}
_INPUT_KEY |= {"Agent": "subagent_type"}
_PATH_TOOLS = frozenset({"Write", "Read", "Edit"})


def _call_for(ref: ToolRef, plan: _CasePlan) -> tuple[str, dict[str, str]] | None:
    """A call `ref` matches: on a file the run writes when one fits, else on a sample."""
    key = _INPUT_KEY.get(ref.tool, "file_path" if ref.tool == "Write" else "input")
    if ref.tool in _PATH_TOOLS:
        for path in plan.files:
            if ref.input_match is None or ref.input_match.test(compact_json({key: path})):
                return ref.tool, {key: path}
    value = "x" if ref.input_match is None else sample_of(ref.input_match)
    if value is None:
        return None
    return ref.tool, {key: _as_path(value, 0) if ref.tool in _PATH_TOOLS else value}


def _add_call(plan: _CasePlan, call: tuple[str, dict[str, str]], at: int) -> None:
    tool, given = call
    plan.calls.insert(at, (tool, dict(given)))
    if tool == "Write":  # the file it creates is one of the run's
        plan.files.setdefault(given["file_path"], [])


def _unmet(graders: Sequence[CaseGrader], plan: _CasePlan) -> list[str]:
    """The graders the planned run would fail, by their own matching (a trace is
    judged by the last message and the calls' inputs, as the CLI's JSON holds them)."""
    text = _last_text(plan)
    files = "\n".join(sorted(plan.files))
    trace = _trace(plan)
    missed = []
    for grader in graders:
        ok = True
        try:
            if isinstance(grader, Regex):
                target = grader.target
                subject = (
                    _content(plan, target.path)
                    if isinstance(target, FileTarget)
                    else {"last_message": text, "files": files, "trace": trace}.get(target, "")
                )
                if grader.match == "contains":
                    ok = grader.pattern.test(subject)
                elif grader.match == "not_contains":
                    ok = not grader.pattern.test(subject)
                else:
                    ok = grader.pattern.count(subject) == grader.match
                if isinstance(target, FileTarget) and target.path not in plan.files:
                    ok = False
            elif isinstance(grader, FileExists):
                ok = any(grader.glob.fullmatch(path) for path in plan.files) is grader.exists
            elif isinstance(grader, ToolUsed):
                count = sum(_is(tool, given, grader.ref) for tool, given in plan.calls)
                ok = grader.min <= count and (grader.max is None or count <= grader.max)
            elif isinstance(grader, ToolOrder):
                before = _first(plan.calls, grader.before)
                after = _first(plan.calls, grader.after)
                ok = -1 < before < after
        except JsRegexError as exc:
            ok, grader_why = False, str(exc)
            missed.append(f"{grader.name}: {grader_why}")
            continue
        if not ok:
            missed.append(f"{grader.name}: the drafted run would fail it; script it by hand")
    return missed


def _trace(plan: _CasePlan) -> str:
    """The planned run's trace, near enough: its calls' and last message's content
    blocks as the CLI's stream-json lines hold them, and the CLI's answer to a
    Skill or Agent call naming a part (the plugin's: it loads it)."""
    blocks: list[object] = []
    for tool, given in plan.calls:
        blocks.append({"type": "tool_use", "id": "toolu_stub", "name": tool, "input": dict(given)})
        if tool == "Skill" and "skill" in given:
            answer = {"type": "tool_result", "content": f"Launching skill: {given['skill']}"}
            blocks.append(answer)
        elif tool == "Agent" and "subagent_type" in given:
            blocks.append({"status": "completed", "agentType": given["subagent_type"]})
    blocks.append({"type": "text", "text": _last_text(plan)})
    return "\n".join([*plan.fired, *(compact_json(block) for block in blocks)])


def _is(tool: str, given: Mapping[str, str], ref: ToolRef) -> bool:
    if tool != ref.tool:
        return False
    return ref.input_match is None or ref.input_match.test(compact_json(given))


def _first(calls: Sequence[tuple[str, Mapping[str, str]]], ref: ToolRef) -> int:
    return next((i for i, (tool, given) in enumerate(calls) if _is(tool, given, ref)), -1)


def _content(plan: _CasePlan, path: str) -> str:
    lines = plan.files.get(path, [])
    return "\n".join(lines) + "\n" if lines else "drafted by ci-evals init\n"


def _last_text(plan: _CasePlan) -> str:
    return plan.sep.join(plan.text) if plan.text else _DONE


def _call(tool: str, given: Mapping[str, str]) -> dict[str, Any]:
    """The stub script's call: `write` and `read` (the stub makes their paths absolute,
    as a model's are), else any tool with its input as planned."""
    if tool == "Write":
        return {"write": {"path": given["file_path"], "content": given["content"]}}
    if tool == "Read":
        return {"read": given["file_path"]}
    if tool == "Agent" and set(given) == {"subagent_type"}:  # a launch the CLI runs
        name = given["subagent_type"]
        return {"agent": {"name": name, "prompt": f"Placeholder task for {name} (stub)."}}
    return {"tool": {"name": tool, "input": dict(given)}}


def _glob_path(glob: str) -> str:
    """A relative path the CLI's glob matches: `**/` as no folder, `*` and `?` as letters."""
    path = glob.replace("**/", "").replace("**", "x").replace("*", "out").replace("?", "x")
    return path.lstrip("/") or "out"


def _as_path(sample: str, index: int) -> str:
    """A file name holding `sample` (the `files` target lists created paths)."""
    clean = "".join(c if c.isalnum() or c in "._-/" else "-" for c in sample).strip("/")
    clean = "/".join(part for part in clean.split("/") if part not in ("", ".", ".."))
    name = clean or "out.txt"
    return name if index == 0 else f"{index}-{name}"


# -- a text a pattern matches -----------------------------------------------------------

# Python's own parser of `re` patterns: a JavaScript pattern is translated to one
# (`js_regex`) that matches the same strings, so a string drawn from its parse tree
# is one the grader finds. Private and unstubbed, hence looked up, and typed Any.
_PARSER: Any = importlib.import_module("re._parser")
_CANDIDATES = "0_-.:/ aAx"  # non-letters first: a negated class under flag i


def sample_of(pattern: JsRegex) -> str | None:
    """A short text `pattern` finds (checked with the pattern itself), or None."""
    try:
        tree = _PARSER.parse(pattern.python.pattern, pattern.python.flags)
        text = _draw(list(tree))
    except (_Unsupported, RecursionError):
        return None
    try:
        return text if pattern.test(text) else None
    except JsRegexError:
        return None


class _Unsupported(Exception):
    pass


def _draw(items: Sequence[tuple[Any, Any]]) -> str:
    return "".join(_one(op, arg) for op, arg in items)


def _one(op: Any, arg: Any) -> str:  # noqa: PLR0911 - one case per node of the parse tree
    name = str(op)
    if name == "LITERAL":
        return chr(arg)
    if name in ("ANY", "NOT_LITERAL"):
        return next(c for c in _CANDIDATES if name == "ANY" or ord(c) != arg)
    if name == "IN":
        return _in(arg)
    if name == "BRANCH":
        return _draw(list(arg[1][0]))
    if name == "SUBPATTERN":
        return _draw(list(arg[-1]))
    if name == "ATOMIC_GROUP":
        return _draw(list(arg))
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, _, item = arg
        return _draw(list(item)) * int(low)
    if name in ("AT", "ASSERT", "ASSERT_NOT"):
        return ""  # anchors and lookarounds: the drawn text is checked afterwards
    raise _Unsupported(name)


def _in(items: Sequence[tuple[Any, Any]]) -> str:
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    members = items[1:] if negate else items
    for c in _CANDIDATES:
        if _member(c, members) is not negate:
            return c
    if not negate and members:
        op, arg = members[0]
        if str(op) == "LITERAL":
            return chr(arg)
        if str(op) == "RANGE":
            return chr(arg[0])
    raise _Unsupported("IN")


_CATEGORY: dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
}


def _member(c: str, members: Sequence[tuple[Any, Any]]) -> bool:
    for op, arg in members:
        kind = str(op)
        if kind == "LITERAL" and ord(c) == arg:
            return True
        if kind == "RANGE" and arg[0] <= ord(c) <= arg[1]:
            return True
        if kind == "CATEGORY" and str(arg) in _CATEGORY and _CATEGORY[str(arg)](c):
            return True
    return False
