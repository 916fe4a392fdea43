"""Load and validate `ci-evals.yaml` (the suite) into frozen records.

Everything a run needs is checked here, once, before anything starts: the
plugin folder loads as Claude Code would load it (`suite.plugin_source`); stage
names and scenario ids are unique; every prompt/cwd template resolves for every
scenario; every cwd stays inside the workspace; the stage map (when there is
one) lists the same stages in the same order, for the same plugin and fixtures
folders. The format is documented in docs/suite.md.

The grading keys (`reviewer`, `checks`, `graders`, `scoring`, `repeat`,
`pass_at_least`) are validated by `ci_evals.grading.config` into
`Stage.grading` / `Suite.grading`; the positioned YAML stays in `extra`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import yaml

from ci_evals import git
from ci_evals.agents import Limits, StageTools
from ci_evals.agents.base import AgentConfig
from ci_evals.config.templates import NAME, Template, parse_template
from ci_evals.config.yaml_source import LocatedNode, load
from ci_evals.errors import Problems, UserError
from ci_evals.fs.copyable import (
    COPY_HINT,
    confinement,
    copy_problem,
    escape_problem,
    holds_repository_problem,
)
from ci_evals.fs.names import MAX_NAME, RULE, name_problem
from ci_evals.fs.plugin_files import PluginFiles, plugin_files
from ci_evals.grading import config as grading_config
from ci_evals.grading.config import (
    StageGrading,
    SuiteGrading,
    load_stage_grading,
    load_suite_grading,
)
from ci_evals.grading.reviewer.config import REVIEWER_KEYS
from ci_evals.grading.reviewer.rubrics import SUITE_PREFIX, suite_files
from ci_evals.sandbox.base import SandboxConfig, SandboxOptions
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import StageMap, load_stage_map
from ci_evals.suite import backends, command_shell, contracts, references
from ci_evals.suite.case_context import CaseContext
from ci_evals.suite.contracts import Contract
from ci_evals.suite.plugin_eval_mocks import case_mocked_tools
from ci_evals.suite.plugin_evals import Case, PluginEvals, case_grading, load_plugin_evals
from ci_evals.suite.plugin_source import MARKETPLACE, plugin_at, plugin_in_marketplace
from ci_evals.suite.tool_grant import Grant, case_grant, check_entries
from ci_evals.text import display_path

# The keys grading reads, validated by ci_evals.grading.config.
GRADING_STAGE_KEYS = grading_config.STAGE_KEYS
GRADING_SUITE_KEYS = grading_config.SUITE_KEYS
SUITE_FILE = "ci-evals.yaml"
# A stage's phase contract (ci_evals.suite.contracts, docs/contracts.md).
CONTRACT_KEYS = ("produces", "consumes")
DEFAULT_SCENARIO = "default"
DEFAULT_STAGE_MAP = "stage_map.yaml"
STUB_DIR = "stub"  # where `init` drafts the stub scripts, beside the suite
# The plugin of a suite that has none (an agent kind that `needs_plugin` not).
NO_PLUGIN = Path(__file__).resolve().parent / "no_plugin"
VERSION = 1
BUILTINS = ("workspace", "plugin", "stage", "stage_number", "scenario")
# A reviewer's prompt may also name the folder holding its copy of the suite's rubrics.
REVIEWER_BUILTINS = (*BUILTINS, "rubrics")

_STAGE_KEYS = (
    "name",
    "prompt",
    "prompt_without",
    "cwd",
    "limits",
    *GRADING_STAGE_KEYS,
    *CONTRACT_KEYS,
)
LIMIT_KEYS = ("max_turns", "timeout_s", "max_budget_usd", "max_output_mb", "max_output_files")
SCENARIO_KEYS = ("id", "inputs", "fixtures", "git")
# `ablation:` (and `run --ablation`): `with-without` also runs every unit without the plugin.
ABLATIONS = ("none", "with-without")
_SUITE_KEYS = (
    "version",
    "agent",
    *backends.OLD_AGENT_KEYS,
    "scaffold",
    "sandbox",
    *backends.OLD_SANDBOX_KEYS,
    "plugin",
    "fixtures",
    "stage_map",
    "model",
    "budget_usd",
    "max_forecast_usd",
    "max_concurrency",
    "limits",
    "stages",
    "scenarios",
    "plugin_evals",
    "ablation",
    *GRADING_SUITE_KEYS,
)
# Stage names become folder names (`<k>-<name>-output`) and CLI arguments; an
# all-digit name would be ambiguous with a stage number.
STAGE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
STAGE_NAME_CHARS = re.compile(r"[^a-z0-9_-]+")
_STAGE_FIXTURE = re.compile(r"[0-9]+-")


@dataclass(frozen=True)
class Stage:
    number: int  # 1-based
    name: str
    prompt: Template
    cwd: Template
    limits: Limits
    # Graders (validated by ci_evals.grading.config at load), the reviewer's
    # prompt as a checked template, the grading keys as written, and the
    # stage's own YAML node.
    grading: StageGrading = field(default_factory=StageGrading)
    reviewer_prompt: Template | None = None
    extra: Mapping[str, LocatedNode] = field(default_factory=dict, compare=False, repr=False)
    source: LocatedNode | None = field(default=None, compare=False, repr=False)
    # What it produces for later stages and consumes of earlier ones; its
    # `produces` is also in `grading` (the `contract` grader).
    contract: Contract | None = None
    contract_fields: Mapping[str, LocatedNode] = field(
        default_factory=dict, compare=False, repr=False
    )
    # A case unit's own model and tools (`plugin_evals:`); None: the run's model.
    model: str | None = None
    tools: StageTools = field(default_factory=StageTools)
    env: Mapping[str, str] = field(default_factory=dict)  # added to the agent's (EVAL_*)
    case: Case | None = None  # a case unit's case (its mocks are served per run)
    # The prompt of the run without the plugin (`ablation: with-without`): natural
    # language for a stage whose prompt is a plugin command. None: `prompt`.
    prompt_without: Template | None = None

    @property
    def context(self) -> CaseContext | None:
        """A case unit's `context:` (scaffold, history, add_dirs), which
        `run.case_context` lays out; None for a stage of a phased suite."""
        return self.case.context if self.case is not None else None

    @property
    def fixture_dirname(self) -> str:
        """The folder under `fixtures/` holding this stage's curated output."""
        return f"{self.number}-{self.name}-output"


