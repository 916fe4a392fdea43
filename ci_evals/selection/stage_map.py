"""`stage_map.yaml`: which plugin files belong to which stage, loaded once into frozen records.

    version: 1
    root: plugin                 # the plugin folder; globs are relative to it
    stages: [research, plan, generate]
    entries:
      - { glob: "agents/researcher.md", stage: 1 }
      - { glob: "skills/plan/**",       stage: plan, except: [skills/plan/old/**] }
    global: [/ci-evals.yaml, stub/**]  # a change they match -> stage 1
    fixtures: fixtures           # fixtures/<k>-*/ changed -> stage k+1

A map can also select units (`ci_evals.selection.units`: an entry's `scenarios:`,
or a map of `claude plugin eval` cases with `evals:`), and narrow a change to the
marketplace file or the plugin's manifest (`marketplace`, `ignore_metadata`:
`selection.manifest_change`). Paths are relative to the map file's folder and
stored repo-relative (`global`: `ci_evals.selection.global_globs`). Every mistake
is a `UserError` naming file, line, column and field (exit 2); duplicate entries
only warn. Globs are checked by `ci_evals.selection.glob_syntax.glob_problem`, the
same rules the matcher relies on. Every key: docs/stage-map.md.
"""

from __future__ import annotations

import os
import posixpath
import sys
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.fs.copyable import escape_problem
from ci_evals.selection import map_cache
from ci_evals.selection.glob_syntax import (
    glob_problem,
    is_literal,
    literal_glob,
    remember_regexes,
)
from ci_evals.selection.global_globs import (
    CHECKOUT_FILES,
    repo_glob,
    split_navigation,
    under_root,
)
from ci_evals.selection.matcher import needed_regexes
from ci_evals.text import display_path

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

MAP_NAME = "stage_map.yaml"
SUPPORTED_VERSION = 1
# `global` when the key is absent, as (folders up from the map's, glob): the
# suite config next to the map and the usual workflow file at the top of the
# repository (the map itself is always added). -1: from the repository top.
DEFAULT_GLOBAL = ((0, "/ci-evals.yaml"), (-1, "/.github/workflows/evals.yml"))

_TOP_KEYS = (
    "version",
    "root",
    "stages",
    "entries",
    "global",
    "fixtures",
    "marketplace",
    "ignore_metadata",
    "evals",
)
_ENTRY_KEYS = ("glob", "stage", "except", "scenarios", "cases", "tags")
_REQUIRED_ENTRY_KEYS = ("glob", "stage")
# A case map (`evals:`) has one stage: every case unit runs its own stage 1.
CASES_STAGE = "cases"
# `stage: none`: no stage reads what the entry matches.
NO_STAGE = "none"


@dataclass(frozen=True)
class MapEntry:
    glob: str  # as written (root-relative, gitignore style)
    stage: int | None  # 1-based stage number (names resolved at load); None: `stage: none`
    line: int  # 1-based line of the entry in the map file
    index: int  # position in `entries`
    column: int = 1  # 1-based column of the entry's glob
    # `except:` globs (root-relative): files `glob` matches that the entry leaves out.
    excepts: tuple[str, ...] = ()
    # The units its files reach (`selection.units`); all empty: every unit.
    scenarios: tuple[str, ...] = ()  # scenario ids (a map of stages)
    cases: tuple[str, ...] = ()  # case name globs, `*` and `?` as `--case` (a case map)
    tags: tuple[str, ...] = ()  # case tags, any of them (a case map)

    @property
    def units(self) -> bool:
        """True when the entry names the units its files reach (not every one)."""
        return bool(self.scenarios or self.cases or self.tags)


@dataclass(frozen=True)
class MarketplaceRef:
    """`marketplace:`: the marketplace file that lists the plugin, and its entry's name.

    A change to the file counts only where the plugin's own entry (or what
    resolves its source) changed (`selection.manifest_change`)."""

    file: str  # repo-relative path of the marketplace file
    plugin: str  # the `name` of the plugin's entry in its `plugins` list
    line: int  # of `marketplace:` in the map file


@dataclass(frozen=True)
class GlobalGlob:
    glob: str  # as written (relative to the map's folder); the map's own path for it
    path: str  # the same glob relative to the repository top: what paths are matched to
    line: int  # 1-based line in the map file (0: not written there, a default)
    column: int
    index: int  # position in `global` (-1: the map itself or a default)

    @property
    def wildcard(self) -> bool:
        """True when it is a glob rather than a path: it should match some file."""
        return self.index >= 0 and any(ch in self.glob for ch in "*?[")


