"""Changes the run reads through symbolic links, which a diff names elsewhere.

The runner copies the plugin and lays the fixtures *following links* (the
plugin copy dereferences them; a fixture folder may itself be a link), so a
link under `root` or `fixtures` to `shared/x.md` means a change to `shared/x.md`
is a change of the link, at the link's stage. git's diff names only
`shared/x.md` (outside root: ignored), so `compute-stage` asks here which links
the run follows and whether what they lead to changed.

A link at HEAD under root or fixtures (or one that is one of their folders or
above them) is followed in HEAD's tree as the file system would; a change to
its target, under it, above it or to a link on the way counts at the path the
run reads it at. A link that cannot be followed in git (absolute, out of the
repository, dangling, a loop, more than `MAX_LINKS`) counts as changed itself:
fail closed. Links are rare, so finding them costs one `git ls-tree -r` of root
and fixtures at HEAD, told "no link" by one byte search; `diff` only asks when
the answer could still go lower. docs/compute-stage.md (*What the run reads,
not what the map names*).
"""

from __future__ import annotations

import bisect
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals import git
from ci_evals.selection.decide import (
    LINK_TARGET_CHANGED,
    Match,
    Selection,
    Selector,
    changed_paths,
    quote_path,
)

if TYPE_CHECKING:
    from ci_evals.selection.matcher import GlobMatcher
    from ci_evals.selection.stage_map import StageMap

# Links followed in all (nested ones included), and hops along one of them
# (the kernel's limit for one path is 40): beyond, the rest count as changed.
MAX_LINKS = 2000
MAX_HOPS = 40


@dataclass(frozen=True)
class LinkedChange:
    """A change the run reads through a link, at the path it reads it."""

    path: str  # where the run sees it: the link, or a path under a folder link
    link: str  # the link (under root or fixtures, or one of their folders)
    cause: str  # for a person: what changed, or why the link cannot be followed


@dataclass(frozen=True)
class _Followed:
    final: str  # the path the link leads to at last, repo-relative
    mode: str  # its mode (git.TREE_MODE for a folder)
    passed: tuple[str, ...]  # the links on the way, the first one included


class _Tree:
    """Entries and link texts of one commit, looked up in batches and kept."""

    def __init__(self, repo: Path, commit: str, links: Iterable[git.TreeEntry]) -> None:
        self.repo, self.commit = repo, commit
        self.entries: dict[str, git.TreeEntry | None] = {e.path: e for e in links}
        self.texts: dict[str, bytes] = {}

    def load(self, paths: Iterable[str]) -> None:
        """Make sure the entry (or its absence) of each path is known, and each link's text."""
        paths = [p for p in paths if p]
        folders = sorted({posixpath.dirname(p) for p in paths if p not in self.entries})
        listed = git.folder_entries(self.repo, self.commit, folders)
        for folder in folders:
            for entry in listed.get(folder, ()):
                self.entries.setdefault(entry.path, entry)
        for path in paths:
            self.entries.setdefault(path, None)
        oids = sorted(
            {
                e.oid
                for p in paths
                if (e := self.entries[p]) is not None
                and e.mode == git.LINK_MODE
                and e.oid not in self.texts
            }
        )
        for oid, got in zip(oids, git.objects(self.repo, oids), strict=True):
            if got is not None:
                self.texts[oid] = got[2]


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[: n + 1]) for n in range(len(parts))]


def _follow_all(tree: _Tree, starts: list[str]) -> dict[str, _Followed | str]:
    """Each start path followed to where it leads (or why it cannot be), in
    rounds: per round one `cat-file` for the folders its paths lie in, one for link texts."""
    done: dict[str, _Followed | str] = {}
    # start -> (path now, links passed)
    pending: dict[str, tuple[str, tuple[str, ...]]] = {start: (start, ()) for start in starts}
    for _ in range(MAX_HOPS + 1):
        if not pending:
            return done
        tree.load(p for path, _ in pending.values() for p in _prefixes(path))
        following: dict[str, tuple[str, tuple[str, ...]]] = {}
        for start, (path, passed) in pending.items():
            step = _step(tree, path, passed)
            if isinstance(step, tuple):
                following[start] = step
            else:
                done[start] = step
        pending = following
    done.update(dict.fromkeys(pending, f"more than {MAX_HOPS} links on the way (a loop?)"))
    return done


def _step(
    tree: _Tree, path: str, passed: tuple[str, ...]
) -> _Followed | str | tuple[str, tuple[str, ...]]:
    """Where `path` stands: reached, cannot be followed (why), or the next path to follow."""
    if not path:
        return _Followed("", git.TREE_MODE, passed)  # the repository's top
    for prefix in _prefixes(path):
        entry = tree.entries.get(prefix)
        if entry is None:
            return f"it leads to {prefix!r}, which is not in the commit (a dangling link)"
        if entry.mode != git.LINK_MODE:
            continue
        text = tree.texts.get(entry.oid)
        if text is None:
            return f"the link {prefix!r} cannot be read from the commit"
        target = text.decode("utf-8", "surrogateescape")
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(prefix), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            return (
                f"the link {prefix!r} points outside the repository ({target!r}): "
                "its content is not in the commit"
            )
        rest = path[len(prefix) :]
        following = "" if joined == "." else joined
        return (following + rest).lstrip("/"), (*passed, prefix)
    mode = tree.entries[path].mode if path else git.TREE_MODE  # type: ignore[union-attr]
    return _Followed(path, mode, passed)


