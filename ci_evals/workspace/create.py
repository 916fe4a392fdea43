"""A fresh workspace for one scenario: the plugin copied in, fixtures laid down.

Layout, under the folder `parent` the runner picks (a temporary folder outside the
repository and the run folder: `$TMPDIR/ci-evals-<run-id>-*/`):

    parent/plugin/     a copy of the suite's plugin; the SDK loads it as a local plugin
    parent/workspace/  the agent's folder: the seed `fixtures/0-<name>/` (if there is
                       one), then fixtures 1..N-1 merged over it, plus links
                       `agents -> ../plugin/agents`, `skills -> ../plugin/skills`, ...

Why copies and not links into the repository: the agent runs with permissions
bypassed; a link into the repo would let it rewrite the plugin or the fixtures
under test. Fixtures are copied as `cp -r` does (`copy_file_range`, reflinks where
the file system has them), from a merged plan (a file a later fixture overwrites
is copied once); the stat of every copy becomes the workspace's baseline
snapshot (`benchmarks/bench_workspace.py`). A fixture's links are kept only while
they stay inside it, the plugin copy dereferences them, and a fixture lays down
what the checkout holds less `.git` and what git ignores or, in CI, does not
track: docs/suite.md and docs/isolation.md (*What a fixture or scaffold folder
lays down*).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.fs.copy import copy_many
from ci_evals.fs.copyable import escape_problem, holds_repository_problem, is_git
from ci_evals.fs.links import outside
from ci_evals.fs.plugin_copy import copy_plugin
from ci_evals.fs.snapshot import (
    RACY_NS,
    Changes,
    Snapshot,
    SnapshotEntry,
    diff_snapshots,
    link_entry,
    seeded_entry,
    take_snapshot,
)
from ci_evals.fs.walk import walk
from ci_evals.suite.contracts import seed_folder
from ci_evals.suite.load import Scenario, Stage, Suite
from ci_evals.text import display_path
from ci_evals.workspace.mocks import ServedMocks, serve_mocks

PLUGIN_DIR = "plugin"
WORKSPACE_DIR = "workspace"
GIT_DIR = ".git"


@dataclass(frozen=True)
class Workspace:
    """Where one scenario runs. Paths are absolute."""

    parent: Path  # the folder holding both below; remove it to clean up
    root: Path  # the agent's workspace (`{workspace}` in templates)
    plugin: Path  # the plugin copy (`{plugin}`; the SDK's local plugin path)
    fixtures: tuple[Path, ...]  # fixture folders laid down, in order (the seed first)
    links: tuple[str, ...] = field(default=())  # component links made in `root`
    # What `root` holds right after set-up, with fixture files not yet hashed:
    # pass it as `previous` to the first `take_snapshot` (see snapshot.py).
    baseline: Snapshot | None = field(default=None, compare=False, repr=False)
    # The plugin copy as made, to tell whether the agent changed it.
    plugin_baseline: Snapshot | None = field(default=None, compare=False, repr=False)
    # `git: true`: the SHA of its one commit, the scaffold and the seed (`git.init_workspace`).
    commit: str | None = None
    # A case unit's: a repository with no commit, as a `claude plugin eval` run's
    # folder lies in one (`git.init_case_workspace`).
    repository: bool = False
    # A case unit's MCP mocks as served for its run (`workspace.mocks`); None: not a case.
    mocks: ServedMocks | None = None

    @property
    def unrecorded(self) -> tuple[str, ...]:
        """What snapshots and saved states leave out: the repository's own `.git`
        (the agent writes its config; git run on it runs what that config names,
        so it never leaves the workspace and no grader sees it)."""
        return (GIT_DIR,) if self.commit is not None or self.repository else ()

    def values(self, suite: Suite, stage: Stage, scenario: Scenario) -> dict[str, str]:
        """The template values for this workspace (inputs plus built-ins)."""
        return suite.template_values(stage, scenario, workspace=self.root, plugin=self.plugin)

    def prompt_for(
        self, suite: Suite, stage: Stage, scenario: Scenario, *, without: bool = False
    ) -> str:
        """The stage's prompt here; `without`: the run without the plugin's."""
        return suite.prompt_for(
            stage, scenario, workspace=self.root, plugin=self.plugin, without=without
        )

    def cwd_for(self, suite: Suite, stage: Stage, scenario: Scenario) -> Path:
        """The stage's working folder inside `root`, created if a fixture did not."""
        path = suite.cwd_for(stage, scenario, workspace=self.root, plugin=self.plugin)
        # Folder by folder, never through a link: an earlier stage may have replaced
        # one with a link out of the workspace (the host's folders are not ours to
        # create in, and the sandbox must not bind what it points at).
        current = self.root
        for part in path.relative_to(self.root).parts:
            current = current / part
            if current.is_symlink():
                raise ValueError(f"the stage's folder {current} is a symbolic link")
            current.mkdir(exist_ok=True)
        return path

    def plugin_snapshot(
        self, previous: Snapshot | None, *, max_bytes: int, max_files: int
    ) -> Snapshot:
        """The plugin copy now, bounded as a stage's workspace is (`TooLarge`,
        `TooMany`): the agent writes there as freely as in the workspace, and
        60,000 empty files in it were hashed and listed whole."""
        return take_snapshot(
            self.plugin, previous=previous, max_bytes=max_bytes, max_files=max_files
        )

    def plugin_changes(self, *, max_bytes: int = 1 << 30, max_files: int = 10_000) -> Changes:
        """What has been changed in the plugin copy since set-up, within the limits
        (the stages' defaults; `TooLarge` over them).

        The agent can reach the copy (through the component links, or by its
        path) and a change there alters what later stages and reviewers load;
        the runner should report it. Nothing in the repository is affected.
        """
        if self.plugin_baseline is None:
            return Changes((), (), ())
        now = self.plugin_snapshot(self.plugin_baseline, max_bytes=max_bytes, max_files=max_files)
        return diff_snapshots(self.plugin_baseline, now)

    def remove(self) -> None:
        """Delete `parent` and everything in it (links are removed, not followed)."""
        shutil.rmtree(self.parent, ignore_errors=True)


