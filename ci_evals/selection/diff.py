"""The change BASE...HEAD as git knows it: which commits, and which paths.

A changed suite file (`ci-evals.yaml` among the map's global paths) is set aside
from the matching and decided by comparing its two versions
(`suite_change.decide_compared`): a change to contracts alone runs less than all.
So are the map's marketplace file and manifest (`StageMap.compared_paths`,
`manifest_change`): another plugin's entry or a version bump runs nothing.

`resolve()` turns BASE and HEAD into SHAs and finds the merge base — the diff
is always from the merge base (what `BASE...HEAD` means), never two-dot — or
returns the fallback `Selection` when the change cannot be known exactly
(`base-zero-sha`, `base-missing`, `no-merge-base` — a merge base on a shallow
clone's boundary is a guess, unless it is BASE or HEAD itself — or `none` when
BASE is HEAD). In a shallow clone, and only there, it first deepens (a bounded
number of `git fetch --deepen` tries). A HEAD that names no commit is a
`UserError`. Each fallback: docs/compute-stage.md.

`diff_chunks()` lists the changed paths. A huge change is split into a few
`git diff` runs over disjoint sets of folders, so the caller can match one
chunk while git computes the next (`compute_overlapped`); see `_plan`.
"""

from __future__ import annotations

import queue
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.selection.decide import (
    BASE_EQUALS_HEAD,
    BASE_MISSING,
    BASE_ZERO_SHA,
    NO_MERGE_BASE,
    Selection,
    Selector,
    fallback,
)
from ci_evals.selection.links import decide_links
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.suite_change import decide_compared, suite_paths
from ci_evals.selection.tree_diff import TreeDiffer

if TYPE_CHECKING:
    from ci_evals.selection.stage_map import StageMap

# `--deepen N` default: tries, each fetching twice as much as the last
# (50, 100, 200 commits). Only ever used on a shallow clone.
DEFAULT_DEEPEN_TRIES = 3
FIRST_DEEPEN_STEP = 50

# Diff entry by entry when the changed folder has at least this many changed
# entries. A small change is one `git diff`.
CHUNK_MIN_ENTRIES = 16
# How far to follow a chain of single changed folders (`plugin/` -> ...).
MAX_DESCENT = 4

# Seconds; see `compute_overlapped`.
SWITCH_INTERVAL = 0.0002

_ZERO_SHA = re.compile(r"0{40}|0{64}")


def is_zero_sha(rev: str) -> bool:
    """The all-zeros SHA: GitHub's `before` of a push that created the branch."""
    return _ZERO_SHA.fullmatch(rev) is not None


@dataclass(frozen=True)
class Range:
    """BASE...HEAD resolved: SHAs, merge base(s), and what was done to get them."""

    base: str
    head: str
    merge_bases: tuple[str, ...]
    notes: tuple[str, ...] = ()
    # History was rewritten (a force-push): BASE, the tip that was there before,
    # is not on HEAD's history, so what it held and HEAD dropped is a change too;
    # the diff is also taken between the two tips (`diff_chunks`).
    rewritten: bool = False


class _Deepener:
    """A bounded budget of `git fetch --deepen` tries, used only on a shallow clone."""

    def __init__(self, repo: Path, tries: int) -> None:
        self.repo = repo
        self.left = max(tries, 0)
        self.step = FIRST_DEEPEN_STEP
        self.notes: list[str] = []
        self.failed = False

    def more(self) -> bool:
        """Fetch more history; False when out of tries, not shallow, or the fetch failed."""
        if self.left == 0 or self.failed or not git.is_shallow(self.repo):
            return False
        self.left -= 1
        result = git.deepen(self.repo, self.step)
        if result.returncode != 0:
            self.failed = True
            error = result.stderr.strip().splitlines()
            self.notes.append(
                f"git fetch --deepen={self.step} failed: {error[-1] if error else 'no message'}"
            )
            return False
        self.notes.append(f"deepened the shallow clone by {self.step} commits")
        self.step *= 2
        return True

    def explain(self, detail: str) -> str:
        if self.notes:
            return f"{detail} ({'; '.join(self.notes)})"
        if self.left == 0 and git.is_shallow(self.repo):  # --deepen 0: never tried
            return f"{detail} (shallow clone; not deepened: --deepen 0)"
        return detail