class _Changed:
    """The changed paths, asked: what is at, under or above a path."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.sorted = sorted(set(paths))
        self.set = frozenset(self.sorted)

    def at_or_above(self, path: str) -> str | None:
        for prefix in _prefixes(path):
            if prefix in self.set:
                return prefix
        return None

    def under(self, folder: str) -> list[str]:
        lead = folder + "/" if folder else ""
        at = bisect.bisect_left(self.sorted, lead)
        out: list[str] = []
        for path in self.sorted[at:]:
            if not path.startswith(lead):
                break
            out.append(path)
        return out


def linked_changes(
    repo: Path, commit: str, stage_map: StageMap, changed: Iterable[str]
) -> list[LinkedChange]:
    """The changes the run reads through links at `commit` (see the module doc)."""
    tops = [stage_map.root] + ([stage_map.fixtures] if stage_map.fixtures is not None else [])
    links = git.links_below(repo, commit, tops)
    tree = _Tree(repo, commit, links)
    # A folder above root or fixtures that is a link: `ls-tree -r` lists nothing there.
    above = sorted({p for top in tops if top for p in _prefixes(top)[:-1]})
    if above:
        tree.load(above)
        links += [e for p in above if (e := tree.entries[p]) and e.mode == git.LINK_MODE]
    if not links:
        return []
    diff = _Changed(changed)
    found: list[LinkedChange] = []
    # (the path the run reads the link at, the link); nested links are added as met.
    todo = [(e.path, e.path) for e in links]
    seen = set(todo)
    while todo:
        followed = _follow_all(tree, sorted({link for _, link in todo}))
        nested: list[tuple[str, str]] = []
        for read_at, link in todo:
            result = followed[link]
            if isinstance(result, str):
                found.append(LinkedChange(read_at, link, result))
                continue
            found += _hits(diff, read_at, link, result)
            if result.mode == git.TREE_MODE:
                # The copy follows the links inside a folder it reaches through one.
                inner = (
                    [e for e in links if e.path.startswith(result.final + "/")]
                    if _inside(result.final, tops)
                    else git.links_below(tree.repo, tree.commit, [result.final])
                )
                for entry in inner:
                    tree.entries.setdefault(entry.path, entry)
                    pair = (read_at + entry.path[len(result.final) :], entry.path)
                    if pair not in seen:
                        seen.add(pair)
                        nested.append(pair)
        todo = nested
        if len(seen) > MAX_LINKS:
            found += [LinkedChange(r, link, f"more than {MAX_LINKS} links") for r, link in todo]
            break
    return found


def _inside(path: str, tops: list[str]) -> bool:
    return any(not top or path == top or path.startswith(top + "/") for top in tops)


def _hits(diff: _Changed, read_at: str, link: str, followed: _Followed) -> list[LinkedChange]:
    """What changed of what `link` leads to, at the paths the run reads it."""
    for passed in followed.passed:
        hit = diff.at_or_above(passed)
        if hit is not None and passed != link:
            return [LinkedChange(read_at, link, f"{hit!r}, a link on the way, changed")]
    hit = diff.at_or_above(followed.final)
    if hit is not None:
        return [LinkedChange(read_at, link, f"it leads to {followed.final!r}; {hit!r} changed")]
    if followed.mode != git.TREE_MODE:
        return []
    cut = len(followed.final)
    return [
        LinkedChange(
            read_at + path[cut:] if cut else f"{read_at}/{path}",
            link,
            f"it leads to {followed.final!r}; {path!r} changed",
        )
        for path in diff.under(followed.final)
    ]


def decide_links(
    repo: Path, chosen: Selection, stage_map: StageMap, matcher: GlobMatcher
) -> Selection:
    """`chosen` with the changes read through links (`linked_changes`) decided as
    changes of the paths the run reads them at, when they could run more.

    Asked only when the answer could still go lower — not for stage 1, a
    fallback, or an empty change — so the usual answer pays nothing; and always
    for a map that selects units, where stage 1 is not the whole answer (a case
    whose folder links to a changed file is a unit the other changes may not name).
    """
    if chosen.head is None or not chosen.changed:
        return chosen
    if chosen.from_stage == 1 and not stage_map.selects_units:
        return chosen
    linked = linked_changes(repo, chosen.head, stage_map, changed_paths(chosen.matches))
    if not linked:
        return chosen
    selector = Selector(stage_map, matcher, prune=False)
    selector.add([change.path for change in linked])
    extra: list[Match] = []
    for change, m in zip(linked, selector.finish().matches, strict=True):
        if m.stage is not None:
            why = f"{quote_path(change.link)} is a link the run follows: {change.cause}; {m.why}"
            extra.append(m._replace(rule=LINK_TARGET_CHANGED, why=why))
    best = min(extra, key=lambda m: (m.stage, m.path), default=None)
    matches = (*chosen.matches, *extra)
    if best is None or (chosen.from_stage is not None and best.stage >= chosen.from_stage):  # type: ignore[operator]
        return replace(chosen, matches=matches)
    return replace(
        chosen,
        from_stage=best.stage,
        reason=LINK_TARGET_CHANGED,
        matches=matches,
        detail=f"{quote_path(best.path)}: {best.why}",
        decided_by=best,
    )