# -- fixtures -----------------------------------------------------------------


@dataclass
class _Plan:
    """What to create in the workspace, merged over all fixtures (later wins).

    Plain strings, not `Path`s: building 10,000 `Path` objects costs more than
    the walk itself.
    """

    dirs: dict[str, str] = field(default_factory=dict)  # relative path -> source folder
    files: dict[str, str] = field(default_factory=dict)  # relative path -> source file
    links: dict[str, str] = field(default_factory=dict)  # relative path -> link target
    link_sources: dict[str, str] = field(default_factory=dict)  # relative path -> fixture link


def check_fixtures(
    suite: Suite, from_stage: Stage | int, scenario: Scenario | None = None
) -> tuple[Path, ...]:
    """Check that the seed (if any) and fixtures 1..N-1 exist and hold no escaping
    links; return their folders, in the order they are laid down.

    `scenario`'s own fixtures when it has some, else the suite's. Called by
    `run` before anything starts; `create_workspace` calls it again.
    """
    folders, _ = _plan(suite, from_stage, scenario)
    return folders


def _plan(
    suite: Suite, from_stage: Stage | int, scenario: Scenario | None = None, *, after: bool = False
) -> tuple[tuple[Path, ...], _Plan]:
    number = from_stage if isinstance(from_stage, int) else from_stage.number
    if not 1 <= number <= len(suite.stages) and not (number == 1 and suite.plugin_evals):
        suite.stage(number)  # raises the "unknown stage" error listing the stages
    # The task's scaffold first, then the seed (`fixtures/0-*/`): together stage 0's
    # output, what stage 1 starts from.
    folders: list[Path] = [suite.scaffold] if suite.scaffold is not None else []
    seed = seed_folder(suite.fixtures_for(scenario))
    if seed is not None:
        folders.append(seed)
    for stage in suite.stages[: number if after else number - 1]:
        folder = suite.fixture_dir(stage, scenario)
        if not folder.is_dir():
            whose = f" of scenario {scenario.id!r}" if scenario and scenario.fixtures else ""
            raise UserError(
                f"missing fixture folder{whose} for stage {stage.number} ({stage.name}): "
                f"{display_path(folder)}",
                file=suite.display,
                hint=_missing_fixture_hint(suite.fixtures_for(scenario), stage.number, number),
            )
        folders.append(folder)
    plan = _Plan()
    within = suite.link_root
    in_work_tree = os.path.lexists(within / GIT_DIR)
    for folder in folders:
        # A fixture folder that is (or lies under) a link is read through it:
        # it must resolve inside the repository and outside .git, as the plugin's
        # links, and lie below the repository's top (docs/isolation.md, *Fixtures*).
        problem = escape_problem(str(folder), within) or holds_repository_problem(folder, within)
        if problem is not None:
            what = "scaffold folder" if folder == suite.scaffold else "fixture folder"
            raise UserError(f"{what} {display_path(folder)} {problem}", file=suite.display)
        try:
            left = _left_out(folder, tracked_only=suite.tracked_only) if in_work_tree else ()
            _add_fixture(plan, folder, left)
        except OSError as exc:
            raise UserError(
                f"cannot read fixture {display_path(exc.filename or folder)}: {exc.strerror or exc}"
            ) from None
    _check_merged_links(plan)
    return tuple(folders), plan


