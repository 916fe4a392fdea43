"""A plugin's `claude plugin eval` cases, found and read as the CLI reads them.

The suite key `plugin_evals:` names the eval folder (default: the manifest's
`experimental.evals`, else `evals/`); every case in it becomes a case unit of
the run. Discovery, mocks, `prompt.md` and `graders/*.md`, `case.yaml` schema 1.x,
the merge of the three and the defaults follow the CLI's bundled code (2.1.337)
rule for rule, so a case means here what it means there.

Where the CLI refuses, ci-evals refuses, with one `file:line:col` line. Where
the CLI silently drops a key (an unknown key of case.yaml, its `context` or
`execution`), ci-evals warns and goes on: such a case runs there. A case's
`context:` is checked by `case_context`; what ci-evals cannot run (other
`plugins:`, `artifact_publish: true`) is refused at its key, never ignored. The
graders themselves are the `plugin_eval` grader kind's
(`grading.kinds.plugin_eval`). Each rule: docs/plugin-evals.md (*What carries
over unchanged*).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml

from ci_evals.config.front_matter import read_front_matter
from ci_evals.config.yaml_source import LocatedNode, load, loads
from ci_evals.errors import UserError
from ci_evals.fs.copyable import escape_problem, escaping_link, named_problem
from ci_evals.fs.names import as_name
from ci_evals.grading.config import StageGrading
from ci_evals.grading.kinds import plugin_eval
from ci_evals.grading.kinds.plugin_eval import CaseGrader, PluginEvalGrader, ToolUsed
from ci_evals.grading.kinds.plugin_eval_judge import DEFAULT_MODEL as DEFAULT_JUDGE_MODEL
from ci_evals.selection.units import case_glob
from ci_evals.suite.case_context import CaseContext, load_context
from ci_evals.suite.plugin_eval_mocks import MockServer, load_mocks
from ci_evals.suite.tool_grant import entry_problem
from ci_evals.text import display_path

CASE_FILE = "case.yaml"
PROMPT_FILE = "prompt.md"
GRADERS_DIR = "graders"
DEFAULT_DIR = "evals"
SKIPPED = frozenset({"node_modules", ".claude", "results", "mocks"})
MAX_DEPTH = 16
MAX_GRADER_FILES = 256
MAX_MD_BYTES = 1 << 20
SUPPORTED_MAJOR = 1
# What `claude plugin eval init --bare` writes: a suite still holding it is refused.
BLANK_PROMPT = "TODO: describe what the agent should do"
BLANK_CRITERIA = "TODO: describe what a successful response looks like"

_TOP = ("schema_version", "name", "description", "tags", "plugins", "runs", "expected_outcome")
_EXECUTION = (
    "model",
    "max_turns",
    "timeout_seconds",
    "allowed_tools",
    "disallowed_tools",
    "artifact_publish",
    "growthbook_overrides",
    "append_system_prompt",
    "env",
)
_CONTEXT = ("scaffold_script", "history_file", "add_dirs")
_SUITE_KEYS = ("dir", "cases", "tags", "threshold", "judge_model", "allow_tools")
_NOT_YET = "not supported yet by ci-evals"

Source = Literal["prose", "case_yaml", "mixed"]


@dataclass(frozen=True)
class Case:
    """One case, merged and checked: what its unit runs and grades."""

    name: str
    folder: Path
    source: Source
    prompt: str
    graders: tuple[CaseGrader, ...]
    tags: tuple[str, ...] = ()
    runs: int = 3
    max_turns: int = 10
    timeout_s: int = 300
    model: str | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    append_system_prompt: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None
    expected_outcome: str | None = None
    context: CaseContext | None = None  # None: no `context:` that does anything
    mocks: tuple[MockServer, ...] = ()  # `mocks/` of the eval folder, its groups and the case

    @property
    def single_arm(self) -> bool:
        """It runs with the plugin only, never in a without-plugin arm: a resumed
        session (`history_file`) carries the plugin into both arms, so the CLI runs
        such a case single-arm."""
        return self.context is not None and self.context.history_file is not None

    @property
    def unit_id(self) -> str:
        """Its scenario id in ci-evals: the name with what a folder name cannot hold as `-`."""
        return as_name(self.name, "case")


@dataclass(frozen=True)
class PluginEvals:
    """The suite's `plugin_evals:` key: where the cases are, which run, and the cases."""

    dir: Path
    cases: tuple[Case, ...]  # the selected ones, in the CLI's order
    globs: tuple[str, ...] = ("*",)
    tags: tuple[str, ...] = ()
    threshold: float = 1.0
    warnings: tuple[str, ...] = ()
    judge_model: str = DEFAULT_JUDGE_MODEL  # `llm` and `baseline` graders' model
    # The operator's grant to every case (`suite.tool_grant`), as `--allow-tools`, and
    # the CLI's lines about it (a tool not granted, a grader that cannot pass), which
    # `run` and `check` print before they start.
    allow_tools: tuple[str, ...] = ()
    grant_notes: tuple[str, ...] = ()