@dataclass(frozen=True)
class Scenario:
    id: str
    inputs: Mapping[str, str]
    # Its own fixtures: a folder (one name) inside the suite's fixtures folder,
    # laid out like it (`<k>-<stage>-output/`). None: the suite's fixtures.
    fixtures: str | None = None
    # `git: true`: the workspace is a repository whose first commit holds what
    # was seeded (docs/suite.md#a-git-workspace), for commands that run git.
    git: bool = False
    # A case unit (`plugin_evals:`, suite.plugin_evals): the one stage it runs instead
    # of the suite's, and its runs (None: the run's --repeat or repeat:).
    stage: Stage | None = None
    repeat: int | None = None


@dataclass(frozen=True)
class Plugin:
    path: Path  # the plugin's folder, absolute (suite.plugin_source)
    name: str  # as Claude Code names it; commands are `/NAME:command`
    commands: tuple[str, ...] = ()  # its commands and skills (`/NAME:command`), see references
    agents: tuple[str, ...] = ()  # its agent files, relative to `path`
    marketplace: Path | None = None  # the marketplace.json that named it, if one did
    marketplace_entry: str | None = None  # the `name` of its entry there
    # The manifest every copy of the plugin carries when the folder has none of
    # its own that Claude Code would read (named after its folder or its entry).
    manifest_to_write: Mapping[str, object] | None = None
    # The real folder its links may lead into (`fs.copyable.confinement`: the
    # suite's repository); None: the plugin's own folder (the built-in empty one).
    repository: Path | None = None
    # The files every copy takes (`fs.plugin_files`): what a commit would hold,
    # less ci-evals' own; None: every file (the built-in empty plugin).
    files: PluginFiles | None = None

    @property
    def link_root(self) -> Path:
        """Where every copy of the plugin may read: a link leading elsewhere is refused."""
        return self.path if self.repository is None else self.repository


@dataclass(frozen=True)
class Suite:
    file: Path  # absolute path of ci-evals.yaml
    display: str  # the file as named in messages
    plugin: Plugin
    fixtures: Path  # absolute; need not exist unless a run starts after stage 1
    stage_map: Path | None
    model: str | None  # None: the CLI's default
    budget_usd: float | None  # run budget; None: unlimited
    limits: Limits  # suite defaults (already merged into every stage)
    stages: tuple[Stage, ...]
    scenarios: tuple[Scenario, ...]
    grading: SuiteGrading = field(default_factory=SuiteGrading)
    # `ci-evals forecast`: a run forecast above this waits for a maintainer's approval
    # (docs/run.md, *Forecast*); None: no gate.
    max_forecast_usd: float | None = None
    extra: Mapping[str, LocatedNode] = field(default_factory=dict, compare=False, repr=False)
    source: LocatedNode | None = field(default=None, compare=False, repr=False)
    # The backend that runs stages and reviewers, and its options (`agent:`,
    # agents.registry), and where they run (`sandbox:`, sandbox.registry;
    # `--isolation` overrides): each kind validated its own block (suite.backends).
    agent: AgentConfig = field(default_factory=AgentConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)  # load_suite sets it
    # What `sandbox:` sets for kinds other than its own (`{kind: bwrap, docker:
    # {image: ...}}`), by kind name: `--isolation K` runs with K's.
    sandbox_options: Mapping[str, SandboxOptions] = field(default_factory=dict)
    # A folder laid into every workspace before the fixtures: what a task gives its
    # agent to start from (`tasks/<id>/scaffold/`).
    scaffold: Path | None = None
    # Model requests in flight at once through the run's endpoint (the real API's
    # proxy; None: its default). Shards split it (docs/scale-out.md).
    max_concurrency: int | None = None
    # `plugin_evals:`: the plugin's `claude plugin eval` cases, each a scenario of
    # its own stage (`Scenario.stage`); the suite then has no `stages:`.
    plugin_evals: PluginEvals | None = None
    # The real folder every file the suite reads or copies must lie in, links
    # followed (`fs.copyable.confinement`); None: the suite's own folder.
    repository: Path | None = None
    # The plugin copy, fixtures and scaffold take only what git tracks (in GitHub
    # Actions: what the pull request holds, not what a CI step wrote beside it).
    tracked_only: bool = False
    # `ablation: with-without`: every unit also runs without the plugin (`run --ablation`).
    ablation: Literal["none", "with-without"] = "none"

    @property
    def link_root(self) -> Path:
        """Where the suite's files, fixtures and plugin may lead: nowhere else."""
        if self.repository is None:
            return Path(os.path.realpath(self.root))
        return self.repository

    @property
    def root(self) -> Path:
        """The folder holding the suite file; relative paths start here."""
        return self.file.parent

    @property
    def stage_names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def stage(self, key: str | int) -> Stage:
        """A stage by 1-based number (int or digits) or by name; else a `UserError`."""
        text = str(key).strip()
        if text.isdigit():
            number = int(text)
            if 1 <= number <= len(self.stages):
                return self.stages[number - 1]
        else:
            for stage in self.stages:
                if stage.name == text:
                    return stage
        valid = ", ".join(f"{s.number} {s.name}" for s in self.stages)
        raise UserError(f"unknown stage {text!r}", file=self.display, hint=f"stages: {valid}")

    def scenario(self, scenario_id: str) -> Scenario:
        for scenario in self.scenarios:
            if scenario.id == scenario_id:
                return scenario
        valid = ", ".join(s.id for s in self.scenarios)
        raise UserError(
            f"unknown scenario {scenario_id!r}", file=self.display, hint=f"scenarios: {valid}"
        )

    def fixtures_for(self, scenario: Scenario | None) -> Path:
        """The fixtures folder a scenario's runs start from (its own, or the suite's)."""
        if scenario is not None and scenario.fixtures is not None:
            return self.fixtures / scenario.fixtures
        return self.fixtures

    def fixture_dir(self, stage: Stage | int, scenario: Scenario | None = None) -> Path:
        number = stage if isinstance(stage, int) else stage.number
        return self.fixtures_for(scenario) / self.stages[number - 1].fixture_dirname

    def seed_dir(self, scenario: Scenario | None = None) -> Path | None:
        """The stage-1 seed: `fixtures/0-<name>/` (in a scenario's own set,
        `fixtures/NAME/0-<name>/`), laid into every workspace before fixtures
        1..N-1, whatever stage the run starts at; None when there is none. The
        one rule is `contracts.seed_folder` (the contracts count it as stage 0)."""
        return contracts.seed_folder(self.fixtures_for(scenario))

    @staticmethod
    def template_values(
        stage: Stage, scenario: Scenario, *, workspace: Path, plugin: Path
    ) -> dict[str, str]:
        """Everything a template can name: the scenario's inputs plus the built-ins."""
        values = dict(scenario.inputs)
        values.update(
            workspace=str(workspace),
            plugin=str(plugin),
            stage=stage.name,
            stage_number=str(stage.number),
            scenario=scenario.id,
        )
        return values

    def prompt_for(
        self,
        stage: Stage,
        scenario: Scenario,
        *,
        workspace: Path,
        plugin: Path,
        without: bool = False,
    ) -> str:
        """The stage's prompt; `without`: the run without the plugin's (`prompt_without`)."""
        values = self.template_values(stage, scenario, workspace=workspace, plugin=plugin)
        if without and stage.prompt_without is not None:
            return stage.prompt_without.render(values)
        return stage.prompt.render(values)

    @staticmethod
    def cwd_for(stage: Stage, scenario: Scenario, *, workspace: Path, plugin: Path) -> Path:
        """The stage's absolute working folder, inside `workspace` (not created here)."""
        values = Suite.template_values(stage, scenario, workspace=workspace, plugin=plugin)
        path = _inside(stage.cwd.render(values), workspace)
        if path is None:
            raise stage.cwd.error(
                f"cwd leaves the workspace for scenario {scenario.id!r}",
                hint="cwd is relative to the workspace and must stay inside it",
            )
        return path