@dataclass(frozen=True)
class StageMap:
    file: Path  # absolute path of the map file
    repo_root: Path  # absolute work-tree root
    display: str  # the map's path as messages show it (`text.display_path`: cwd-relative)
    root: str  # plugin folder, repo-relative POSIX, no trailing slash ("" = repo top)
    stages: tuple[str, ...]  # stage names, index 0 = stage 1
    entries: tuple[MapEntry, ...]
    global_globs: tuple[GlobalGlob, ...]  # the map file itself always first
    # The globals as root-relative globs, for the entries' matcher (see
    # `selection_globs`); None when one cannot be rewritten so exactly.
    root_globals: tuple[str, ...] | None
    fixtures: str | None  # repo-relative POSIX folder, or None
    warnings: tuple[str, ...] = field(default=())  # one line each, `path:line: warning: ...`
    marketplace: MarketplaceRef | None = None
    # `ignore_metadata:` keys (among `manifest_change.METADATA_KEYS`) that a change to
    # the plugin's manifest or marketplace entry may touch without selecting a stage.
    ignore_metadata: tuple[str, ...] = ()
    # The map's repo-relative POSIX path: a global path, and what GitHub annotations name.
    path: str = MAP_NAME
    # `evals:`: the eval folder of a suite of cases, repo-relative, under root; None: a
    # map of stages. A case map selects case units (`selection.units`).
    evals: str | None = None

    @property
    def selects_units(self) -> bool:
        """True when a change selects units too: a case map, or an entry naming scenarios."""
        return self.evals is not None or any(e.scenarios for e in self.entries)

    def stage_of(self, value: str | int) -> int:
        """A stage name or number (1-based, also as a string) -> its number."""
        return _stage_number(value, self.stages, None, self.display)

    def relative_to_root(self, repo_path: str) -> str | None:
        """`repo_path` relative to `root`, or None when it is not under `root`."""
        if not self.root:
            return repo_path
        if (
            repo_path.startswith(self.root)
            and repo_path[len(self.root) : len(self.root) + 1] == "/"
        ):
            return repo_path[len(self.root) + 1 :]
        return None

    @property
    def globs(self) -> tuple[str, ...]:
        return tuple(entry.glob for entry in self.entries)

    @property
    def global_paths(self) -> tuple[str, ...]:
        """The globals as repo-relative globs (what a changed path is matched against)."""
        return tuple(g.path for g in self.global_globs)

    @property
    def selection_globs(self) -> tuple[str, ...]:
        """The entries' globs, then the globals that can match under root (root-relative).

        `compute-stage`'s matcher is built from these, so that one pass over a
        changed file under root answers both "which entries" and "global?"
        (`ci_evals.selection.decide` tells the two apart by position).
        """
        return (*self.globs, *(self.root_globals or ()))

    @property
    def manifest_path(self) -> str | None:
        """The plugin's `.claude-plugin/plugin.json`, repo-relative, when a change to it
        is compared (`ignore_metadata` given); else None."""
        if not self.ignore_metadata:
            return None
        return f"{self.root}/{_MANIFEST}" if self.root else _MANIFEST

    @property
    def compared_paths(self) -> frozenset[str]:
        """The files a change to which is decided by comparing their two versions
        (`selection.manifest_change`) instead of by the entries and globals."""
        found = {self.marketplace.file} if self.marketplace is not None else set()
        if self.manifest_path is not None:
            found.add(self.manifest_path)
        return frozenset(found)


_MANIFEST = ".claude-plugin/plugin.json"


# Work-tree roots found by `default_map_path`: loading the map it returns
# then needs no second `git rev-parse --show-toplevel`.
_known_roots: set[Path] = set()


def default_map_path(cwd: Path) -> Path:
    """The nearest `stage_map.yaml` from `cwd` up to the top of its repository (the
    rule `find_suite` follows for `ci-evals.yaml`, so `evals/<name>/` holding both
    works from there); `<top>/stage_map.yaml` when there is none, for the message."""
    top = git.toplevel(cwd)
    _known_roots.add(top)
    folder = Path(os.path.realpath(cwd))  # as git names the top: links resolved
    while folder != top and folder.is_relative_to(top):
        if os.path.isfile(folder / MAP_NAME):
            return folder / MAP_NAME
        folder = folder.parent
    return top / MAP_NAME