def case_grading(case: Case, judge_model: str = DEFAULT_JUDGE_MODEL) -> StageGrading:
    """The case's graders as a stage's: one `plugin_eval` grader, weights as its policy."""
    scaffolded = case.context is not None and case.context.scaffold_script is not None
    grader = PluginEvalGrader(
        case.graders, judge_model=judge_model, scaffolded=scaffolded, mocked=bool(case.mocks)
    )
    return StageGrading(graders=(grader,), scoring=grader.scoring)


# -- the suite key ----------------------------------------------------------------


def load_plugin_evals(
    value: LocatedNode,
    *,
    plugin_dir: Path,
    manifest: Mapping[str, object],
    suite_dir: Path,
    within: Path,
) -> PluginEvals:
    """The `plugin_evals:` key (a mapping, or null for every default) and its cases.

    The eval folder is a folder the suite names: relative, inside `within` (the
    suite's confinement root, `fs.copyable.confinement`), links followed, and no
    link in it leads out (`confined_evals`), before any case is read."""
    keys = {} if value.is_null() else value.mapping(_SUITE_KEYS)
    warnings: list[str] = []
    if "dir" in keys:
        written = keys["dir"].as_str()
        if (problem := named_problem(written, suite_dir, within)) is not None:
            raise keys["dir"].error(f"the eval folder {written} {problem}")
        folder = Path(os.path.normpath(suite_dir / written))
    else:
        folder = eval_dir(plugin_dir, manifest, warnings, within=within)
    if folder.is_dir():
        confined_evals(folder, within, keys.get("dir", value))
    if not folder.is_dir():
        where = keys.get("dir", value)
        raise where.error(
            f"no eval folder {display_path(folder)}",
            hint="set plugin_evals.dir, or the manifest's experimental.evals",
        )
    globs = tuple(keys["cases"].as_str_list(allow_empty=False)) if "cases" in keys else ("*",)
    tags = tuple(keys["tags"].as_str_list()) if "tags" in keys else ()
    threshold = 1.0
    if "threshold" in keys:
        threshold = keys["threshold"].as_number(minimum=0.0)
        if threshold > 1.0:
            raise keys["threshold"].error(
                f"must be from 0 to 1, got {threshold:g}", hint="as --threshold: a case's score"
            )
    judge_model = keys["judge_model"].as_str() if "judge_model" in keys else DEFAULT_JUDGE_MODEL
    allow_tools = _grant(keys["allow_tools"]) if "allow_tools" in keys else ()
    cases = [
        replace(case, mocks=load_mocks(case.folder, folder, within, warnings))
        for case in (
            load_case(path, warnings, plugin_dir=plugin_dir)
            for path in discover(folder, warnings, within=within)
        )
    ]
    selected = tuple(c for c in cases if selects(c, globs, tags))
    if not selected:
        raise value.error(
            f"no case in {display_path(folder)} matches"
            + (f" cases {list(globs)}" if "cases" in keys else "")
            + (f" tags {list(tags)}" if tags else ""),
            hint="a folder with a case.yaml or a prompt.md is a case",
        )
    _unique_ids(selected)
    return PluginEvals(
        folder, selected, globs, tags, threshold, tuple(warnings), judge_model, allow_tools
    )