def _inside(rendered: str, workspace: Path) -> Path | None:
    """`rendered` joined to `workspace` and normalised, or None if it leaves it."""
    base = os.path.normpath(workspace)
    joined = os.path.normpath(os.path.join(base, rendered))
    if joined != base and not joined.startswith(base.rstrip(os.sep) + os.sep):
        return None
    return Path(joined)


# -- discovery ----------------------------------------------------------------


def find_suite(cwd: Path) -> Path:
    """The nearest `ci-evals.yaml` from `cwd` up to the repository's top folder.

    Outside a git repository only `cwd` itself is looked at.
    """
    start = cwd.resolve()
    try:
        top = git.toplevel(start).resolve()
    except UserError:
        top = start
    folder = start
    while True:
        candidate = folder / SUITE_FILE
        if candidate.is_file():
            return candidate
        if folder in (top, folder.parent):
            break
        folder = folder.parent
    raise UserError(
        f"no {SUITE_FILE} found in {display_path(start)} or above it up to {display_path(top)}",
        hint="create one (see docs/suite.md) or pass --suite PATH",
    )


# -- loading ------------------------------------------------------------------


def load_suite(
    path: Path,
    display: str | None = None,
    *,
    problems: Problems | None = None,
    tracked_only: bool | None = None,
    allow_tools: Sequence[str] | None = None,
) -> Suite:
    """Read and validate a suite file; any mistake is a one-line `UserError`.

    `tracked_only`: the plugin copy, fixtures and scaffold take only what git
    tracks (`Suite.tracked_only`); None: as the environment says
    (`git.only_tracked`: in GitHub Actions), so no caller can forget it there.

    The mistakes that do not stop the suite from being built — slash commands,
    reviewer agents and rubrics the plugin does not have — go to `problems`:
    raised at once by default, collected for `ci-evals check`.

    `allow_tools`: the operator's tool grant of a suite of cases (`run
    --allow-tools`), instead of its `plugin_evals.allow_tools` (`suite.tool_grant`).
    """
    if problems is None:
        problems = Problems()
    tracked = git.only_tracked(os.environ) if tracked_only is None else tracked_only
    file = Path(os.path.abspath(path))
    name = display if display is not None else display_path(path)
    # Every file the suite reads or copies must lie in its repository, outside
    # .git, links followed (docs/isolation.md, *Links*): this file first.
    repository = confinement(file.parent)
    if (problem := escape_problem(str(file), repository)) is not None:
        raise UserError(f"{name} {problem}")
    root_field = load(file, name)
    keys = root_field.mapping(_SUITE_KEYS, required=("version",))
    if "stages" not in keys and "plugin_evals" not in keys:
        raise root_field.error("missing required key 'stages'", hint="or plugin_evals:")

    version = keys["version"].as_int()
    if version != VERSION:
        raise keys["version"].error(f"unsupported version {version}", hint=f"use {VERSION}")

    base = file.parent
    agent, agent_kind = backends.load_agent(keys, root_field)
    fixtures = _path(keys["fixtures"], base) if "fixtures" in keys else base / "fixtures"
    stage_map: Path | None
    if "stage_map" in keys:
        stage_map = None if keys["stage_map"].is_null() else _path(keys["stage_map"], base)
    else:
        default = base / DEFAULT_STAGE_MAP
        stage_map = default if default.is_file() else None
    if "plugin" in keys:
        own = _own_paths(base, file, fixtures, stage_map, keys.get("scaffold"))
        plugin = _load_plugin(keys["plugin"], base, repository, own, tracked_only=tracked)
    elif not agent_kind.needs_plugin:  # a task: an empty plugin keeps the workspace's layout
        plugin = Plugin(path=NO_PLUGIN, name="no-plugin")
    else:
        raise root_field.error("missing required key 'plugin'")
    _confined(keys.get("fixtures"), fixtures, repository, "fixtures folder")
    scaffold = _scaffold(keys.get("scaffold"), base)
    _confined(keys.get("scaffold"), scaffold, repository, "scaffold folder", laid=True)
    model = _optional_str(keys.get("model"))
    sandbox, sandbox_options = backends.load_sandbox(keys, root_field, base)
    budget = _optional_number(keys.get("budget_usd"), positive=True)
    concurrency = keys["max_concurrency"].as_int(minimum=1) if "max_concurrency" in keys else None
    limits = _load_limits(keys["limits"], Limits()) if "limits" in keys else Limits()

    evals, stages, scenarios = _units(
        keys, limits, base, plugin, agent.kind, problems, within=repository, grant=allow_tools
    )
    for stage in stages:
        _check_templates(stage, scenarios)
    stages = _load_contracts(stages, base, plugin, fixtures, scenarios, within=repository)
    suite_extra = {key: keys[key] for key in GRADING_SUITE_KEYS if key in keys}

    suite = Suite(
        file=file,
        display=name,
        plugin=plugin,
        fixtures=fixtures,
        stage_map=stage_map,
        model=model,
        budget_usd=budget,
        max_forecast_usd=_optional_number(keys.get("max_forecast_usd"), positive=True),
        limits=limits,
        stages=stages,
        scenarios=scenarios,
        grading=load_suite_grading(suite_extra),
        extra=suite_extra,
        source=root_field,
        agent=agent,
        sandbox=sandbox,
        sandbox_options=sandbox_options,
        scaffold=scaffold,
        max_concurrency=concurrency,
        repository=repository,
        plugin_evals=evals,
        tracked_only=tracked,
        ablation=_ablation(keys.get("ablation")),
    )
    _check_suite_rubrics(suite, problems)
    if stage_map is not None and evals is not None:
        _cross_check_case_map(suite, evals, keys.get("stage_map") or keys["plugin_evals"])
    elif stage_map is not None:
        _cross_check_stage_map(suite, keys.get("stage_map"), keys["stages"], problems)
    return suite