def _toplevel(folder: Path) -> Path:
    if folder in _known_roots and (folder / ".git").exists():
        return folder
    return git.toplevel(folder)


def load_stage_map(path: Path, *, warn: bool = True, cache: bool = True) -> StageMap:
    """Read and validate a stage map; any mistake is a one-line `UserError`.

    Duplicate entries are warnings: printed to stderr (unless `warn` is False)
    and kept in `StageMap.warnings`. A map that loaded before, unchanged, comes
    from `ci_evals.selection.map_cache` (same record, no YAML or pathspec import).
    """
    file = Path(os.path.abspath(path))
    if not file.is_file():
        raise UserError(
            "file not found" if not file.exists() else "not a file",
            file=display_path(file),
            hint=f"create {MAP_NAME} here or above, up to your repository's top, "
            "or pass --map PATH",
        )
    repo_root = _toplevel(file.parent)
    # A map committed as a link to `.git/config` would be echoed by a YAML error.
    problem = escape_problem(str(file), os.path.realpath(repo_root))
    if problem is not None:
        raise UserError(f"{display_path(file)} {problem}")
    folder = _repo_relative_folder(file.parent, repo_root)
    names = _Names(posixpath.join(folder, file.name) if folder else file.name, display_path(file))
    stage_map: StageMap | None = None
    if cache and map_cache.enabled():
        where = map_cache.cache_path(repo_root, file)
        data = file.read_bytes()
        key = map_cache.key(file, repo_root, folder, data)
        stage_map = _from_cache(map_cache.read(where, key), file, repo_root, names)
        if stage_map is None:
            stage_map = _load(file, repo_root, folder, names)
            # The loader read the file again: save only if that was these bytes.
            if file.read_bytes() == data:
                map_cache.write(where, key, _to_cache(stage_map))
    else:
        stage_map = _load(file, repo_root, folder, names)
    if warn:
        # Kept (and cached) under the repo-relative path; shown from here.
        cached = names.path + ":"
        for warning in stage_map.warnings:
            shown = names.display + warning[len(names.path) :]
            print(shown if warning.startswith(cached) else warning, file=sys.stderr)
    return stage_map


class _Names(NamedTuple):
    path: str  # repo-relative: the same from any folder, so it can be cached
    display: str  # from the current folder: only messages use it


def _to_cache(stage_map: StageMap) -> tuple[object, ...]:
    """The record as plain values (marshal-able), with the pathspec regexes it needs."""
    return (
        stage_map.root,
        stage_map.stages,
        tuple(
            (e.glob, e.stage, e.line, e.index, e.column, e.excepts, e.scenarios, e.cases, e.tags)
            for e in stage_map.entries
        ),
        tuple((g.glob, g.path, g.line, g.column, g.index) for g in stage_map.global_globs),
        stage_map.root_globals,
        stage_map.fixtures,
        stage_map.warnings,
        needed_regexes(
            (
                *stage_map.selection_globs,
                *stage_map.global_paths,
                *(g for e in stage_map.entries for g in e.excepts),
            )
        ),
        None
        if stage_map.marketplace is None
        else (stage_map.marketplace.file, stage_map.marketplace.plugin, stage_map.marketplace.line),
        stage_map.ignore_metadata,
        stage_map.evals,
    )


def _from_cache(value: object, file: Path, repo_root: Path, names: _Names) -> StageMap | None:
    """`_to_cache` reversed, or None when `value` is not what it wrote (or root is gone)."""
    if not isinstance(value, tuple) or len(value) != 11:
        return None
    (root, stages, entries, global_globs, root_globals, fixtures, warnings, regexes) = value[:8]
    market, ignored, evals = value[8:]
    try:
        record = StageMap(
            file=file,
            repo_root=repo_root,
            display=names.display,
            path=names.path,
            root=str(root),
            stages=tuple(stages),
            entries=tuple(MapEntry(*fields) for fields in entries),
            global_globs=tuple(GlobalGlob(*fields) for fields in global_globs),
            root_globals=None if root_globals is None else tuple(root_globals),
            fixtures=None if fixtures is None else str(fixtures),
            warnings=tuple(warnings),
            marketplace=None if market is None else MarketplaceRef(*market),
            ignore_metadata=tuple(ignored),
            evals=None if evals is None else str(evals),
        )
        # The loader checked this on disk; the disk may have changed since.
        if not (repo_root / root if root else repo_root).is_dir():
            return None
        remember_regexes(dict(regexes))
    except (TypeError, ValueError):
        return None
    return record