def _missing_fixture_hint(fixtures: Path, stage: int, from_stage: int) -> str:
    """Name a near miss (`3-plan-output` for `3-plan-lab-output`) if there is one."""
    try:
        near = sorted(
            entry.name
            for entry in os.scandir(fixtures)
            if entry.is_dir() and entry.name.startswith(f"{stage}-")
        )
    except OSError:
        near = []
    if near:
        return f"found {', '.join(near)}; the folder must be named <k>-<stage name>-output"
    return (
        f"a run from stage {from_stage} lays down the outputs of stages 1-{from_stage - 1}"
        f" from {display_path(fixtures)}/<k>-<stage>-output/"
    )


def _left_out(folder: Path, *, tracked_only: bool) -> tuple[str, ...]:
    """What of a fixture folder of a work tree is never laid down: what git ignores,
    and with `tracked_only` (in CI) everything git does not track.

    By the repository's own rules not part of it: earlier run folders
    (`.ci-evals/`), `.env`, a credentials file a CI step wrote. A fixture a
    developer has written but not yet added is not ignored, and is laid down
    locally; in CI an untracked file is a CI step's, never the pull request's.
    """
    found = git.untracked_under if tracked_only else git.ignored_under
    try:
        return tuple(path.rstrip("/") for path in found(folder))
    except git.GitError as exc:  # fail closed: what git ignores is unknown
        raise UserError(
            f"cannot tell what git ignores in fixture folder {display_path(folder)}: {exc}"
        ) from None


def _add_fixture(plan: _Plan, folder: Path, ignored: tuple[str, ...] = ()) -> None:
    """Add what `folder` holds to the plan: never a `.git` (at any depth: a nested
    repository's, a submodule's, with their configs and tokens), nor what git ignores."""
    skipped: tuple[str, ...] = ()  # the `.git` folders met: what is below them is left out
    for rel, kind, entry in walk(folder, exclude=ignored):
        if skipped and rel.startswith(skipped):
            continue
        if is_git(entry.name):
            skipped = (*skipped, rel + "/")
            continue
        if kind == "link":
            target = os.readlink(entry.path)
            _check_link(folder, rel, target, entry.path)
            _claim(plan, rel, entry.path, "link")
            plan.links[rel] = target
            plan.link_sources[rel] = entry.path
        elif kind == "dir":
            _claim(plan, rel, entry.path, "dir")
            plan.dirs[rel] = entry.path
        elif kind == "file":
            _claim(plan, rel, entry.path, "file")
            plan.files[rel] = entry.path
        else:
            raise UserError(
                "fixture holds something that is not a file, folder or link: "
                f"{display_path(entry.path)}"
            )