def _ablation(value: LocatedNode | None) -> Literal["none", "with-without"]:
    if value is None:
        return "none"
    written = value.as_str()
    if written == "with-without":
        return "with-without"
    if written != "none":
        raise value.error(f"unknown ablation {written!r}", hint=" or ".join(ABLATIONS))
    return "none"


def _confined(
    value: LocatedNode | None, path: Path | None, repository: Path, what: str, *, laid: bool = False
) -> None:
    """Refuse a folder the suite names (`path`, if it exists) that resolves
    outside the repository or into its .git; one `laid` whole into workspaces
    (a scaffold) also when it is the repository's top, which holds .git."""
    if path is None or not os.path.lexists(path):
        return
    problem = escape_problem(str(path), repository)
    if problem is None and laid:
        problem = holds_repository_problem(path, repository)
    if problem is None:
        return
    message = f"{what} {display_path(path)} {problem}"
    raise value.error(message) if value is not None else UserError(message)


def _check_suite_rubrics(suite: Suite, problems: Problems) -> None:
    """A reviewer's `suite:` rubric files are read at load and copied to the
    reviewer: each must resolve inside the repository, outside its .git."""
    for stage in suite.stages:
        config = stage.grading.reviewer
        if config is None or not any(p.startswith(SUITE_PREFIX) for p in config.rubrics):
            continue
        try:
            found = config.rubric_set(suite.plugin.path, suite.root)
        except UserError:
            continue  # already reported where the reviewer was loaded
        for path in suite_files(found):
            problem = escape_problem(str(path), suite.link_root)
            if problem is not None:
                field = stage.extra["reviewer"].mapping(REVIEWER_KEYS)["rubrics"]
                problems.report(field.error(f"rubric {display_path(path)} {problem}"))
                break


def _units(  # noqa: PLR0917 - one private call site
    keys: Mapping[str, LocatedNode],
    limits: Limits,
    base: Path,
    plugin: Plugin,
    agent: str,
    problems: Problems,
    *,
    within: Path,
    grant: Sequence[str] | None = None,
) -> tuple[PluginEvals | None, tuple[Stage, ...], tuple[Scenario, ...]]:
    """The stages and scenarios, or `plugin_evals:`' case units (scenarios of their own stage)."""
    if "plugin_evals" in keys:
        evals, units = _case_units(keys, plugin, base, limits, agent, within=within, grant=grant)
        return evals, (), units
    if grant is not None:
        raise UserError(
            "--allow-tools grants tools to the cases of a suite with plugin_evals:",
            hint="a stage's tools are its agent's (permissions bypassed in the sandbox)",
        )
    stages = _load_stages(
        keys["stages"], limits, suite_dir=base, plugin=plugin, within=within, problems=problems
    )
    # A suite whose prompts need no inputs may leave scenarios out: one run.
    scenarios = (
        _load_scenarios(keys["scenarios"])
        if "scenarios" in keys
        else (Scenario(id=DEFAULT_SCENARIO, inputs={}),)
    )
    return None, stages, scenarios