def _load(file: Path, repo_root: Path, folder: str, names: _Names) -> StageMap:
    """The real loader: parse and validate everything (warnings not printed here)."""
    from ci_evals.config.yaml_source import load  # noqa: PLC0415 - not needed on a cache hit

    doc = load(file, names.display)
    top = doc.mapping(
        _TOP_KEYS, ("version", "root", "entries"), what="mapping of stage-map settings"
    )
    if "evals" in top and "stages" in top:
        raise top["stages"].error(
            "a map with evals: (a suite of cases) has no stages",
            hint="every case runs its own one stage: send files to cases with cases: or tags:",
        )
    if "evals" not in top and "stages" not in top:
        raise doc.error("missing required key 'stages'", hint="or evals: for a suite of cases")

    version = top["version"].as_int()
    if version != SUPPORTED_VERSION:
        raise top["version"].error(
            f"unsupported version {version}",
            hint=f"this ci-evals reads version {SUPPORTED_VERSION}",
        )
    stages = _stages(top["stages"]) if "stages" in top else (CASES_STAGE,)
    root = _inside_repo(top["root"], folder, repo_root, must_be_dir=True)
    evals = _evals(top["evals"], folder, repo_root, root) if "evals" in top else None
    entries, warnings = _entries(top["entries"], stages, names.path, cases=evals is not None)
    fixtures = None
    if "fixtures" in top and not top["fixtures"].is_null():
        fixtures = _inside_repo(top["fixtures"], folder, repo_root)
    global_globs, root_globals = _globals(top, folder, names.path, root, fixtures)
    marketplace = None
    if "marketplace" in top:
        marketplace = _marketplace(top["marketplace"], folder)
    ignore_metadata: tuple[str, ...] = ()
    if "ignore_metadata" in top:
        ignore_metadata = _ignore_metadata(top["ignore_metadata"])
    return StageMap(
        file=file,
        repo_root=repo_root,
        display=names.display,
        path=names.path,
        root=root,
        stages=stages,
        entries=entries,
        global_globs=global_globs,
        root_globals=root_globals,
        fixtures=fixtures,
        warnings=tuple(warnings),
        marketplace=marketplace,
        ignore_metadata=ignore_metadata,
        evals=evals,
    )


def _evals(node: LocatedNode, folder: str, repo_root: Path, root: str) -> str:
    """`evals:`: the eval folder, relative to the map's folder, inside `root` (its
    changes are decided case by case; elsewhere they would be no plugin file)."""
    evals = _inside_repo(node, folder, repo_root, must_be_dir=True)
    if root and evals != root and not evals.startswith(root + "/"):
        raise node.error(
            f"the eval folder {node.as_str()!r} is not inside root {root!r}",
            hint="keep the cases in the plugin's folder (its evals/, as claude plugin eval does)",
        )
    return evals


def _marketplace(node: LocatedNode, folder: str) -> MarketplaceRef:
    """`marketplace: {file: PATH, plugin: NAME}`: PATH as a global is written (relative
    to the map's folder, `../` to climb), naming one file."""
    keys = node.mapping(("file", "plugin"), ("file", "plugin"), what="mapping with file, plugin")
    item = keys["file"]
    base, glob = _global_glob(item, folder)
    if not all(is_literal(part) for part in glob.strip("/").split("/")) or glob.endswith("/"):
        raise item.error(
            f"{item.as_str()!r} is not one file's path",
            hint="name the marketplace file, e.g. /.claude-plugin/marketplace.json",
        )
    path = posixpath.join(base, glob.lstrip("/")) if base else glob.lstrip("/")
    plugin = keys["plugin"].as_str()
    if not plugin.strip():
        raise keys["plugin"].error("empty plugin name", hint="the `name` of the plugin's entry")
    return MarketplaceRef(path, plugin, node.line)


def _ignore_metadata(node: LocatedNode) -> tuple[str, ...]:
    """`ignore_metadata: [version, ...]`: only keys Claude Code loads nothing from."""
    from ci_evals.selection.manifest_change import METADATA_KEYS  # noqa: PLC0415 - loader only

    found: list[str] = []
    for item in node.sequence():
        key = item.as_str()
        if key not in METADATA_KEYS:
            raise item.error(
                f"{key!r} is not a metadata key: a change to it may change what Claude Code loads",
                hint=f"the metadata keys: {', '.join(METADATA_KEYS)}",
            )
        if key not in found:
            found.append(key)
    return tuple(found)