def resolve(
    repo: Path,
    base: str,
    head: str = "HEAD",
    *,
    deepen_tries: int = DEFAULT_DEEPEN_TRIES,
    rewritable: bool = False,
    forced: bool = False,
) -> Range | Selection:
    """BASE...HEAD in `repo` (the work-tree root), or the Selection to use instead.

    `rewritable` (a push: BASE is the branch's previous tip): when BASE is not an
    ancestor of HEAD, or `forced` says so, history was rewritten and the Range
    says so (`Range.rewritten`). For a pull request BASE not being an ancestor is
    the usual case (the base branch moved on), so only a push asks."""
    head_sha = git.rev_parse(repo, head)
    if head_sha is None:
        raise UserError(
            f"HEAD revision {head!r} names no commit in this repository",
            field="--head",
            hint="check out the commit to evaluate, or pass --head with a SHA or ref that exists",
        )
    if is_zero_sha(base):
        return fallback(
            BASE_ZERO_SHA,
            "BASE is the all-zeros SHA (a push that created the branch): nothing to compare with",
            head=head_sha,
        )
    deepener = _Deepener(repo, deepen_tries)
    base_sha = git.rev_parse(repo, base)
    while base_sha is None and deepener.more():
        base_sha = git.rev_parse(repo, base)
    if base_sha is None:
        detail = deepener.explain(f"BASE {base!r} names no commit in this clone")
        return fallback(BASE_MISSING, detail, head=head_sha, notes=deepener.notes)
    if base_sha == head_sha:
        return Selection(
            None,
            BASE_EQUALS_HEAD,
            0,
            (),
            "BASE and HEAD are the same commit: nothing changed",
            base=base_sha,
            head=head_sha,
        )
    bases, why_unknown = _merge_bases(repo, base_sha, head_sha, deepener)
    if not bases:
        return fallback(
            NO_MERGE_BASE,
            deepener.explain(why_unknown),
            base=base_sha,
            head=head_sha,
            notes=deepener.notes,
        )
    notes = tuple(deepener.notes)
    rewritten = rewritable and (forced or base_sha not in bases)
    if rewritten:
        why = "the push was forced" if forced else "BASE is not an ancestor of HEAD"
        notes += (
            f"history rewritten ({why}): the diff also covers BASE..HEAD, "
            "what the old tip held that HEAD no longer does",
        )
    return Range(base_sha, head_sha, tuple(bases), notes, rewritten)


def _merge_bases(repo: Path, base: str, head: str, deepener: _Deepener) -> tuple[list[str], str]:
    """The merge bases, or ([], why) when there is no trustworthy one."""
    while True:
        bases = git.merge_bases(repo, base, head)
        if not bases:
            why = "BASE and HEAD share no history in this clone"
        else:
            boundary = git.shallow_commits(repo).intersection(bases) - {base, head}
            if not boundary:
                return bases, ""
            why = f"the merge base {sorted(boundary)[0][:12]} is on the shallow clone's boundary"
        if not deepener.more():
            return [], why


def diff_chunks(
    repo: Path, change: Range, *, min_entries: int = CHUNK_MIN_ENTRIES
) -> Iterator[list[str]]:
    """The changed paths, in git's order, as one or more lists (see `_plan`).

    After criss-cross merges (several merge bases) it is the sorted union of
    the diffs from each: a superset, so the answer can only run more stages.
    History rewritten (`Range.rewritten`) adds the diff between the two tips.
    """
    if len(change.merge_bases) > 1 or change.rewritten:
        seen: dict[str, None] = {}
        starts = (*change.merge_bases, change.base) if change.rewritten else change.merge_bases
        for start in starts:
            seen.update(dict.fromkeys(git.changed_paths(repo, start, change.head)))
        # git's order: by the names' bytes (str order differs for names not in UTF-8).
        yield sorted(seen, key=lambda path: path.encode("utf-8", "surrogateescape"))
        return
    merge_base = change.merge_bases[0]
    plan = _plan(repo, merge_base, change.head, min_entries)
    if plan is None:
        yield git.changed_paths(repo, merge_base, change.head)
        return
    folder, entries = plan
    yield from _streamed(repo, folder, entries)