def _case_units(
    keys: Mapping[str, LocatedNode],
    plugin: Plugin,
    base: Path,
    limits: Limits,
    agent: str,
    *,
    within: Path,
    grant: Sequence[str] | None = None,
) -> tuple[PluginEvals, tuple[Scenario, ...]]:
    """`plugin_evals:`: each selected case a scenario running its own one stage."""
    where = keys["plugin_evals"]
    for key in ("stages", "scenarios"):
        if key in keys:
            raise keys[key].error(f"{key}: beside plugin_evals: is not supported yet")
    if agent != "claude":
        raise where.error(f"plugin_evals: with agent {agent}: not supported yet", hint="claude")
    source = plugin_at(plugin.path) if plugin.manifest_to_write is None else None
    manifest = source.manifest if source is not None else plugin.manifest_to_write or {}
    evals = load_plugin_evals(
        where, plugin_dir=plugin.path, manifest=manifest, suite_dir=base, within=within
    )
    if grant is not None:  # `run --allow-tools`: the operator's, instead of the suite's
        evals = replace(evals, allow_tools=check_entries(grant, "--allow-tools"))
    for warning in evals.warnings:
        print(f"ci-evals: warning: {warning}", file=sys.stderr)
    units = []
    said: list[str] = []
    for case in evals.cases:
        # The tools of the case's mocked servers are granted with no word, as the CLI does.
        mocked = case_mocked_tools(plugin.path, plugin.name, case.mocks) if case.mocks else []
        granted = Grant(evals.allow_tools).with_mocked(mocked)
        tools, notes = case_grant(case, granted)
        said += notes
        if source is not None and (
            lacking := command_shell.ungranted(source, case.prompt, granted)
        ):
            # The CLI says nothing, and refuses the expansion before the model runs.
            said.append(
                f'case "{case.name}": its command expands shell commands before the model '
                f"sees it, which the run refuses unless granted (as claude plugin eval "
                f"does; the command's allowed-tools grants nothing in an eval run) \u2014 "
                f"grant {', '.join(lacking)} with allow_tools or --allow-tools"
            )
        stage = Stage(
            number=1,
            name=STAGE_NAME_CHARS.sub("-", case.unit_id.lower()).strip("-_") or "case",
            # The prompt is the case's text, never a template: braces are literal.
            prompt=parse_template(case.prompt.replace("{", "{{").replace("}", "}}")),
            cwd=parse_template("."),
            limits=replace(limits, max_turns=case.max_turns, timeout_s=float(case.timeout_s)),
            grading=case_grading(case, evals.judge_model),
            source=where,
            model=case.model,
            tools=tools,
            env=case.env,
            case=case,
        )
        units.append(Scenario(id=case.unit_id, inputs={}, stage=stage, repeat=case.runs))
    return replace(evals, grant_notes=tuple(said)), tuple(units)


def _scaffold(value: LocatedNode | None, base: Path) -> Path | None:
    if value is None:
        return None
    path = _path(value, base)
    if not path.is_dir():
        raise value.error(f"scaffold folder not found: {path}")
    return path


def _path(value: LocatedNode, base: Path) -> Path:
    return Path(os.path.normpath(base / value.as_str()))


def _optional_str(value: LocatedNode | None) -> str | None:
    if value is None or value.is_null():
        return None
    return value.as_str()


def _optional_number(value: LocatedNode | None, *, positive: bool) -> float | None:
    if value is None or value.is_null():
        return None
    number = value.as_number(minimum=0.0)
    if positive and number == 0:
        raise value.error("must be greater than 0")
    return number


def _own_paths(
    base: Path, file: Path, fixtures: Path, stage_map: Path | None, scaffold: LocatedNode | None
) -> tuple[tuple[Path, str], ...]:
    """ci-evals' own files, which no copy of the plugin takes where they lie inside
    it (`fs.plugin_files`): the suite's folder (when the plugin holds it, the
    layout `init` drafts), else what lies beside the suite: the suite, its map,
    the fixtures (the known-good answers), the scaffold, the stub scripts."""
    own = [
        (base, "the suite's folder"),
        (file, "the suite"),
        (fixtures, "the fixtures"),
        (base / STUB_DIR, "the stub scripts"),
        (base / DEFAULT_STAGE_MAP, "the stage map"),
    ]
    if stage_map is not None:
        own.append((stage_map, "the stage map"))
    if scaffold is not None:
        own.append((_path(scaffold, base), "the scaffold"))
    return tuple(own)


def _load_plugin(
    value: LocatedNode,
    base: Path,
    repository: Path,
    own: tuple[tuple[Path, str], ...] = (),
    *,
    tracked_only: bool,
) -> Plugin:
    if isinstance(value.node, yaml.MappingNode):
        keys = value.mapping(("marketplace", "name"), required=("marketplace", "name"))
        folder = _path(keys["marketplace"], base)
        if not (folder / MARKETPLACE).is_file():
            raise keys["marketplace"].error(
                f"no {MARKETPLACE} in {display_path(folder)}",
                hint="name the folder holding the marketplace's .claude-plugin/",
            )
        entry: str | None = keys["name"].as_str()
        source = plugin_in_marketplace(folder, keys["name"].as_str())
    else:
        entry = None
        path = _path(value, base)
        if not path.is_dir():
            raise value.error(f"plugin folder not found: {display_path(path)}")
        source = plugin_at(path)
    if source.marketplace is not None:
        market = escape_problem(str(source.marketplace), repository)
        if market is not None:
            raise value.error(f"{display_path(source.marketplace)} {market}")
    files = plugin_files(source.path, own, tracked_only=tracked_only)
    found = copy_problem(source.path, repository, files)
    if found is not None:
        where, problem = found
        raise value.error(f"{where} {problem}", hint=COPY_HINT)
    return Plugin(
        path=source.path,
        name=source.name,
        commands=references.plugin_commands(source.path, source.manifest),
        agents=references.plugin_agents(source.path, source.manifest),
        marketplace=source.marketplace,
        marketplace_entry=entry,
        manifest_to_write=source.manifest_to_write,
        repository=repository,
        files=files,
    )


def _load_limits(value: LocatedNode, defaults: Limits) -> Limits:
    keys = value.mapping(LIMIT_KEYS)
    max_turns = keys["max_turns"].as_int(minimum=1) if "max_turns" in keys else defaults.max_turns
    timeout = defaults.timeout_s
    if "timeout_s" in keys:
        timeout = keys["timeout_s"].as_number(minimum=0.0)
        if timeout == 0:
            raise keys["timeout_s"].error("must be greater than 0")
    budget = defaults.max_budget_usd
    if "max_budget_usd" in keys:
        budget = _optional_number(keys["max_budget_usd"], positive=True)
    output = defaults.max_output_bytes
    if "max_output_mb" in keys:
        output = int(keys["max_output_mb"].as_number(minimum=1.0) * (1 << 20))
    files = defaults.max_output_files
    if "max_output_files" in keys:
        files = keys["max_output_files"].as_int(minimum=1)
    return Limits(
        max_turns=max_turns,
        timeout_s=timeout,
        max_budget_usd=budget,
        max_output_bytes=output,
        max_output_files=files,
    )