def _check_link(folder: Path, rel: str, target: str, path: str) -> None:
    """Refuse a link that is absolute or leaves its fixture folder."""
    if os.path.isabs(target):
        raise UserError(
            f"fixture link {display_path(path)} -> {target} is absolute",
            hint="links in fixtures must be relative and stay inside their fixture folder",
        )
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if resolved == ".." or resolved.startswith(".." + os.sep):
        raise UserError(
            f"fixture link {display_path(path)} -> {target} points outside {display_path(folder)}",
            hint="links in fixtures must stay inside their fixture folder",
        )


def _check_merged_links(plan: _Plan) -> None:
    """Resolve every link the way the system will in the merged workspace.

    Read as text, `here/../x` stays inside; but if `here -> .`, the system
    resolves it to the workspace's parent. Links from different fixtures can
    chain like that, so the check runs on the merged plan.
    """
    for rel, target in plan.links.items():
        problem = outside(plan.links, rel, target)
        if problem:
            raise UserError(
                f"fixture link {display_path(plan.link_sources[rel])} -> {target} {problem}",
                hint="links in fixtures must stay inside their fixture folder",
            )


def _claim(plan: _Plan, rel: str, path: str, kind: str) -> None:
    """A later fixture may replace a file or link, or merge into a folder, nothing else."""
    earlier = "dir" if rel in plan.dirs else "file" if rel in plan.files else None
    if earlier is None and rel in plan.links:
        earlier = "link"
    if earlier is None:
        return
    if earlier == "dir" and kind == "dir":
        return
    if earlier != "dir" and kind != "dir":
        plan.files.pop(rel, None)
        plan.links.pop(rel, None)
        return
    raise UserError(
        f"fixture {display_path(path)} is a {kind}, but an earlier fixture has a {earlier} "
        f"at {rel}",
        hint="a later fixture can replace files, not turn a folder into a file or back",
    )


# -- copying ------------------------------------------------------------------


