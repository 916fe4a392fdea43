"""The globs indexed by folder: what each folder contributes to the paths inside it.

A glob matches a path when the path itself, or one of its folders, is NAME
inside a folder meeting a condition, so each glob is split into that folder
condition (anywhere; a literal folder; anywhere below a literal folder; or a
regex on the folder) and a name rule (`name_rules`). Everything that depends on
a folder is computed once per distinct folder and cached (`FolderFacts`); a file
then costs look-ups on its name. Folder regexes are only tried where they can
match (below their literal lead, at folders of their literal last name, at
their fixed depth). pathspec still defines each glob's meaning: the regexes
are pathspec's, cut at segment boundaries. docs/performance.md tells how each
part was measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci_evals.selection.glob_syntax import (
    END_OPT_EXACT,
    glob_problem,
    is_literal,
    name_regex,
    raw_regex,
)
from ci_evals.selection.name_rules import NameMatcher, NameRule, RegexGroup


class FolderFacts:
    """What a folder contributes to every path inside it (cached per folder)."""

    __slots__ = (
        "base",
        "cond_groups",
        "files",
        "hits",
        "plain_child",
        "self_groups",
        "subfolders",
        "under",
    )

    def __init__(  # noqa: PLR0917 - positional: built for every remarkable folder
        self,
        hits: tuple[int, ...],
        under: tuple[NameRule, ...],
        self_groups: tuple[RegexGroup, ...],
        cond_groups: tuple[RegexGroup, ...],
        base: tuple[NameMatcher, NameMatcher],
        files: NameMatcher,
        subfolders: NameMatcher,
    ) -> None:
        # The facts of an unremarkable subfolder (no glob mentions it or matches
        # it, no regex to try): shared by all of them, whatever their depth,
        # which then only matters where regex groups exist (never for these).
        self.plain_child: FolderFacts | None = None
        self.hits = hits  # globs matched by the folder or one of its parents
        self.under = under  # `D/**/NAME` rules active here (D is this folder or above)
        self.self_groups = self_groups  # regexes for this folder and below, by literal lead
        self.cond_groups = cond_groups
        self.base = base  # (files, subfolders) matchers for the rules inherited by subfolders
        self.files = files  # name rules for the files directly in this folder
        self.subfolders = subfolders  # ... and for its subfolders (dir-only rules too)


def _append(table: dict[str, list[int]], key: str, index: int) -> None:
    table.setdefault(key, []).append(index)


def _add(
    table: dict[tuple[str, int | None], tuple[list[int], list[str]]],
    key: tuple[str, int | None],
    index: int,
    regex: str,
) -> None:
    indices, regexes = table.setdefault(key, ([], []))
    indices.append(index)
    regexes.append(regex)


def _bucket(glob: str) -> tuple[str, int | None]:
    """Where to try a glob's folder regex, and at which folder depth (None: any depth).

    The key is "/NAME" + NUL + FIRST when the folder part ends in a literal
    name (only folders of that name can match; FIRST is the glob's first
    segment when literal, else "": the regex is anchored at the root, so only
    folders under FIRST can match — `area_1/*/tests/**` is not tried at the
    `tests` folders of the other areas), else the literal lead folder (tried in
    it and below). Without `**` the folder part has a fixed number of segments.
    """
    segments = glob.strip("/").split("/")[:-1]
    depth = None if "**" in segments else len(segments)
    return _bucket_key(segments), depth


def _bucket_key(segments: list[str]) -> str:
    if segments and is_literal(segments[-1]):
        # `**/deep/x/`: only folders named `deep` can match (NUL is in no glob or path).
        first = segments[0] if is_literal(segments[0]) else ""
        return f"/{segments[-1]}\0{first}"
    lead: list[str] = []
    for segment in segments:
        if not is_literal(segment):
            break
        lead.append(segment)
    return "/".join(lead)


def _groups_that_can_match(
    inherited: tuple[RegexGroup, ...], depth: int, new: tuple[RegexGroup, ...]
) -> tuple[RegexGroup, ...]:
    """Regex groups a folder at `depth` (or below it) can still match."""
    if any(g.depth is not None and g.depth < depth for g in inherited):
        inherited = tuple(g for g in inherited if g.depth is None or g.depth >= depth)
    return (*inherited, *new) if new else inherited


def _by_key(
    table: dict[tuple[str, int | None], tuple[list[int], list[str]]],
) -> dict[str, tuple[RegexGroup, ...]]:
    groups: dict[str, tuple[RegexGroup, ...]] = {}
    for (key, depth), (indices, regexes) in table.items():
        groups[key] = (*groups.get(key, ()), RegexGroup(indices, regexes, depth))
    return groups


class FolderIndex:
    """The globs indexed for look-ups by folder (`GlobMatcher` asks it).

    Each glob is split into a folder condition and a name rule (see
    `NameRule`). Everything that depends on a folder is computed once per
    distinct folder and cached in `facts` (`build_facts`): the globs the folder
    itself matches, and the name rules active for its files. A file then costs
    a few dict look-ups on its name (plus one regex call when a wildcard name
    rule such as `test_*.py` is active there), whatever the number of globs.
    Invalid globs raise ValueError.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = tuple(globs)
        self._everywhere: list[int] = []  # `*`, `**`: every path
        self._nested: list[int] = []  # `*/`, `**/`: every path inside a folder
        self._under_folder: dict[str, list[int]] = {}  # `a/b/**`: everything under a/b
        self._any_rules: list[NameRule] = []  # `*.md`: the name at any depth
        self._in_folder: dict[str, list[NameRule]] = {}  # `a/*.md`: the name directly in a
        self._below_folder: dict[str, list[NameRule]] = {}  # `a/**/*.md`: anywhere below a
        # General folder conditions, as regexes matched against "folder/".
        self.rule_of: dict[int, NameRule] = {}
        # Bucketed by their literal leading folders ("" when there is none).
        cond: dict[tuple[str, int | None], tuple[list[int], list[str]]] = {}
        selves: dict[tuple[str, int | None], tuple[list[int], list[str]]] = {}  # `a/*/**`
        full_indices: list[int] = []  # fallback: whole-path regex per file
        full_regexes: list[str] = []
        for index, glob in enumerate(self.globs):
            problem = glob_problem(glob)
            if problem is not None:
                raise ValueError(f"{glob!r}: {problem.message}")
            # Most globs are indexed in dicts and never need pathspec's regex;
            # only globs made of `*`/`**` alone can be its match-all shortcuts.
            stars_only = not glob.strip("/*").replace("/", "")
            kind = self._classify(index, glob, raw_regex(glob) if stars_only else "")
            regex = raw_regex(glob) if kind in ("cond", "self", "full") else ""
            if kind == "cond":
                cond_regex = self._cond_regex(self.rule_of[index], glob, regex)
                _add(cond, _bucket(glob), index, cond_regex)
            elif kind == "self":
                _add(selves, _bucket(glob), index, regex)
            elif kind == "full":  # pragma: no cover - only if pathspec's regex shape changes
                full_indices.append(index)
                full_regexes.append(regex)
        # Keyed "/name" when the glob's last folder is a literal name: tried only at
        # folders of that name. Otherwise keyed by the literal lead: tried in it and below.
        self._cond = _by_key(cond)
        self._self = _by_key(selves)
        self.full = RegexGroup(full_indices, full_regexes) if full_indices else None
        self._name_matchers: dict[tuple[int, ...], NameMatcher] = {}
        self._active: dict[
            tuple[tuple[int, ...], tuple[int, ...]], tuple[NameMatcher, NameMatcher]
        ] = {}
        self._name_groups: dict[tuple[int, ...], RegexGroup] = {}
        self.facts: dict[str, FolderFacts] = {}  # by folder, as built
        # Folders and folder names some glob singles out (see `build_facts`'s fast path).
        self._special_folders = {
            *self._under_folder,
            *self._in_folder,
            *self._below_folder,
            *(key for key in (*self._self, *self._cond) if not key.startswith("/")),
        }
        self._special_names = {
            key[1:].partition("\0")[0] for key in (*self._self, *self._cond) if key.startswith("/")
        }

    # -- building ------------------------------------------------------------

    def _classify(self, index: int, glob: str, regex: str) -> str:
        """Index one glob; returns "done", or the regex table it still needs."""
        if regex == ".":
            self._everywhere.append(index)
            return "done"
        if regex == "/":
            self._nested.append(index)
            return "done"
        dir_only = glob.endswith("/")
        body = glob[:-1] if dir_only else glob
        anchored = "/" in body
        body = body.removeprefix("/")
        *folder_segments, name = body.split("/")
        if name == "**":
            if all(is_literal(s) for s in folder_segments):
                _append(self._under_folder, "/".join(folder_segments), index)  # `a/b/**`
                return "done"
            return "self" if raw_regex(glob).endswith("/") else "full"
        rule = self._name_rule(index, name, dir_only)
        self.rule_of[index] = rule
        if not anchored or (all(s == "**" for s in folder_segments) and folder_segments):
            self._any_rules.append(rule)  # `*.md`, `**/*.md`
        elif all(is_literal(s) for s in folder_segments):
            self._in_folder.setdefault("/".join(folder_segments), []).append(rule)
        elif (
            len(folder_segments) > 1
            and folder_segments[-1] == "**"
            and all(is_literal(s) for s in folder_segments[:-1])
        ):
            self._below_folder.setdefault("/".join(folder_segments[:-1]), []).append(rule)
        else:
            return "cond"
        return "done"

    @staticmethod
    def _name_rule(index: int, name: str, dir_only: bool) -> NameRule:
        if is_literal(name):
            return NameRule(index, dir_only, literal=name, suffix=None, regex=None)
        if name.startswith("*") and is_literal(name[1:]):
            return NameRule(index, dir_only, literal=None, suffix=name[1:], regex=None)
        return NameRule(index, dir_only, literal=None, suffix=None, regex=name_regex(name))

    @staticmethod
    def _cond_regex(rule: NameRule, glob: str, regex: str) -> str:
        """The folder condition of `glob` as a regex that must match all of "folder/"."""
        name = glob.rstrip("/").rsplit("/", 1)[1]
        tail = name_regex(name) + ("/" if rule.dir_only else END_OPT_EXACT)
        if not regex.endswith(tail) or not regex[: -len(tail)].endswith("/"):  # pragma: no cover
            raise ValueError(f"{glob!r}: unexpected regex {regex!r} from pathspec")
        return regex[: -len(tail)] + "\\Z"

    def _active_names(
        self, under: Sequence[NameRule], here: Sequence[NameRule]
    ) -> tuple[NameMatcher, NameMatcher]:
        """(files, subfolders) matchers for the `_any_rules` plus `under` and `here`.

        Kept by the rules' indices: many folders get the same extra rules, and
        building the key of `names` walks every `_any_rules` entry. Each is
        built on the matchers without `here` (or without `under`), so only the
        folder's own rules are indexed anew.
        """
        key = (tuple([r.index for r in under]), tuple([r.index for r in here]))
        found = self._active.get(key)
        if found is None:
            if here or under:
                files, subfolders = (
                    self._active_names(under, ()) if here else self._active_names((), ())
                )
                extra = here or under
                found = (
                    self.names([r for r in extra if not r.dir_only], files),
                    self.names(extra, subfolders),
                )
            else:
                rules = self._any_rules
                found = (self.names([r for r in rules if not r.dir_only]), self.names(rules))
            self._active[key] = found
        return found

    def names(self, rules: Sequence[NameRule], base: NameMatcher | None = None) -> NameMatcher:
        """The matcher for `rules` (after `base`'s rules, when given), shared by rule indices."""
        if not rules and base is not None:
            return base
        key = tuple([rule.index for rule in rules])
        if base is not None:
            key = base.indices + key
        matcher = self._name_matchers.get(key)
        if matcher is None:
            matcher = NameMatcher(rules, self._name_group, base)
            self._name_matchers[key] = matcher
        return matcher

    def _name_group(self, rules: Sequence[NameRule]) -> RegexGroup:
        """One regex group for wildcard name rules (shared: many folders have the same ones)."""
        key = tuple(rule.index for rule in rules)
        group = self._name_groups.get(key)
        if group is None:
            group = RegexGroup(key, [f"(?:{rule.regex})\\Z" for rule in rules])
            self._name_groups[key] = group
        return group

    def _root(self) -> FolderFacts:
        base = self._any_rules
        base_files = self.names([rule for rule in base if not rule.dir_only])
        base_subfolders = self.names(base)
        here = self._in_folder.get("", ())  # `/*.md`
        info = FolderFacts(
            hits=tuple(sorted(set(self._everywhere))),
            under=(),
            self_groups=self._self.get("", ()),
            cond_groups=self._cond.get("", ()),
            base=(base_files, base_subfolders),
            files=self.names([r for r in (*base, *here) if not r.dir_only]) if here else base_files,
            subfolders=self.names([*base, *here]) if here else base_subfolders,
        )
        self.facts[""] = info
        return info

    def build_facts(self, folder: str) -> FolderFacts:
        """The cached facts about `folder`, built from its parent's.

        Most folders add nothing to their parent's answer; they share its
        tuples and name matchers instead of building new ones.
        """
        if not folder:
            return self._root()
        parent_name, _, name = folder.rpartition("/")
        parent = self.facts.get(parent_name) or self.build_facts(parent_name)
        if (
            parent_name
            and not parent.self_groups
            and not parent.cond_groups
            and folder not in self._special_folders
            and name not in self._special_names
            and not parent.subfolders.match_folder(name)
        ):
            info = parent.plain_child or self._plain_child(parent)
            self.facts[folder] = info
            return info
        return self._remarkable_folder(folder, parent_name, name, parent)

    def _remarkable_folder(
        self, folder: str, parent_name: str, name: str, parent: FolderFacts
    ) -> FolderFacts:
        """`build_facts` for a folder some glob mentions, matches, or may match by regex."""
        extra: list[int] = [*parent.subfolders.match_folder(name)]
        if not parent_name:
            extra.extend(self._nested)
        under_here = self._under_folder.get(folder)
        if under_here:
            extra.extend(under_here)
        self_groups, cond_groups = parent.self_groups, parent.cond_groups
        here = list(self._in_folder.get(folder, ()))
        if self_groups or cond_groups or folder in self._self or folder in self._cond:
            depth = folder.count("/") + 1
            self_groups = _groups_that_can_match(self_groups, depth, self._self.get(folder, ()))
            cond_groups = _groups_that_can_match(cond_groups, depth, self._cond.get(folder, ()))
        self_groups_here, cond_groups_here = self_groups, cond_groups
        if name in self._special_names:
            anywhere, under_first = f"/{name}\0", f"/{name}\0{folder.partition('/')[0]}"
            self_groups_here = (
                *self_groups,
                *self._self.get(anywhere, ()),
                *self._self.get(under_first, ()),
            )
            cond_groups_here = (
                *cond_groups,
                *self._cond.get(anywhere, ()),
                *self._cond.get(under_first, ()),
            )
        if self_groups_here or cond_groups_here:
            depth = folder.count("/") + 1
            slashed = folder + "/"
            for group in self_groups_here:
                if group.depth is None or group.depth == depth:
                    extra.extend(group.find(slashed))
            rule_of = self.rule_of
            for group in cond_groups_here:
                if group.depth is None or group.depth == depth:
                    here.extend([rule_of[i] for i in group.find(slashed)])
        below = self._below_folder.get(folder)
        under, base = parent.under, parent.base
        if below:
            under = (*under, *below)
            base = self._active_names(under, ())
        files, subfolders = self._active_names(under, here) if here else base
        info = FolderFacts(
            tuple(sorted({*parent.hits, *extra})) if extra else parent.hits,
            under,
            self_groups,
            cond_groups,
            base,
            files,
            subfolders,
        )
        self.facts[folder] = info
        return info

    def _plain_child(self, parent: FolderFacts) -> FolderFacts:
        files, subfolders = parent.base
        if parent.files is files and parent.subfolders is subfolders:
            child = parent
        else:
            child = FolderFacts(
                hits=parent.hits,
                under=parent.under,
                self_groups=(),
                cond_groups=(),
                base=parent.base,
                files=files,
                subfolders=subfolders,
            )
        parent.plain_child = child
        return child