def _load_stages(
    value: LocatedNode,
    defaults: Limits,
    *,
    suite_dir: Path,
    plugin: Plugin,
    within: Path,
    problems: Problems,
) -> tuple[Stage, ...]:
    stages: list[Stage] = []
    seen: dict[str, LocatedNode] = {}
    for number, item in enumerate(value.sequence(allow_empty=False), start=1):
        # A key that is none of ours may be a grader kind an installed package adds.
        added = grading_config.grader_keys(_keys_of(item), _STAGE_KEYS)
        keys = item.mapping((*_STAGE_KEYS, *added), required=("name", "prompt"))
        name_field = keys["name"]
        name = name_field.as_str()
        if not STAGE_NAME.fullmatch(name) or name.isdigit() or name_problem(name):
            raise name_field.error(
                f"bad stage name {name!r}",
                hint=f"lowercase letters, digits, '-', '_', not only digits, at most {MAX_NAME}",
            )
        if name in seen:
            raise name_field.error(
                f"duplicate stage name {name!r}", hint=f"first used at line {seen[name].line}"
            )
        seen[name] = name_field
        cwd = parse_template(keys["cwd"].as_str(), keys["cwd"]) if "cwd" in keys else None
        extra = {key: keys[key] for key in (*GRADING_STAGE_KEYS, *added) if key in keys}
        grading = load_stage_grading(
            extra,
            suite_dir=suite_dir,
            plugin_dir=plugin.path,
            within=within,
            problems=problems,
        )
        prompt = parse_template(keys["prompt"].as_str(), keys["prompt"])
        references.check_prompts([prompt], plugin.name, plugin.commands, problems)
        prompt_without = None
        if "prompt_without" in keys:
            written = keys["prompt_without"]
            prompt_without = parse_template(written.as_str(), written)
            if references.slash_commands(prompt_without):
                raise written.error(
                    "prompt_without names a slash command: the run without the plugin has none",
                    hint="say in words what the command would have the agent do",
                )
        reviewer_prompt = None
        if "reviewer" in extra:
            # Already validated by the grading loader; kept as a template so its
            # placeholders are checked against every scenario like a prompt.
            reviewer_keys = extra["reviewer"].mapping(REVIEWER_KEYS)
            review = reviewer_keys["prompt"]
            reviewer_prompt = parse_template(review.as_str(), review)
            references.check_reviewer_agent(
                reviewer_keys["agent"], plugin.path, plugin.agents, problems
            )
        stages.append(
            Stage(
                number=number,
                name=name,
                prompt=prompt,
                cwd=cwd if cwd is not None else parse_template("."),
                limits=_load_limits(keys["limits"], defaults) if "limits" in keys else defaults,
                grading=grading,
                reviewer_prompt=reviewer_prompt,
                extra=extra,
                source=item,
                contract_fields={key: keys[key] for key in CONTRACT_KEYS if key in keys},
                prompt_without=prompt_without,
            )
        )
    return tuple(stages)


def _keys_of(item: LocatedNode) -> list[str]:
    """The string keys written in `item`, if it is a mapping (`mapping` checks the rest)."""
    if not isinstance(item.node, yaml.MappingNode):
        return []
    return [str(key.value) for key, _ in item.node.value if isinstance(key, yaml.ScalarNode)]


def _load_contracts(
    stages: tuple[Stage, ...],
    suite_dir: Path,
    plugin: Plugin,
    fixtures: Path,
    scenarios: tuple[Scenario, ...],
    *,
    within: Path,
) -> tuple[Stage, ...]:
    """Each stage's contract, its consumes checked against the stages before it
    (and the seed fixtures); its produces added to its graders as `contract`."""
    seed_display, seed = contracts.seed_files(fixtures)
    for scenario in scenarios:  # a scenario's own seed counts too
        if scenario.fixtures is not None:
            shown, files = contracts.seed_files(fixtures / scenario.fixtures)
            seed_display = seed_display or shown
            seed += files
    names = tuple(stage.name for stage in stages)
    done: list[Contract] = []
    out: list[Stage] = []
    for stage in stages:
        keys = stage.contract_fields
        contract = Contract(stage=stage.number)
        if "produces" in keys:
            produces = contracts.load_produces(
                keys["produces"],
                suite_dir=suite_dir,
                plugin_dir=plugin.path,
                within=within,
            )
            contract = replace(contract, produces=produces)
        if "consumes" in keys:
            upstream = contracts.Upstream(stage.number, names, tuple(done), seed, seed_display)
            consumes = contracts.load_consumes(keys["consumes"], upstream)
            contract = replace(contract, consumes=consumes)
        done.append(contract)
        grader = contract.grader()
        grading = stage.grading
        if grader is not None:
            grading = replace(grading, graders=(*grading.graders, grader))
        out.append(replace(stage, contract=contract, grading=grading))
    return tuple(out)


def _load_scenarios(value: LocatedNode) -> tuple[Scenario, ...]:
    scenarios: list[Scenario] = []
    seen: dict[str, LocatedNode] = {}
    for item in value.sequence(allow_empty=False):
        keys = item.mapping(SCENARIO_KEYS, required=("id",))
        id_field = keys["id"]
        scenario_id = id_field.as_str()
        # Scenario ids become folder names in the run folder.
        if name_problem(scenario_id):
            raise id_field.error(f"bad scenario id {scenario_id!r}", hint=f"use {RULE}")
        if scenario_id in seen:
            raise id_field.error(
                f"duplicate scenario id {scenario_id!r}",
                hint=f"first used at line {seen[scenario_id].line}",
            )
        seen[scenario_id] = id_field
        inputs = _load_inputs(keys["inputs"]) if "inputs" in keys else {}
        fixtures = _scenario_fixtures(keys["fixtures"]) if "fixtures" in keys else None
        git_repo = keys["git"].as_bool() if "git" in keys else False
        scenarios.append(Scenario(id=scenario_id, inputs=inputs, fixtures=fixtures, git=git_repo))
    return tuple(scenarios)