def _grant(value: LocatedNode) -> tuple[str, ...]:
    """`allow_tools:` as `--allow-tools` takes it: each entry one the CLI takes."""
    entries = value.as_str_list()
    for entry in entries:
        if (problem := entry_problem(entry)) is not None:
            raise value.error(f"{entry}: {problem}", hint="as claude plugin eval --allow-tools")
    return tuple(dict.fromkeys(e.strip() for e in entries))


def confined_evals(folder: Path, within: Path, where: LocatedNode | None = None) -> None:
    """Refuse an eval folder that resolves outside `within` or into a `.git`, or holds
    a link that does (`fs.copyable.escaping_link`): its files would be read on the
    host and sent to the model (docs/plugin-evals.md, *Where the cases are*)."""
    found = escaping_link(folder, within)
    if found is None:
        return
    path, problem = found
    message = f"the eval folder {display_path(folder)}: {display_path(Path(path))} {problem}"
    raise where.error(message) if where is not None else UserError(message)


def eval_dir(
    plugin_dir: Path, manifest: Mapping[str, object], warnings: list[str], *, within: Path
) -> Path:
    """The manifest's `experimental.evals` (relative to the plugin, inside `within`),
    else `evals/`."""
    shown = display_path(plugin_dir / ".claude-plugin" / "plugin.json")
    if "evals" in manifest:
        warnings.append(
            f"{shown}: evals: ignored, as claude plugin eval ignores it "
            '(put it under "experimental": {"evals": ...})'
        )
    experimental = manifest.get("experimental")
    if isinstance(experimental, Mapping) and "evals" in experimental:
        named = experimental["evals"]
        if not isinstance(named, str) or not named.strip():
            raise UserError(
                "must be a folder relative to the plugin", file=shown, field="experimental.evals"
            )
        if (problem := named_problem(named, plugin_dir, within)) is not None:
            raise UserError(
                f"the eval folder {named} {problem}", file=shown, field="experimental.evals"
            )
        return Path(os.path.normpath(plugin_dir / named))
    return plugin_dir / DEFAULT_DIR


def selects(case: Case, globs: Sequence[str], tags: Sequence[str]) -> bool:
    """`--case GLOB` (`*` and `?` only, on the name) and `--tag` (any of them)."""
    if not any(case_glob(glob).fullmatch(case.name) for glob in globs):
        return False
    return not tags or any(tag in case.tags for tag in tags)


def _unique_ids(cases: Sequence[Case]) -> None:
    seen: dict[str, Case] = {}
    for case in cases:
        other = seen.get(case.unit_id.lower())
        if other is not None:
            raise UserError(
                f"cases {other.name!r} ({display_path(other.folder)}) and {case.name!r} "
                f"({display_path(case.folder)}) are the same unit {case.unit_id!r} in ci-evals",
                hint="give one of them another name:",
            )
        seen[case.unit_id.lower()] = case


# -- discovery ------------------------------------------------------------------


def discover(folder: Path, warnings: list[str], *, within: Path) -> list[Path]:
    """Every case folder under `folder`, sorted, as the CLI finds them; a link that
    leads out of `within` (or into a `.git`) is never followed."""
    found: list[Path] = []
    _walk(folder, 0, {os.path.realpath(folder)}, found, warnings, within)
    return sorted(found, key=str)