def _globals(
    top: dict[str, LocatedNode], folder: str, map_path: str, root: str, fixtures: str | None
) -> tuple[tuple[GlobalGlob, ...], tuple[str, ...] | None]:
    """The map itself, then `global` (or its default), then the files git applies at
    checkout (`checkout_globals`), once each; and their root-relative form."""
    own = literal_glob(map_path)
    if glob_problem(own) is not None:  # a line break in the map's own path, say
        raise UserError(
            "the stage map's path cannot be written as a glob",
            file=map_path,
            hint="keep the map in a folder whose name has no line break",
        )
    found = [(GlobalGlob(map_path, own, 0, 0, -1), under_root("", own, root))]
    if "global" in top:
        for index, item in enumerate(top["global"].sequence()):
            base, glob = _global_glob(item, folder)
            whole = repo_glob(base, glob)
            # Moved to the top a glob can become one the matcher refuses (`**/` in a
            # folder: `m/**/**/`): say so here rather than crash when matching.
            problem = glob_problem(whole)
            if problem is not None:
                raise item.error(
                    f"{item.as_str()!r} cannot be matched from the map's folder "
                    f"(as {whole!r}: {problem.message})",
                    hint="name the files it should match, e.g. `dir/**`",
                )
            under = under_root(base, glob, root)
            if under is not None and any(glob_problem(g) is not None for g in under):
                under = None  # no exact rewrite for root: matched path by path instead
            record = GlobalGlob(item.as_str(), whole, item.line, item.column, index)
            found.append((record, under))
    else:
        for ups, glob in DEFAULT_GLOBAL:
            base = "" if ups < 0 else folder
            record = GlobalGlob(glob, repo_glob(base, glob), 0, 0, -1)
            found.append((record, under_root(base, glob, root)))
    found += checkout_globals(root, fixtures)
    kept: dict[str, tuple[GlobalGlob, tuple[str, ...] | None]] = {}
    for record, under in found:
        kept.setdefault(record.path, (record, under))
    unders = [under for _, under in kept.values()]
    root_globals = None if None in unders else tuple(chain.from_iterable(u or () for u in unders))
    return tuple(record for record, _ in kept.values()), root_globals


# `GlobalGlob.index` of those globals: not written in the map.
CHECKOUT_INDEX = -2


def checkout_globals(
    root: str, fixtures: str | None
) -> list[tuple[GlobalGlob, tuple[str, ...] | None]]:
    """Globals the map never names: `.gitmodules` and `.lfsconfig` at the top, and
    every `.gitattributes` that applies to a file under root or fixtures — in a
    folder above either, or anywhere below one. (The repository's own
    `.git/info/attributes` is not in any commit.)"""
    folders = {""}
    for top in (root, fixtures):
        if top is None:
            continue
        parts = top.split("/") if top else []
        folders.update("/".join(parts[:n]) for n in range(1, len(parts)))
    found: list[tuple[GlobalGlob, tuple[str, ...] | None]] = []

    def add(base: str, glob: str) -> None:
        whole = repo_glob(base, glob)
        found.append((GlobalGlob(whole, whole, 0, 0, CHECKOUT_INDEX), under_root(base, glob, root)))

    for name in CHECKOUT_FILES[1:]:
        add("", "/" + name)
    for folder in sorted(folders):
        add("", literal_glob(f"{folder}/{CHECKOUT_FILES[0]}" if folder else CHECKOUT_FILES[0]))
    for top in (root, fixtures):
        if top is not None:
            add(top, CHECKOUT_FILES[0])  # unanchored: at any depth below `top`
    return found


def _global_glob(item: LocatedNode, folder: str) -> tuple[str, str]:
    """One written global as (its folder, repo-relative; the glob relative to it), checked."""
    written = item.as_str()
    ups, glob = split_navigation(written)
    parts = folder.split("/") if folder else []
    if ups > len(parts):
        raise item.error(
            f"{written!r} is outside the repository",
            hint="paths are relative to the stage map's folder and must stay in the repository",
        )
    if not glob:
        raise item.error(
            f"{written!r} names a folder, not files",
            hint="write 'FOLDER/**' for everything in it",
        )
    problem = glob_problem(glob)
    if problem is not None:
        raise item.error(problem.message, hint=problem.hint)
    base = "/".join(parts[: len(parts) - ups])
    if glob.lstrip("/").split("/")[0] == ".git" and not base:
        raise item.error(f"{written!r} is inside .git", hint="git never lists changes there")
    return base, glob