def changed_paths(repo: Path, change: Range) -> list[str]:
    """Every changed path of `change`, in one list."""
    return [path for chunk in diff_chunks(repo, change) for path in chunk]


def _plan(
    repo: Path, merge_base: str, head: str, min_entries: int
) -> tuple[str, list[git.TreeChange]] | None:
    """The folder to split a huge diff at, and its changed entries; None: one plain diff.

    From the top tree, follow a chain of folders that are the *only* changed
    entry of their parent (`plugin/` in a repo where only the plugin changed):
    every changed path lies under the last one. When that folder has at least
    `min_entries` changed entries, the diff is done entry by entry (`_streamed`).
    """
    folder = ""
    for _ in range(MAX_DESCENT + 1):
        entries = git.changed_entries(repo, merge_base, head, folder)
        if entries is None:
            return None
        if len(entries) == 1 and entries[0].old_mode == entries[0].new_mode == git.TREE_MODE:
            folder = f"{folder}{entries[0].name}/"
            continue
        break
    else:
        return None
    if len(entries) < min_entries:
        return None
    return folder, entries


def _streamed(repo: Path, folder: str, entries: list[git.TreeChange]) -> Iterator[list[str]]:
    """The diff below `folder`, entry by entry, exactly as one `git diff` lists it.

    git lists a diff in tree order, a folder's files together, so the whole
    diff is the concatenation, in `entries`' order, of each changed entry:
    a file (or link, or submodule) is its own path; a folder is the tree diff
    of its two versions (an empty tree for a side where it is absent). The tree
    diffs come from one `git diff-tree --stdin` process (`tree_diff.TreeDiffer`),
    which writes each as soon as it is done: the caller matches the first
    folders while git diffs the rest.
    """
    pairs: list[tuple[str, str]] = []  # (old tree, new tree) per changed folder
    prefixes: list[bytes] = []  # the folder's path, to put before its diff's paths
    leading: list[str] = []  # changed files before the first changed folder
    following: list[list[bytes]] = []  # per folder: the changed files after it
    for entry in entries:
        if entry.is_folder_change():
            empty = git.EMPTY_TREE[len(entry.old_oid)]
            old = entry.old_oid if entry.old_mode == git.TREE_MODE else empty
            new = entry.new_oid if entry.new_mode == git.TREE_MODE else empty
            pairs.append((old, new))
            prefixes.append(f"{folder}{entry.name}/".encode("utf-8", "surrogateescape"))
            following.append([])
        elif following:
            following[-1].append(f"{folder}{entry.name}".encode("utf-8", "surrogateescape"))
        else:
            leading.append(folder + entry.name)
    if leading or not pairs:
        yield leading
    if not pairs:
        return  # no git process for a change of files alone
    done = 0
    with TreeDiffer(repo) as differ:
        for outputs in differ.diffs(pairs):
            raw: list[bytes] = []
            for output in outputs:
                prefix = prefixes[done]
                if output:  # b"a\0b\0" -> b"PREFIXa\0PREFIXb\0"
                    raw.append(prefix + output[:-1].replace(b"\0", b"\0" + prefix) + b"\0")
                raw.extend(path + b"\0" for path in following[done])
                done += 1
            yield git.split_z(b"".join(raw))


def compute(
    repo: Path,
    stage_map: StageMap,
    base: str,
    head: str = "HEAD",
    *,
    deepen_tries: int = DEFAULT_DEEPEN_TRIES,
    matcher: GlobMatcher | None = None,
) -> Selection:
    """The selection for the change BASE...HEAD in `repo` (the work-tree root)."""
    change = resolve(repo, base, head, deepen_tries=deepen_tries)
    if isinstance(change, Selection):
        return change
    return decide_change(repo, stage_map, change, diff_chunks(repo, change), matcher=matcher)