def _walk(  # noqa: PLR0917 - one private recursion
    folder: Path,
    depth: int,
    route: set[str],
    found: list[Path],
    warnings: list[str],
    within: Path,
) -> None:
    if depth > MAX_DEPTH:
        warnings.append(
            f"{display_path(folder)}: nested more than {MAX_DEPTH} folders below the eval "
            "folder: not scanned, as claude plugin eval does not"
        )
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        raise UserError(f"cannot list {display_path(folder)}: {exc.strerror}") from None
    if any(e.name in (CASE_FILE, PROMPT_FILE) and not e.is_dir() for e in entries):
        found.append(folder)
        return
    for entry in entries:
        if entry.name.lower() == ".git" or entry.name in SKIPPED or not entry.is_dir():
            continue
        if entry.is_symlink() and escape_problem(entry.path, within) is not None:
            warnings.append(f"{display_path(Path(entry.path))}: a link out, not followed")
            continue
        real = os.path.realpath(entry.path)
        if real in route or any(real.startswith(r + os.sep) for r in route if entry.is_symlink()):
            continue  # a link back up: the CLI does not follow it either
        _walk(Path(entry.path), depth + 1, route | {real}, found, warnings, within)


# -- one case -------------------------------------------------------------------


def load_case(folder: Path, warnings: list[str], *, plugin_dir: Path | None = None) -> Case:
    """The case in `folder` (of the plugin in `plugin_dir`): its files read, merged
    and checked."""
    yaml_path, prompt_path = folder / CASE_FILE, folder / PROMPT_FILE
    case_yaml = load(yaml_path) if yaml_path.is_file() else None
    base: dict[str, LocatedNode] = {}
    if case_yaml is not None:
        base = case_yaml.mapping(_written(case_yaml), what="mapping (case.yaml must be an object)")
    prose = _read_prose(folder, prompt_path)
    if case_yaml is None and prose is None:
        raise UserError("neither case.yaml nor prompt.md is readable", file=display_path(folder))
    top: dict[str, LocatedNode] = dict(base)
    execution: dict[str, LocatedNode] = {}
    if "execution" in base:
        execution = base["execution"].mapping(_written(base["execution"]), what="mapping")
    graders: list[tuple[LocatedNode, str | None, str]] = []
    if "graders" in base:
        graders = [(g, None, "") for g in base["graders"].sequence()]
    disallowed: list[LocatedNode] = (
        [execution["disallowed_tools"]] if "disallowed_tools" in execution else []
    )
    prompt_field: LocatedNode | None = execution.get("prompt")
    prompt_text = prompt_field.as_str(allow_empty=True) if prompt_field is not None else None
    if prose is not None:
        top.update(prose.top)
        if "disallowed_tools" in prose.execution:
            disallowed.append(prose.execution["disallowed_tools"])
        execution.update(prose.execution)
        if prose.body:
            prompt_text, prompt_field = prose.body, None
        graders.extend(prose.graders)
    where = case_yaml if case_yaml is not None else _file_field(prompt_path)
    source: Source = "case_yaml" if prose is None else "prose" if case_yaml is None else "mixed"
    merged = _Merged(folder, where, source, top, execution, disallowed, graders, prompt_text)
    return _check(merged, warnings, plugin_dir)


@dataclass
class _Merged:
    """A case's keys after the merge, each still where it was written."""

    folder: Path
    where: LocatedNode  # the case file, for what is missing
    source: Source
    top: dict[str, LocatedNode]
    execution: dict[str, LocatedNode]
    disallowed: list[LocatedNode]  # every `disallowed_tools` list, concatenated
    graders: list[tuple[LocatedNode, str | None, str]]  # (object, file stem, body)
    prompt: str | None


@dataclass
class _Prose:
    top: dict[str, LocatedNode]
    execution: dict[str, LocatedNode]
    body: str
    graders: list[tuple[LocatedNode, str | None, str]]