def _stages(node: LocatedNode) -> tuple[str, ...]:
    seen: dict[str, int] = {}
    for item in node.sequence(allow_empty=False):
        name = item.as_str()
        if name.strip() != name:
            raise item.error("stage name has leading or trailing whitespace")
        if name.isdigit():
            raise item.error(
                f"stage name {name!r} is a number",
                hint="entries may give a stage by number or by name, so names cannot be numbers",
            )
        if name in seen:
            raise item.error(
                f"duplicate stage name {name!r}", hint=f"also stage {seen[name]} in this list"
            )
        if name == NO_STAGE:
            raise item.error(
                f"stage name {NO_STAGE!r} is reserved",
                hint=f"an entry's `stage: {NO_STAGE}` says that no stage reads its files",
            )
        seen[name] = len(seen) + 1
    return tuple(seen)


def _entries(
    node: LocatedNode, stages: tuple[str, ...], path: str, *, cases: bool = False
) -> tuple[tuple[MapEntry, ...], list[str]]:
    entries: list[MapEntry] = []
    warnings: list[str] = []
    first_seen: dict[str, MapEntry] = {}
    for index, item in enumerate(node.sequence()):
        fields = item.mapping(
            _ENTRY_KEYS,
            ("glob",) if cases else _REQUIRED_ENTRY_KEYS,
            what="mapping with 'glob' and 'cases' or 'tags'"
            if cases
            else "mapping with 'glob' and 'stage'",
        )
        glob_field = fields["glob"]
        glob = glob_field.as_str(allow_empty=True)
        problem = glob_problem(glob)
        if problem is not None:
            raise glob_field.error(problem.message, hint=problem.hint)
        named = _unit_fields(item, fields, cases=cases)
        stage = _stage_field(fields["stage"], stages) if "stage" in fields else 1
        if cases and stage is not None and "stage" in fields:
            raise fields["stage"].error(
                "a case map's entries name cases, not stages",
                hint="write cases: [NAME-GLOB, ...] or tags: [TAG, ...], or stage: none",
            )
        if stage is None and any(named):
            key = next(k for k in ("scenarios", "cases", "tags") if k in fields)
            raise fields[key].error(
                f"{key}: beside stage: none", hint="no stage reads the files: no unit either"
            )
        excepts = _excepts(fields["except"]) if "except" in fields else ()
        entry = MapEntry(
            glob=glob,
            stage=stage,
            line=item.line,
            index=index,
            column=glob_field.column,
            excepts=excepts,
            scenarios=named[0],
            cases=named[1],
            tags=named[2],
        )
        earlier = first_seen.get(glob)
        if earlier is None:
            first_seen[glob] = entry
        else:
            same = (
                "same stage" if earlier.stage == stage else f"stage {_shown(earlier.stage)} there"
            )
            warnings.append(
                f"{path}:{glob_field.line}: warning: entries[{index}].glob: "
                f"{glob!r} repeats entries[{earlier.index}] (line {earlier.line}, {same}); "
                "the lowest stage wins, remove one"
            )
        entries.append(entry)
    return tuple(entries), warnings