def create_workspace(
    suite: Suite,
    from_stage: Stage | int,
    parent: Path,
    scenario: Scenario | None = None,
    *,
    run_dir: Path | None = None,
    after: bool = False,
    offered: bool = True,
) -> Workspace:
    """Make `parent/plugin` and `parent/workspace` for a run starting at `from_stage`
    (with `scenario`'s own fixtures when it has some); `after`: the workspace as
    it is after `from_stage`, its fixture laid too (what `check-fixtures` grades).
    The plugin copy takes `Plugin.files`, less `run_dir` (the run's own folder,
    when the plugin holds it). `offered` False: the run without the plugin -- the
    copy is made for the graders, but no component link leads the agent to it."""
    folders, plan = _plan(suite, from_stage, scenario, after=after)
    parent = Path(os.path.abspath(parent))
    parent.mkdir(parents=True, exist_ok=True)
    plugin = parent / PLUGIN_DIR
    root = parent / WORKSPACE_DIR
    for path in (plugin, root):
        if os.path.lexists(path):
            raise UserError(
                f"workspace folder already exists: {display_path(path)}",
                hint="every scenario and repeat needs a fresh folder",
            )
    files = suite.plugin.files
    if files is not None and run_dir is not None:
        files = files.leaving(suite.plugin.path, [(run_dir, "the run folder")])
    copy_plugin(
        suite.plugin.path,
        plugin,
        suite.plugin.manifest_to_write,
        within=suite.plugin.link_root,
        files=files,
    )
    mocks = None
    case = scenario.stage.case if scenario is not None and scenario.stage is not None else None
    if case is not None and suite.plugin_evals is not None:
        # Before the plugin's baseline: the stand-ins are the plugin copy as made.
        mocks = serve_mocks(
            plugin,
            suite.plugin.name,
            parent,
            case.mocks,
            max_turns=case.max_turns,
            judge_model=suite.plugin_evals.judge_model,
        )
    root.mkdir()
    entries = _lay_down(plan, root)
    # A case unit starts in an empty folder, as a `claude plugin eval` run does.
    linked = suite.plugin_evals is None and offered
    links = _link_components(plugin, root) if linked else ()
    for name in links:
        entries[name] = link_entry(os.lstat(root / name), os.readlink(root / name))
    commit = None
    if scenario is not None and scenario.git:  # after the links: they are excluded
        # The scaffold and the seed are the first commit; the fixtures of the
        # stages before lie on top uncommitted, as those stages left their work.
        seeded = (suite.scaffold, seed_folder(suite.fixtures_for(scenario)))
        commit = _init_repository(root, [f for f in folders if f in seeded], links)
    case_unit = scenario is not None and scenario.stage is not None
    if case_unit:
        _init_repository(root, None, ())
    plugin_baseline = take_snapshot(plugin)  # small: hashing it all takes milliseconds
    # Let the clock move past the files just written, so that their times are
    # settled (not "racy") for every snapshot from now on.
    time.sleep(RACY_NS * 1.2 / 1e9)
    baseline = Snapshot(root=root, entries=entries, taken_ns=time.time_ns())
    return Workspace(
        parent=parent,
        root=root,
        plugin=plugin,
        fixtures=folders,
        links=links,
        baseline=baseline,
        plugin_baseline=plugin_baseline,
        commit=commit,
        repository=case_unit,
        mocks=mocks,
    )


def _init_repository(root: Path, committed: list[Path] | None, links: tuple[str, ...]) -> str:
    """`committed` None: a case unit's repository, with no commit (the SHA is "")."""
    try:
        if committed is None:
            git.init_case_workspace(root)
            return ""
        return git.init_workspace(root, committed, exclude=links)
    except (git.GitError, OSError) as exc:
        why = "a claude plugin eval case runs in one" if committed is None else "git: true"
        raise UserError(
            f"cannot make the workspace a git repository: {exc}",
            hint=f"git must be installed ({why})",
        ) from None


def _lay_down(plan: _Plan, root: Path) -> dict[str, SnapshotEntry]:
    """Create the plan under `root`; return snapshot entries for what was made."""
    base = str(root) + os.sep
    entries: dict[str, SnapshotEntry] = {}
    # Sorted, parents come before their children.
    for rel in sorted(plan.dirs):
        os.mkdir(base + rel)
    # One thread: copy_file_range keeps the data in the kernel, and on two
    # shared cores threads measured slower than a plain loop (benchmark).
    files = plan.files
    jobs = [(source, base + rel) for rel, source in files.items()]
    for (rel, source), info in zip(files.items(), copy_many(jobs), strict=True):
        entries[rel] = seeded_entry(info, source)
    for rel, target in plan.links.items():
        os.symlink(target, base + rel)
        entries[rel] = link_entry(os.lstat(base + rel), target)
    return entries


def _link_components(plugin: Path, root: Path) -> tuple[str, ...]:
    """Link each top-level plugin folder into the workspace, unless a fixture has the name."""
    made: list[str] = []
    for entry in sorted(os.scandir(plugin), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        link = root / entry.name
        if os.path.lexists(link):
            continue  # the fixture's file or folder wins
        os.symlink(os.path.join("..", PLUGIN_DIR, entry.name), link)
        made.append(entry.name)
    return tuple(made)