def decide_change(
    repo: Path,
    stage_map: StageMap,
    change: Range,
    chunks: Iterable[list[str]],
    *,
    matcher: GlobMatcher | None = None,
) -> Selection:
    """The selection for the resolved `change` whose changed paths are `chunks`
    (`diff_chunks`): one diff can be decided for several maps."""
    matcher = matcher or GlobMatcher(stage_map.selection_globs)
    selector = Selector(stage_map, matcher, compared=compared_paths(stage_map))
    for chunk in chunks:
        selector.add(chunk)
    compared = decide_compared(repo, _with_range(selector.finish(), change), stage_map, matcher)
    return decide_links(repo, compared, stage_map, matcher)


def compared_paths(stage_map: StageMap) -> frozenset[str]:
    """The changed files decided by comparing their two versions, not by matching:
    suite files among the globals, the map's marketplace file and manifest."""
    return suite_paths(stage_map.global_paths) | stage_map.compared_paths


def _with_range(chosen: Selection, change: Range) -> Selection:
    return replace(
        chosen,
        base=change.base,
        head=change.head,
        merge_bases=change.merge_bases,
        notes=change.notes,
    )


_DONE = object()


def compute_overlapped(
    repo: Path,
    get_range: Callable[[], Range | Selection],
    prepare: Callable[[], tuple[StageMap, GlobMatcher]],
    *,
    every_record: bool = False,
) -> tuple[Selection, StageMap]:
    """`compute`, with git working in a thread while this one loads the map
    (`prepare`) and matches each chunk of changed paths as it arrives.

    `every_record` (`--json`): rank every path as its chunk arrives, overlapped
    with git, instead of searching only below the running minimum.

    git's diff writes nothing until it is done, so on a huge change the
    chunks are what lets matching and diffing run at the same time.
    """
    arrivals: queue.Queue[object] = queue.Queue()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            change = get_range()
            arrivals.put(change)
            if isinstance(change, Range):
                for chunk in diff_chunks(repo, change):
                    arrivals.put(chunk)
        except BaseException as exc:  # handed to the main thread below
            failure.append(exc)
        finally:
            arrivals.put(_DONE)

    worker = threading.Thread(target=work, name="ci-evals-git", daemon=True)
    # The worker reads git's output in pipe-sized pieces and needs the GIL after
    # each; with the default 5 ms switch interval the busy matching thread can
    # make it wait up to that long per piece while git stalls on a full pipe
    # (~120 pieces for a 100,000-path diff). A short interval hands the GIL over
    # promptly: ~15 ms less on that diff (measured again with the streamed
    # diff-tree), and the extra switches cost nothing measurable.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        worker.start()
        chosen, stage_map, matcher = _consume(
            arrivals, failure, worker, prepare, prune=not every_record
        )
        compared = decide_compared(repo, chosen, stage_map, matcher)
        return decide_links(repo, compared, stage_map, matcher), stage_map
    finally:
        sys.setswitchinterval(interval)


def _consume(
    arrivals: queue.Queue[object],
    failure: list[BaseException],
    worker: threading.Thread,
    prepare: Callable[[], tuple[StageMap, GlobMatcher]],
    *,
    prune: bool,
) -> tuple[Selection, StageMap, GlobMatcher]:
    try:
        stage_map, matcher = prepare()
    except BaseException:
        worker.join()
        raise
    first = arrivals.get()
    if first is _DONE or isinstance(first, Selection):
        worker.join()
        if failure:
            raise failure[0]
        assert isinstance(first, Selection)
        return first, stage_map, matcher
    assert isinstance(first, Range)
    selector = Selector(stage_map, matcher, prune=prune, compared=compared_paths(stage_map))
    while (chunk := arrivals.get()) is not _DONE:
        selector.add(chunk)  # type: ignore[arg-type]
    worker.join()
    if failure:
        raise failure[0]
    return _with_range(selector.finish(), first), stage_map, matcher