def _read_prose(folder: Path, prompt_path: Path) -> _Prose | None:
    prose = _Prose({}, {}, "", [])
    has_prompt = prompt_path.is_file()
    if has_prompt:
        keys, body = _markdown(prompt_path)
        if keys is not None:
            for key, value in keys.mapping(_written(keys)).items():
                if key in _TOP:
                    prose.top[key] = value
                elif key in _EXECUTION:
                    prose.execution[key] = value
                else:
                    raise value.error(
                        f'unknown frontmatter key "{key}"',
                        hint=f"expected one of: {', '.join((*_TOP, *_EXECUTION))}",
                    )
        prose.body = body.strip()
    grader_dir = folder / GRADERS_DIR
    files = (
        sorted(p for p in grader_dir.glob("*.md") if not p.is_dir()) if grader_dir.is_dir() else []
    )
    if len(files) > MAX_GRADER_FILES:
        raise UserError(
            f"{len(files)} .md files (cap: {MAX_GRADER_FILES})", file=display_path(grader_dir)
        )
    for path in files:
        keys, body = _markdown(path)
        if keys is None:
            continue  # notes beside the graders: the CLI reads only files with front matter
        graders = keys.mapping(_written(keys))
        if "type" not in graders:
            raise keys.error(
                'frontmatter must include "type:" '
                "(regex | tool_order | tool_used | file_exists | llm | baseline)"
            )
        prose.graders.append((keys, path.stem, body.strip()))
    if not has_prompt and not prose.graders:
        return None
    return prose