def _scenario_fixtures(value: LocatedNode) -> str:
    """One folder name inside the suite's fixtures folder.

    Only there, and only one level down, can `compute-stage` tell which stage a
    change to it feeds (`fixtures/<name>/<k>-*/` -> stage k+1); a name shaped
    like a stage's fixture folder (`3-...`) would read as one.
    """
    name = value.as_str()
    if name_problem(name):
        raise value.error(
            f"bad scenario fixtures folder {name!r}",
            hint="one folder name inside the suite's fixtures folder, e.g. 'globex'",
        )
    if _STAGE_FIXTURE.match(name):
        raise value.error(
            f"scenario fixtures folder {name!r} looks like a stage's fixture folder",
            hint="start it with a letter, e.g. 'globex'",
        )
    return name


def _load_inputs(value: LocatedNode) -> dict[str, str]:
    inputs: dict[str, str] = {}
    if value.is_null():
        return inputs
    # Any name is allowed, so the allowed keys are the ones written.
    fields = value.mapping(_written_keys(value), what="mapping of input names to values")
    for key, item in fields.items():
        if not NAME.fullmatch(key):
            raise item.error(f"bad input name {key!r}", hint="use letters, digits, '_' and '-'")
        if key in REVIEWER_BUILTINS:
            raise item.error(
                f"input {key!r} shadows a built-in placeholder",
                hint=f"built-ins: {', '.join(REVIEWER_BUILTINS)}",
            )
        data = item.plain()
        if isinstance(data, bool) or not isinstance(data, (str, int, float)):
            raise item.error("input values must be strings or numbers")
        inputs[key] = str(data)
    return inputs


def _written_keys(value: LocatedNode) -> list[str]:
    if not isinstance(value.node, yaml.MappingNode):
        return []  # `mapping()` reports the wrong kind of node
    return [str(key.value) for key, _ in value.node.value if isinstance(key, yaml.ScalarNode)]


def _check_templates(stage: Stage, scenarios: tuple[Scenario, ...]) -> None:
    """Every placeholder resolves for every scenario; every cwd stays in the workspace."""
    templates: list[tuple[Template, tuple[str, ...]]] = [
        (stage.prompt, BUILTINS),
        (stage.cwd, BUILTINS),
    ]
    if stage.prompt_without is not None:
        templates.append((stage.prompt_without, BUILTINS))
    if stage.reviewer_prompt is not None:
        templates.append((stage.reviewer_prompt, REVIEWER_BUILTINS))
    for template, builtins in templates:
        unknown = sorted(template.names.difference(builtins))
        for scenario in scenarios:
            for name in unknown:
                if name not in scenario.inputs:
                    inputs = ", ".join(sorted(scenario.inputs)) or "none"
                    raise template.error(
                        f"unknown placeholder {{{name}}}: scenario {scenario.id!r} has no "
                        f"input {name!r}",
                        hint=f"its inputs: {inputs}; built-ins: {', '.join(builtins)}",
                    )
    # The workspace's real path is not known yet; a stand-in is enough to see
    # whether the rendered cwd is absolute elsewhere or climbs out with `..`.
    workspace = Path(os.path.abspath(os.sep + "ci-evals-workspace"))
    plugin = Path(os.path.abspath(os.sep + "ci-evals-plugin"))
    for scenario in scenarios:  # raises what the run would raise
        Suite.cwd_for(stage, scenario, workspace=workspace, plugin=plugin)


def _cross_check_stage_map(
    suite: Suite, where: LocatedNode | None, stages_field: LocatedNode, problems: Problems
) -> None:
    """The stage map must list the suite's stages, in order, for the same folders,
    and reach the suite's own rubrics (`suite:`).

    Otherwise `compute-stage` would answer for a different plugin, fixtures
    folder or stage order than the one `run` runs, or ignore a changed rubric.
    """
    assert suite.stage_map is not None
    stage_map = load_stage_map(suite.stage_map, warn=False)
    map_name = stage_map.display
    if stage_map.evals is not None:
        raise (where or stages_field).error(
            f"the stage map {map_name} selects cases (evals:), but this suite runs stages",
            hint="a map of stages lists stages: and sends files to them",
        )
    theirs = tuple(stage_map.stages)
    ours = suite.stage_names
    if theirs != ours:
        differ = next(
            (i for i, pair in enumerate(zip(theirs, ours, strict=False)) if pair[0] != pair[1]),
            min(len(theirs), len(ours)),
        )
        raise stages_field.error(
            f"the stages differ from the stage map {map_name}: "
            f"map [{', '.join(theirs)}], suite [{', '.join(ours)}] "
            f"(first difference at stage {differ + 1})",
            hint="both files must list the same stage names in the same order",
        )
    where = where or stages_field
    _check_scenarios_named(suite, stage_map)
    _same_folder(where, stage_map, "root", stage_map.root, suite.plugin.path, "plugin")
    if stage_map.fixtures is not None:
        _same_folder(where, stage_map, "fixtures", stage_map.fixtures, suite.fixtures, "fixtures")
    _check_suite_reached(suite, stage_map, where)
    for stage in suite.stages:
        _check_rubrics_mapped(suite, stage, stage_map, problems)
        _check_schemas_mapped(stage, stage_map, problems)


def _check_scenarios_named(suite: Suite, stage_map: StageMap) -> None:
    """Every scenario an entry names (`scenarios:`) is one of the suite's."""
    ids = {scenario.id for scenario in suite.scenarios}
    for entry in stage_map.entries:
        unknown = [name for name in entry.scenarios if name not in ids]
        if unknown:
            raise UserError(
                f"entries[{entry.index}].scenarios: {unknown[0]!r} is no scenario of "
                f"{suite.display}",
                file=stage_map.display,
                line=entry.line,
                hint=f"the suite's scenarios: {', '.join(sorted(ids))}",
            )