def _unit_fields(
    item: LocatedNode, fields: dict[str, LocatedNode], *, cases: bool
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """An entry's (scenarios, cases, tags): the units its files reach, checked against
    the kind of map (scenarios in a map of stages, cases and tags in a case map)."""
    wrong = ("scenarios",) if cases else ("cases", "tags")
    for key in wrong:
        if key in fields:
            raise fields[key].error(
                f"{key}: in a map " + ("of cases" if cases else "of stages"),
                hint="a map with evals: names cases: or tags:; a map of stages names scenarios:",
            )
    found = []
    for key in ("scenarios", "cases", "tags"):
        values: list[str] = []
        if key in fields:
            for value in fields[key].sequence(allow_empty=False):
                text = value.as_str()
                if text.strip() != text:
                    raise value.error(f"{key}: {text!r} has leading or trailing whitespace")
                if key == "scenarios" and not (text.isprintable() and text.split() == [text]):
                    # `units` lists ids space-separated (`run --units`, the Actions output)
                    raise value.error(f"scenarios: {text!r} is no scenario id: it holds a space")
                values.append(text)
        found.append(tuple(dict.fromkeys(values)))
    if cases and "stage" not in fields and not (found[1] or found[2]):
        raise item.error(
            "the entry reaches no case",
            hint='add cases: [NAME-GLOB, ...] ("*": every case) or tags: [TAG, ...], '
            "or stage: none",
        )
    return found[0], found[1], found[2]


def _shown(stage: int | None) -> str:
    return NO_STAGE if stage is None else str(stage)


def _excepts(node: LocatedNode) -> tuple[str, ...]:
    """`except: [GLOB, ...]`: globs as the entry's are, relative to root."""
    found: list[str] = []
    for item in node.sequence(allow_empty=False):
        glob = item.as_str(allow_empty=True)
        problem = glob_problem(glob)
        if problem is not None:
            raise item.error(problem.message, hint=problem.hint)
        found.append(glob)
    return tuple(found)


def _stage_field(node: LocatedNode, stages: tuple[str, ...]) -> int | None:
    import yaml  # noqa: PLC0415 - only the real loader gets here

    if node.node.tag == "tag:yaml.org,2002:str" and node.as_str() == NO_STAGE:
        return None

    tag = node.node.tag
    if tag == "tag:yaml.org,2002:int":
        number = node.as_int()
        if not 1 <= number <= len(stages):
            raise node.error(f"stage {number} is out of range", hint=_stage_hint(stages))
        return number
    if tag != "tag:yaml.org,2002:str" or not isinstance(node.node, yaml.ScalarNode):
        raise node.error("expected a stage number or name", hint=_stage_hint(stages))
    return _stage_number(node.as_str(), stages, node, None)


def _stage_number(
    value: str | int, stages: tuple[str, ...], node: LocatedNode | None, file: str | None
) -> int:
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif value in stages:
        return stages.index(value) + 1
    elif value.strip().isdigit():
        number = int(value.strip())
    if number is not None and 1 <= number <= len(stages):
        return number
    message = (
        f"stage {number} is out of range" if number is not None else f"unknown stage {value!r}"
    )
    if node is not None:
        raise node.error(message, hint=_stage_hint(stages))
    raise UserError(message, file=file, field="stage", hint=_stage_hint(stages))


def _stage_hint(stages: tuple[str, ...]) -> str:
    names = ", ".join(f"{i}={name}" for i, name in enumerate(stages, start=1))
    return f"use 1..{len(stages)} or a name: {names} (or {NO_STAGE}: no stage reads its files)"


def _repo_relative_folder(folder: Path, repo_root: Path) -> str:
    """`folder` relative to the work-tree root, POSIX ('' for the top)."""
    try:
        relative = folder.resolve().relative_to(repo_root.resolve())
    except ValueError:  # pragma: no cover - git said folder is inside repo_root
        raise UserError("not inside the repository", file=str(folder)) from None
    text = relative.as_posix()
    return "" if text == "." else text


def _join(folder: str, path: str) -> str:
    """A path from the map, relative to `folder`, as repo-relative POSIX."""
    return posixpath.normpath(posixpath.join(folder, path)) if folder else posixpath.normpath(path)


def _inside_repo(node: LocatedNode, folder: str, repo_root: Path, must_be_dir: bool = False) -> str:
    """A folder path from the map (`root`, `fixtures`), checked to stay in the repo."""
    raw = node.as_str()
    if "\\" in raw:
        raise node.error("use '/' as the path separator", hint="paths are POSIX, relative")
    if os.path.isabs(raw) or raw.startswith("/"):
        raise node.error(
            f"absolute path {raw!r}", hint="paths are relative to the stage map's folder"
        )
    joined = _join(folder, raw)
    if joined == ".." or joined.startswith("../"):
        raise node.error(
            f"{raw!r} is outside the repository",
            hint="paths are relative to the stage map's folder and must stay in the repository",
        )
    if joined == ".git" or joined.startswith(".git/"):
        raise node.error(f"{raw!r} is inside .git")
    relative = "" if joined == "." else joined
    if must_be_dir:
        target = repo_root / relative if relative else repo_root
        if not target.is_dir():
            what = "is not a folder" if target.exists() else "does not exist"
            raise node.error(
                f"{raw!r} {what}", hint="root is the plugin folder, relative to the stage map"
            )
    return relative