def _markdown(path: Path) -> tuple[LocatedNode | None, str]:
    """A case file's front matter as positioned YAML (None: it has none) and its body.

    The block is found by Claude Code's rule (`config.front_matter`), then read
    strictly, as `claude plugin eval` reads it: YAML that does not parse is an error.
    """
    shown = display_path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", file=shown) from None
    if len(raw) > MAX_MD_BYTES:
        raise UserError(f"{len(raw)} bytes (cap: {MAX_MD_BYTES})", file=shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text ({exc.reason})", file=shown) from None
    found = read_front_matter(text)
    if not found.present:
        if re.match(r"---[ \t\r]*\n", text.removeprefix("\ufeff")):
            raise UserError(
                'unterminated frontmatter (opening "---" with no closing "---")', file=shown, line=1
            )
        return None, text
    if not found.block.strip():
        return loads("{}", shown), found.body
    # Blank lines before the block keep every line and column where the file has it.
    keys = loads("\n" * (found.block_line - 1) + found.block, shown)
    if not isinstance(keys.node, yaml.MappingNode):
        raise keys.error("frontmatter must be a YAML object")
    return keys, found.body


def _file_field(path: Path) -> LocatedNode:
    return loads("{}", display_path(path))


def _written(value: LocatedNode) -> list[str]:
    if not isinstance(value.node, yaml.MappingNode):
        return []
    return [str(k.value) for k, _ in value.node.value if isinstance(k, yaml.ScalarNode)]


# -- checking --------------------------------------------------------------------


def _check(case: _Merged, warnings: list[str], plugin_dir: Path | None) -> Case:
    top, execution = case.top, case.execution
    name = _check_top(case, warnings, plugin_dir)
    env = _check_execution(execution, warnings)
    context = None
    if "context" in top:
        keys = _context_keys(top["context"], warnings)
        context = load_context(keys, name, case.folder, plugin_dir)
    prompt = case.prompt
    if prompt is None or not prompt.strip():
        if context is not None and context.history_file is not None:
            raise case.where.error(
                "context.history_file requires execution.prompt "
                "(the resumed session needs a next turn)"
            )
        raise case.where.error(
            "execution.prompt is required (a prompt.md body, or execution.prompt in case.yaml)"
        )
    if BLANK_PROMPT in prompt:
        raise case.where.error(
            "the prompt is still the blank `init` template",
            hint=f'replace the "{BLANK_PROMPT}" line with the user prompt to test',
        )
    loaded = _graders(case.graders, case.where, case.folder, warnings)
    folder, source = case.folder, case.source
    tools: list[str] = []
    for value in case.disallowed:
        tools.extend(value.as_str_list())
    return Case(
        name=name,
        folder=folder,
        source=source,
        prompt=prompt.strip() if source == "prose" else prompt,
        graders=loaded,
        tags=tuple(top["tags"].as_str_list()) if "tags" in top else (),
        runs=_whole(top["runs"], 1, 50) if "runs" in top else 3,
        max_turns=_whole(execution["max_turns"], 1, 200) if "max_turns" in execution else 10,
        timeout_s=(
            _whole(execution["timeout_seconds"], 1, 3600) if "timeout_seconds" in execution else 300
        ),
        model=execution["model"].as_str() if "model" in execution else None,
        allowed_tools=(
            tuple(execution["allowed_tools"].as_str_list()) if "allowed_tools" in execution else ()
        ),
        disallowed_tools=tuple(tools),
        append_system_prompt=(
            execution["append_system_prompt"].as_str(allow_empty=True)
            if "append_system_prompt" in execution
            else None
        ),
        env=MappingProxyType(env),
        description=top["description"].as_str(allow_empty=True) if "description" in top else None,
        expected_outcome=(
            top["expected_outcome"].as_str(allow_empty=True) if "expected_outcome" in top else None
        ),
        context=None if context is None or context.empty else context,
    )


def _check_top(case: _Merged, warnings: list[str], plugin_dir: Path | None) -> str:
    """The top-level keys checked; the case's name."""
    top = case.top
    for key, value in top.items():
        if key not in (*_TOP, "context", "execution", "graders"):
            warnings.append(_ignored(value, key))
    version = top.get("schema_version")
    if version is None and case.source != "prose":
        raise case.where.error('missing required field schema_version (e.g. "1.0")')
    if version is not None:
        _schema_version(version)
    if "plugins" in top:
        _plugins(top["plugins"], case.folder, plugin_dir)
    if "name" in top:
        return top["name"].as_str()
    if case.source != "prose":
        raise case.where.error("missing required key 'name'")
    return case.folder.name


def _check_execution(execution: Mapping[str, LocatedNode], warnings: list[str]) -> dict[str, str]:
    """The `execution` keys checked (prompt.md's merged in); the case's EVAL_* variables."""
    for key, value in execution.items():
        if key not in (*_EXECUTION, "prompt"):
            warnings.append(_ignored(value, key))
    if "artifact_publish" in execution and execution["artifact_publish"].as_bool():
        raise execution["artifact_publish"].error(
            "artifact_publish: true: the case publishes claude.ai artifacts, through artifact "
            "tools only the operator's opt-in grants, to Anthropic's artifact service with a "
            "claude.ai login; a ci-evals agent has neither that login nor a network beyond "
            "its model endpoint, so the case cannot run as written",
            hint="drop the key (or set it to false) to run the case without publishing",
        )
    if "growthbook_overrides" in execution:
        warnings.append(
            f"{_at(execution['growthbook_overrides'])}: growthbook_overrides: ignored, as "
            "claude plugin eval ignores it without artifact_publish"
        )
    return _env(execution["env"]) if "env" in execution else {}


def _schema_version(value: LocatedNode) -> None:
    if not isinstance(value.plain(), str):
        raise value.error('missing required field schema_version (e.g. "1.0"): write it quoted')
    written = value.as_str(allow_empty=True)
    major = re.match(r"\s*[+-]?\d+", written.split(".", 1)[0])
    if major is None:
        raise value.error(f'schema_version "{written}" is not a valid version string')
    if int(major.group(0)) > SUPPORTED_MAJOR:
        raise value.error(
            f'schema_version "{written}" requires a newer version',
            hint=f"claude plugin eval and ci-evals read up to {SUPPORTED_MAJOR}.x",
        )


def _context_keys(value: LocatedNode, warnings: list[str]) -> dict[str, LocatedNode]:
    """`context:`'s keys, an unknown one warned about and dropped (as the CLI drops it)."""
    keys = {}
    for key, item in value.mapping(_written(value)).items():
        if key not in _CONTEXT:
            warnings.append(_ignored(item, key))
        else:
            keys[key] = item
    return keys


def _plugins(value: LocatedNode, folder: Path, plugin_dir: Path | None) -> None:
    """`plugins:` (folders relative to the case) replaces the plugins the CLI loads for
    the case; ci-evals takes it when it names the suite's plugin alone (what the CLI
    finds by itself) and refuses any other list: the suite's `plugin:` is what the
    run copies, hashes into results.json, selects by and compares with a baseline."""
    named = value.as_str_list()
    real = [os.path.realpath(folder / path) for path in named]
    if plugin_dir is not None and real == [os.path.realpath(plugin_dir)]:
        return
    raise value.error(
        f"plugins: {named}: the case loads other plugins than the suite's "
        f"({display_path(plugin_dir) if plugin_dir is not None else 'none'}); a ci-evals "
        "run tests one plugin, its `plugin:`, whose copy, digest in results.json, change "
        "selection and baselines are the run's",
        hint="run that plugin's cases from a suite whose plugin: is it, or drop the key",
    )


def _graders(
    written: list[tuple[LocatedNode, str | None, str]],
    where: LocatedNode,
    folder: Path,
    warnings: list[str],
) -> tuple[CaseGrader, ...]:
    if not written:
        raise where.error("graders: at least one grader is required")
    for item, _, body in written:
        texts = [body] + [
            str(v.plain())
            for k, v in item.mapping(_written(item)).items()
            if k in ("pattern", "criteria")
        ]
        if any(BLANK_CRITERIA in text for text in texts):
            raise item.error(
                "this grader is still the blank `init` template",
                hint=f'replace the "{BLANK_CRITERIA}" line with concrete pass criteria',
            )
    loaded = [
        plugin_eval.load_grader(item, folder=folder, name=name, body=body)
        for item, name, body in written
    ]
    plugin_eval.check_names(loaded, where)
    for grader, (item, _, _) in zip(loaded, written, strict=True):
        if isinstance(grader, ToolUsed) and grader.max == 0 and "min" not in _written(item):
            warnings.append(
                f"{_at(item)}: graders: {grader.name}: `max: 0` without `min` can never pass "
                "(min defaults to 1); add `min: 0` to mean never called"
            )
    return tuple(loaded)


def _env(value: LocatedNode) -> dict[str, str]:
    env: dict[str, str] = {}
    for key, item in value.mapping(_written(value), what="mapping of EVAL_* names to text").items():
        if not key.startswith("EVAL_"):
            raise item.error(
                f'execution.env key "{key}" is not allowed',
                hint="only EVAL_* keys can be set from a case, as in claude plugin eval",
            )
        env[key] = item.as_str(allow_empty=True)
    return env


def _whole(value: LocatedNode, low: int, high: int) -> int:
    """A whole number as JavaScript's schema takes it (`10.0` is 10)."""
    data: Any = value.plain()
    if isinstance(data, bool) or not isinstance(data, (int, float)) or not math.isfinite(data):
        raise value.error(f"expected a whole number from {low} to {high}")
    if data != int(data):
        raise value.error(f"expected a whole number, got {data}")
    if not low <= data <= high:
        raise value.error(f"must be from {low} to {high}, got {int(data)}")
    return int(data)


def _at(value: LocatedNode) -> str:
    return f"{value.file}:{value.line}:{value.column}"


def _ignored(value: LocatedNode, key: str) -> str:
    return (
        f"{_at(value)}: {key}: unknown key, ignored as claude plugin eval ignores it "
        "(a typo? remove or rename it)"
    )