def _cross_check_case_map(suite: Suite, evals: PluginEvals, where: LocatedNode) -> None:
    """A suite of cases selects its cases by a map with `evals:` (a case map) whose root
    is the suite's plugin and whose eval folder is the suite's, and which reaches the
    suite file: else `compute-stage` and `run --base` would select other cases, or none."""
    assert suite.stage_map is not None
    stage_map = load_stage_map(suite.stage_map, warn=False)
    name = stage_map.display
    if stage_map.evals is None:
        raise where.error(
            f"the stage map {name} has stages, but this suite runs cases (plugin_evals:)",
            hint="give the map evals: (the eval folder) and entries with cases: or tags: "
            "(docs/plugin-evals.md, Selecting cases by a change)",
        )
    _same_folder(where, stage_map, "root", stage_map.root, suite.plugin.path, "plugin")
    _same_folder(where, stage_map, "evals", stage_map.evals, evals.dir, "eval folder")
    _check_suite_reached(suite, stage_map, where)


def _same_folder(  # noqa: PLR0917 - private, three call sites
    where: LocatedNode, stage_map: StageMap, key: str, theirs: str, ours: Path, what: str
) -> None:
    """The map's `key` folder (repo-relative `theirs`) is the suite's `ours`: else
    `compute-stage` would answer for another plugin, fixtures or eval folder than
    the one `run` runs."""
    folder = Path(os.path.normpath(stage_map.repo_root / theirs))
    if folder.resolve() != ours.resolve():
        raise where.error(
            f"the stage map {stage_map.display} has {key} {display_path(folder)}, but the "
            f"suite's {what} {'are' if what == 'fixtures' else 'is'} {display_path(ours)}",
            hint=f"the map's {key} and the suite's {what} must be the same folder",
        )


def _check_suite_reached(suite: Suite, stage_map: StageMap, where: LocatedNode) -> None:
    """The map reaches the suite file and the marketplace naming the plugin, and
    compares that plugin's entry when it compares one."""
    # The suite decides every stage: a map that does not reach it would answer
    # `none` to a change of any prompt (fail open).
    _require_mapped(suite.file, "the suite", stage_map, where)
    # The marketplace that names the plugin decides its name (and, without a
    # manifest of its own, its components).
    if suite.plugin.marketplace is not None:
        _require_mapped(suite.plugin.marketplace, "the marketplace", stage_map, where)
        compared = stage_map.marketplace
        if compared is not None and compared.plugin != suite.plugin.marketplace_entry:
            raise where.error(
                f"the stage map {stage_map.display} compares the marketplace entry "
                f"{compared.plugin!r}, but the suite's plugin is its entry "
                f"{suite.plugin.marketplace_entry!r}",
                hint="name the suite's entry in the map's marketplace: plugin:",
            )


def _require_mapped(path: Path, what: str, stage_map: StageMap, where: LocatedNode) -> None:
    unmapped = _unmapped(path, stage_map)
    if unmapped is not None:
        written = Path(os.path.relpath(path, stage_map.file.parent)).as_posix()
        glob = written if written.startswith("../") else "/" + written
        raise where.error(
            f"{what} {unmapped} is in no stage of the stage map {stage_map.display}: "
            "a change to it would run nothing",
            hint=f"add {glob!r} to the map's global: (a change then runs every stage)"
            + (
                f", or name it in marketplace: {{file: {glob}, plugin: NAME}}"
                if what == "the marketplace"
                else ""
            ),
        )


def _unmapped(path: Path, stage_map: StageMap) -> str | None:
    """`path` relative to the map's repository when no stage of the map reaches it
    (neither under its root nor matched by a `global` glob): else None."""
    rel = Path(os.path.relpath(path, stage_map.repo_root)).as_posix()
    if stage_map.marketplace is not None and rel == stage_map.marketplace.file:
        return None  # compared by its entry (`marketplace:`)
    if stage_map.relative_to_root(rel) is None and not GlobMatcher(stage_map.global_paths).matches(
        rel
    ):
        return rel
    return None


def _check_schemas_mapped(stage: Stage, stage_map: StageMap, problems: Problems) -> None:
    """A contract's schema file beside the suite is what the stage is graded on: like
    a rubric, the map must reach it, or a change to it would select no stage."""
    if stage.contract is None or "produces" not in stage.contract_fields:
        return
    items = stage.contract_fields["produces"].sequence()
    for produced in stage.contract.produces:
        if produced.schema_source == "inline":
            continue
        rel = _unmapped(Path(produced.schema_source), stage_map)
        if rel is None:
            continue
        field = items[produced.index].mapping(contracts.PRODUCES_KEYS)["schema"]
        folder = Path(os.path.relpath(Path(produced.schema_source).parent, stage_map.file.parent))
        problems.report(
            field.error(
                f"the schema {rel} is in no stage of the stage map {stage_map.display}: "
                "a change to it would run nothing",
                hint=f"add {folder.as_posix()!r} to its global: (a change then runs every stage)",
            )
        )


def _check_rubrics_mapped(
    suite: Suite, stage: Stage, stage_map: StageMap, problems: Problems
) -> None:
    """Each of the stage reviewer's `suite:` rubric files is under the map's root
    (entries then cover it, check-coverage sees to that) or a global path: else a
    change to it would select no stage at all."""
    config = stage.grading.reviewer
    if config is None or not any(p.startswith(SUITE_PREFIX) for p in config.rubrics):
        return
    try:
        found = config.rubric_set(suite.plugin.path, suite.root)
    except UserError:
        return  # already reported where the reviewer was loaded
    for path in suite_files(found):
        rel = _unmapped(path, stage_map)
        if rel is not None:
            field = stage.extra["reviewer"].mapping(REVIEWER_KEYS)["rubrics"]
            folder = Path(os.path.relpath(path.parent, stage_map.file.parent)).as_posix()
            problems.report(
                field.error(
                    f"the rubric {rel} is in no stage of the stage map {stage_map.display}: "
                    "a change to it would run nothing",
                    hint=f"add {folder!r} to its global: (a change then runs every stage)",
                )
            )
            return
