"""The one place that runs git (`run` to completion, `start` to stream).

Always argv lists (never a shell string), always machine-readable output
(`-z`, `--no-renames`, `--no-color`, `--no-ext-diff`), and parsing kept in pure
functions that tests can feed a plain string. GitPython is not used: importing
it costs ~0.2 s, which the pre-commit hook and `compute-stage` cannot afford,
and it runs these same git subprocesses underneath.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ci_evals import process
from ci_evals.errors import UserError


@dataclass(frozen=True)
class GitResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: str


class GitError(Exception):
    """A git command failed in a way the caller did not expect."""

    def __init__(self, result: GitResult) -> None:
        command = " ".join(result.argv)
        super().__init__(f"`{command}` exited {result.returncode}: {result.stderr.strip()}")
        self.result = result


# Local commands finish in well under this; a hung git (a lock, a credential
# prompt) must not hang CI forever.
DEFAULT_TIMEOUT = 600.0


def run(
    repo: Path,
    *args: str,
    check: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> GitResult:
    """Run `git -C repo ARGS...`; stdout is returned as bytes (names may not be UTF-8).

    A timeout counts as a failure (exit code -1), raised as `GitError` when `check`.
    stdin is `stdin`, else empty: git never waits on the terminal. `env`: the
    whole environment (default: this process's).
    """
    argv = ("git", "-C", str(repo), *args)
    # Its own process group (process.run), so a timeout also stops git's
    # helpers (ssh, remote-https) that would otherwise keep the pipes open.
    try:
        done = process.run(argv, env=env, stdin=stdin, timeout=timeout)
    except FileNotFoundError:  # no git on PATH: as a shell would say it (127)
        result = GitResult(argv, 127, b"", "git: command not found (install git)")
        if check:
            raise GitError(result) from None
        return result
    if done.returncode is None:
        result = GitResult(argv, -1, b"", f"timed out after {timeout} s")
        if check:
            raise GitError(result)
        return result
    result = GitResult(
        argv=argv,
        returncode=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr.decode("utf-8", "replace"),
    )
    if check and result.returncode != 0:
        raise GitError(result)
    return result


def start(
    repo: Path, *args: str, env: Mapping[str, str] | None = None
) -> tuple[tuple[str, ...], process.ProcessGroup]:
    """Start `git -C repo ARGS...` for the caller to drive through its pipes (stdin,
    stdout, stderr), as `run` would start it: its own process group. Returns the
    argv (for a `GitResult`) and the group; the caller stops it. `env`: as `run`'s.
    Raises OSError (FileNotFoundError: no git on PATH) when git cannot start."""
    argv = ("git", "-C", str(repo), *args)
    return argv, process.ProcessGroup(argv, env=env)


def split_z(output: bytes) -> list[str]:
    """Split NUL-terminated git output into paths.

    Names are decoded as UTF-8 with `surrogateescape`, so a name that is not
    valid UTF-8 still round-trips to the same bytes instead of being mangled.
    """
    if not output:
        return []
    # One decode for the whole output (NUL never occurs inside a UTF-8
    # sequence, so this equals decoding each name): 100,000 names in ~5 ms.
    parts = output.decode("utf-8", "surrogateescape").split("\0")
    if parts[-1] == "":
        parts.pop()
    return parts


def toplevel(cwd: Path) -> Path:
    """The work tree root containing `cwd`; a clear error outside a repository."""
    result = run(cwd, "rev-parse", "--show-toplevel", check=False)
    if result.returncode != 0:
        raise UserError(
            "not inside a git repository",
            file=str(cwd),
            hint="run ci-evals from your repository, or pass --map with a path inside one",
        )
    return Path(result.stdout.decode("utf-8", "surrogateescape").rstrip("\n"))


def ls_files(repo: Path) -> list[str]:
    """Every path in the index (what a commit would contain), repo-relative, POSIX."""
    return split_z(run(repo, "ls-files", "-z", "--cached").stdout)


def ls_files_under(repo: Path, folder: str) -> list[str]:
    """The index paths under `folder` (repo-relative), relative to `folder`.

    Run from inside the folder, git itself filters and cuts the paths, which
    on 100,000 files saves the caller a pass over all of them. The folder must
    be a real folder of the work tree (no symlink on the way), else git would
    list wherever the link points; otherwise (also when it is gone from the
    work tree, its files deleted but not yet staged), or for "", this filters
    itself.
    """
    if not folder:
        return ls_files(repo)
    inside = repo / folder
    real = os.path.join(os.path.realpath(repo), *folder.split("/"))
    if not os.path.isdir(inside) or os.path.realpath(inside) != real:
        prefix = folder + "/"
        return [p[len(prefix) :] for p in ls_files(repo) if p.startswith(prefix)]
    return split_z(run(inside, "ls-files", "-z", "--cached").stdout)


def files_to_commit(folder: Path) -> list[str]:
    """The files under `folder` that `git add -A` would leave in the index: tracked
    ones and untracked ones git does not ignore; relative to `folder`, POSIX."""
    return split_z(
        run(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    )


def only_tracked(environ: Mapping[str, str]) -> bool:
    """Whether what the repository holds is what git tracks and nothing else: in a
    GitHub Actions job, where a pull request's content is exactly its tracked files and
    anything else in the checkout a CI step wrote (`gha-creds-*.json`, `.env`)."""
    return environ.get("GITHUB_ACTIONS") == "true"


def tracked_files(folder: Path) -> list[str]:
    """The index's paths under `folder` (in a work tree), relative to it, POSIX."""
    return split_z(run(folder, "ls-files", "-z", "--cached").stdout)


def untracked_under(folder: Path) -> list[str]:
    """Everything under `folder` git does not track, ignored or not: files, and the
    folders holding nothing tracked as `name/`; relative to `folder`, POSIX."""
    return split_z(run(folder, "ls-files", "-z", "--others", "--directory").stdout)


def published_files(folder: Path, *, tracked_only: bool = False) -> list[str] | None:
    """What a commit made now would hold of `folder` (`files_to_commit`; with
    `tracked_only`, what the index holds: `tracked_files`), or None
    when git cannot say: `folder` is in no work tree, or git ignores it whole (a
    plugin vendored into an ignored folder still has files, all of them its own)."""
    prefix = run(folder, "rev-parse", "--show-prefix", check=False)
    if prefix.returncode != 0:
        return None
    inside = prefix.stdout.decode("utf-8", "surrogateescape").strip("\n")
    if inside:
        top = run(folder, "rev-parse", "--show-cdup").stdout.decode("utf-8", "surrogateescape")
        if is_ignored(folder / top.strip("\n"), inside):
            return None
    return tracked_files(folder) if tracked_only else files_to_commit(folder)


class IgnoreRule(NamedTuple):
    source: str  # the file holding the pattern, as git names it (`.gitignore`)
    line: str
    pattern: str


def ignoring_rule(folder: Path, path: str) -> IgnoreRule | None:
    """The rule by which git ignores `path` (relative to `folder`, in a work tree),
    or None when a commit would take it (not ignored, or tracked already)."""
    result = run(
        folder, "check-ignore", "-v", "-z", "--stdin", stdin=path.encode() + b"\0", check=False
    )
    if result.returncode == 1:
        return None
    if result.returncode != 0:
        raise GitError(result)
    source, line, pattern, *_ = split_z(result.stdout)
    return IgnoreRule(source, line, pattern)


def ignored_under(folder: Path) -> list[str]:
    """What git ignores under `folder` (in a work tree): untracked files, and the
    folders it ignores whole as `name/`; relative to `folder`, POSIX."""
    args = ("--others", "--ignored", "--exclude-standard", "--directory")
    return split_z(run(folder, "ls-files", "-z", *args).stdout)


def is_ignored(folder: Path, path: str) -> bool:
    """Whether git ignores `path` (relative to `folder`, which is in a work tree)."""
    result = run(folder, "check-ignore", "-q", "--", path, check=False)
    if result.returncode not in (0, 1):
        raise GitError(result)
    return result.returncode == 0


# --- A scenario's workspace as a repository (`git: true`, used by `workspace`) ---

# Who made the workspace's first commit, and when: fixed, so the same fixtures
# give the same commit SHA in every run.
WORKSPACE_IDENTITY = ("ci-evals", "ci-evals@workspace.invalid")
WORKSPACE_DATE = "2000-01-01T00:00:00+0000"
WORKSPACE_BRANCH = "main"
WORKSPACE_MESSAGE = "ci-evals: the seed (what stage 1 starts from)"
CASE_IDENTITY = ("Plugin Eval", "eval@example.invalid")  # `claude plugin eval`'s HOME/.gitconfig


def init_workspace(root: Path, committed: Sequence[Path] = (), exclude: Sequence[str] = ()) -> str:
    """Make `root` a repository on `main` whose one commit holds the files of the
    folders `committed` (merged in order, later wins: what the workspace was
    seeded from), whatever `root` holds on top of them; return the commit's SHA.
    `exclude`: root-level names git is told to ignore (`.git/info/exclude`).

    Nothing from this machine's git configuration is read (no global or system
    config, no templates: no hooks, no signing), and the repository's own config
    gets the fixed identity, so the agent's `git commit` works in the sandbox.
    """
    env = _init(root, WORKSPACE_IDENTITY)
    git_dir = str(root / ".git")
    info = root / ".git" / "info"
    info.mkdir(exist_ok=True)
    names = (re.sub(r"([*?\[\\])", r"\\\1", item) for item in exclude)  # literal names
    (info / "exclude").write_text("".join(f"/{name}\n" for name in names))
    for folder in committed:  # each folder read as the work tree: its files, not root's
        run(root, f"--git-dir={git_dir}", f"--work-tree={folder}", "add", "-A", env=env)
    run(root, "commit", "-q", "--allow-empty", "--no-verify", "-m", WORKSPACE_MESSAGE, env=env)
    run(root, "update-index", "-q", "--refresh", check=False, env=env)  # root's stat data
    return run(root, "rev-parse", "HEAD", env=env).stdout.decode().strip()


def init_case_workspace(root: Path) -> None:
    """Make `root` a repository on `main` with no commit and the identity of a
    `claude plugin eval` run's HOME ("Plugin Eval"), as that CLI's run folder
    is: a case's scaffold may `git add` and `git commit` there."""
    _init(root, CASE_IDENTITY)


def _init(root: Path, identity: tuple[str, str]) -> dict[str, str]:
    """`git init` of `root` with `identity` in its own config; the environment used."""
    name, email = identity
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(root),  # read by nothing: no global config
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_AUTHOR_DATE": WORKSPACE_DATE,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_COMMITTER_DATE": WORKSPACE_DATE,
    }
    run(root, "init", "-q", "--template=", "-b", WORKSPACE_BRANCH, env=env)
    run(root, "config", "user.name", name, env=env)
    run(root, "config", "user.email", email, env=env)
    return env


# --- Revisions, merge bases, shallow clones, diffs (used by `compute-stage`) ---

# Deepening talks to the remote; an unreachable one must fail, not hang.
FETCH_TIMEOUT = 120.0


def rev_parse(repo: Path, rev: str) -> str | None:
    """The commit SHA `rev` names, or None when it names no commit here.

    `--end-of-options` keeps a revision that starts with `-` from being read
    as an option; `^{commit}` peels tags and refuses trees and blobs.
    """
    result = run(
        repo,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{rev}^{{commit}}",
        check=False,
    )
    if result.returncode != 0:
        return None
    return result.stdout.decode("ascii", "replace").strip() or None


# Reads kept while `shared_reads()` is open: (what, repo, commit, ...) -> result.
_SHARED: ContextVar[dict[tuple[str, ...], object] | None] = ContextVar("_SHARED", default=None)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Within: what `blob_at`, `folder_entries` and `links_below` read at a full
    SHA is kept and reused, and `links_below` lists the commit's whole tree once.

    For one change decided for many maps (a marketplace's plugins): each map
    compares the same marketplace file at the same two commits and looks for
    links under its own folder, a git process apiece that this makes one per
    commit. An object named by a SHA never changes, so a kept read is the read.
    Outside, nothing is kept: one map's `compute-stage` lists its folder only."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _kept(key: tuple[str, ...]) -> dict[tuple[str, ...], object] | None:
    """The shared reads when open and `key`'s commit (key[2]) is a full SHA (a name
    like `HEAD` moves: never kept)."""
    shared = _SHARED.get()
    return shared if shared is not None and _HEX.fullmatch(key[2].encode()) else None


def blob_at(repo: Path, commit: str, path: str) -> bytes | None:
    """The content of `path` (repo-relative) at `commit` — `git show COMMIT:PATH` —
    or None when it is not a file there. `commit` is a SHA (never an option)."""
    key = ("blob", str(repo), commit, path)
    shared = _kept(key)
    if shared is not None and key in shared:
        return shared[key]  # type: ignore[return-value]
    result = run(repo, "cat-file", "blob", f"{commit}:{path}", check=False)
    found = result.stdout if result.returncode == 0 else None
    if shared is not None:
        shared[key] = found
    return found


def ref_names(repo: Path) -> list[str]:
    """Every branch, remote branch and tag by its short name (`main`, `origin/main`)."""
    result = run(repo, "for-each-ref", "--format=%(refname:short)", check=False)
    if result.returncode != 0:
        return []
    return result.stdout.decode("utf-8", "replace").splitlines()


def parents(repo: Path, commit: str) -> list[str]:
    """The parents of `commit` as this clone sees them (none past a shallow boundary)."""
    result = run(repo, "rev-list", "--parents", "-n", "1", "--end-of-options", commit)
    return parse_parents(result.stdout)


def parse_parents(output: bytes) -> list[str]:
    """`rev-list --parents -n 1` prints `COMMIT PARENT1 PARENT2...`; return the parents."""
    return output.decode("ascii", "replace").split()[1:]


def is_shallow(repo: Path) -> bool:
    result = run(repo, "rev-parse", "--is-shallow-repository")
    return result.stdout.strip() == b"true"


def shallow_commits(repo: Path) -> frozenset[str]:
    """The commits at the shallow boundary (`.git/shallow`): their parents are missing.

    `--git-path` finds the file in worktrees and with `$GIT_DIR` set; the path
    it prints is relative to the directory git ran in, i.e. `repo`.
    """
    raw = run(repo, "rev-parse", "--git-path", "shallow").stdout
    path = repo / raw.decode("utf-8", "surrogateescape").rstrip("\n")
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return frozenset()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def has_changes(repo: Path, paths: Sequence[str]) -> bool:
    """Whether anything under `paths` (repo-relative) differs from HEAD: staged,
    unstaged or untracked (not ignored). Paths are literal, never globs. True
    when git cannot tell (fail closed: a clean tree is a claim)."""
    specs = [f":(literal){path}" for path in paths]
    argv = ("status", "--porcelain", "-z", "--untracked-files=all", "--", *specs)
    result = run(repo, *argv, check=False)
    return result.returncode != 0 or bool(result.stdout)


def merge_bases(repo: Path, a: str, b: str) -> list[str]:
    """All best common ancestors of `a` and `b` (several after criss-cross merges).

    Empty when the histories share no commit *in this clone* — unrelated
    branches, or a shallow clone cut above the branch point.
    """
    result = run(repo, "merge-base", "--all", "--end-of-options", a, b, check=False)
    if result.returncode == 1 and not result.stdout:
        return []
    if result.returncode != 0:
        raise GitError(result)
    return result.stdout.decode("ascii", "replace").split()


def merge_base(repo: Path, a: str, b: str) -> str | None:
    """One merge base of `a` and `b` (the first `git merge-base --all` lists), or None."""
    bases = merge_bases(repo, a, b)
    return bases[0] if bases else None


def deepen(repo: Path, n: int, *, timeout: float = FETCH_TIMEOUT) -> GitResult:
    """`git fetch --deepen=N`: N more commits of history behind the shallow boundary.

    Refuses a repository that is not shallow: there `--deepen`/`--depth`
    would *make* it shallow. The result is returned unchecked; a non-zero exit
    (remote unreachable, timeout) is the caller's cue to give up.
    """
    if n < 1:
        raise ValueError(f"deepen by at least one commit, not {n}")
    if not is_shallow(repo):
        raise ValueError(f"{repo} is not a shallow clone; deepening would make it one")
    return run(
        repo,
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-recurse-submodules",
        f"--deepen={n}",
        check=False,
        timeout=timeout,
    )


def changed_paths(
    repo: Path, merge_base: str, head: str, pathspecs: Sequence[str] = ()
) -> list[str]:
    """Every path that differs between `merge_base` and `head`, repo-relative.

    The caller passes the *merge base* of BASE and HEAD (what `BASE...HEAD`
    means) — or, after a force-push, also the old tip (`Range.rewritten`): what
    it held and HEAD dropped is a change too. `--no-renames` lists a
    rename as its old and its new path, deletions are listed, a changed
    submodule gitlink is listed (`--ignore-submodules=none` overrides config
    that would hide it), and `--no-relative` overrides `diff.relative`.
    `pathspecs` limit the diff (used to split a huge diff into chunks).
    """
    result = run(
        repo,
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--no-color",
        "--no-textconv",
        "--no-relative",
        "--ignore-submodules=none",
        f"-O{os.devnull}",  # `diff.orderFile` reorders `git diff` (not `diff-tree`): cancel it
        merge_base,
        head,
        "--",
        *pathspecs,
    )
    return parse_changed_paths(result.stdout)


class TreeChange(NamedTuple):
    """One entry of a folder that differs between two commits (as `git diff-tree` lists it)."""

    old_mode: str  # "000000": absent; "040000": a folder
    old_oid: str  # all zeros when absent
    new_mode: str
    new_oid: str
    name: str

    def is_folder_change(self) -> bool:
        """A folder on each side (or absent on one): its files' changes are a tree diff."""
        return {self.old_mode, self.new_mode} <= {TREE_MODE, ABSENT_MODE}


TREE_MODE = "040000"
ABSENT_MODE = "000000"


def changed_entries(repo: Path, merge_base: str, head: str, folder: str) -> list[TreeChange] | None:
    """Each entry directly inside `folder` that differs between the two commits.

    `folder` is "" (the top) or a path ending in "/" that is a folder in both
    commits. `git diff-tree -z` of the two trees, not recursing: one tree read
    each, however big the change (an entry whose kind changed, file <-> folder,
    is listed twice, as a deletion and an addition). None when git cannot
    compare them.
    """
    if folder:
        trees = (f"{merge_base}:{folder[:-1]}", f"{head}:{folder[:-1]}")
    else:
        trees = (f"{merge_base}^{{tree}}", f"{head}^{{tree}}")
    result = run(repo, "diff-tree", "-z", "--no-renames", *trees, check=False, env=without_index())
    if result.returncode != 0:
        return None
    return parse_raw_entries(result.stdout)


def parse_raw_entries(output: bytes) -> list[TreeChange] | None:
    """Parse `git diff-tree -z` raw output (`:MODE MODE OID OID STATUS\0NAME\0`...)."""
    parts = split_z(output)
    if len(parts) % 2:
        return None
    entries: list[TreeChange] = []
    for meta, name in zip(parts[::2], parts[1::2], strict=True):
        fields = meta.split()
        if len(fields) != 5 or not fields[0].startswith(":"):
            return None
        entries.append(TreeChange(fields[0][1:], fields[2], fields[1], fields[3], name))
    return entries


LINK_MODE = "120000"
_HEX = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")


class TreeEntry(NamedTuple):
    """One entry of a tree as `git ls-tree` lists it."""

    mode: str  # "100644", "120000" (a symbolic link), "040000", "160000" (a submodule)
    oid: str
    path: str  # repo-relative


def folder_entries(repo: Path, commit: str, folders: Sequence[str]) -> dict[str, list[TreeEntry]]:
    """The entries of each folder (repo-relative, `""`: the top) in `commit`, one level,
    from one `git cat-file --batch`; a folder that is not a folder there is left out."""
    shared = _kept(("folder", str(repo), commit))
    found: dict[str, list[TreeEntry]] = {}
    if shared is not None:
        kept = {f: shared.get(("folder", str(repo), commit, f), ()) for f in folders}
        found = {f: got for f, got in kept.items() if isinstance(got, list)}
        folders = [f for f, got in kept.items() if got == ()]
    specs = [f"{commit}:{folder}" if folder else f"{commit}^{{tree}}" for folder in folders]
    for folder, got in zip(folders, objects(repo, specs), strict=True):
        if shared is not None:  # None (not a folder) is kept too
            shared[("folder", str(repo), commit, folder)] = None
        if got is None or got[0] != "tree":
            continue
        data, width = got[2], len(got[1]) // 2  # 20 bytes (SHA-1) or 32 (SHA-256)
        lead = folder + "/" if folder else ""
        entries: list[TreeEntry] = []
        at = 0
        while at < len(data):  # "MODE NAME\0<raw oid>" per entry
            space = data.index(b" ", at)
            nul = data.index(b"\0", space)
            mode = data[at:space].decode().rjust(6, "0")  # trees are stored as "40000"
            name = data[space + 1 : nul].decode("utf-8", "surrogateescape")
            oid = data[nul + 1 : nul + 1 + width].hex()
            entries.append(TreeEntry(mode, oid, lead + name))
            at = nul + 1 + width
        found[folder] = entries
        if shared is not None:
            shared[("folder", str(repo), commit, folder)] = entries
    return found


def links_below(repo: Path, commit: str, folders: Sequence[str]) -> list[TreeEntry]:
    """Every symbolic link at or below `folders` in `commit` (`""`: the whole tree).

    git records a link as mode 120000 in the tree, so this reads trees only —
    never the work tree or the index —, and a listing with no link is told by
    one C-level search of the modes, not parsed."""
    key = ("links", str(repo), commit)
    shared = _kept(key)
    if shared is not None:
        if key not in shared:
            shared[key] = _links_below(repo, commit, [""])
        everywhere: list[TreeEntry] = shared[key]  # type: ignore[assignment]
        # What `:(literal)FOLDER` selects: the folder itself and what is below it.
        return [
            e
            for e in everywhere
            if any(not f or e.path == f or e.path.startswith(f + "/") for f in folders)
        ]
    return _links_below(repo, commit, folders)


def _links_below(repo: Path, commit: str, folders: Sequence[str]) -> list[TreeEntry]:
    specs = () if "" in folders else [f":(literal){folder}" for folder in folders]
    listing = ("ls-tree", "-z", "-r", "--full-tree")
    # First the modes alone (`--format`, git 2.36+): a tenth of the output to read,
    # and on 100,000 files ~40% less time; the paths only when a link is there.
    modes = run(repo, *listing, "--format=%(objectmode)", commit, "--", *specs, check=False)
    found = modes.stdout.startswith(b"120000\0") or b"\x00120000\x00" in modes.stdout
    if modes.returncode == 0 and not found:
        return []
    out = run(repo, *listing, commit, "--", *specs).stdout
    return [e for e in parse_tree_entries(out) if e.mode == LINK_MODE]


def index_links(repo: Path, folders: Sequence[str]) -> list[str]:
    """Every symbolic link at or below `folders` in the index (what the commit will
    hold; `""`: all), repo-relative: what `check-coverage` follows."""
    specs = () if "" in folders else [f":(literal){folder}" for folder in folders]
    out = run(repo, "ls-files", "-z", "--stage", "--", *specs).stdout
    if not (out.startswith(b"120000 ") or b"\x00120000 " in out):  # no link: nothing to parse
        return []
    return parse_index_links(out)


def parse_index_links(output: bytes) -> list[str]:
    """The links of `git ls-files -z --stage` output (`MODE OID STAGE\tPATH\0`...)."""
    links = []
    for record in split_z(output):
        meta, tab, path = record.partition("\t")
        if tab and meta.startswith(LINK_MODE + " "):
            links.append(path)
    return links


def parse_tree_entries(output: bytes) -> list[TreeEntry]:
    """`git ls-tree -z` output (`MODE TYPE OID\tPATH\0`...) as entries."""
    entries: list[TreeEntry] = []
    for record in split_z(output):
        meta, tab, path = record.partition("\t")
        fields = meta.split(" ")
        if tab and len(fields) == 3:
            entries.append(TreeEntry(fields[0], fields[2], path))
    return entries


def objects(repo: Path, specs: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
    """(type, oid, content) of each object `specs` name (`OID`, `REV:PATH`), in order,
    from one `git cat-file --batch`; None for one that does not exist."""
    # A name with a line break cannot be asked in batch mode: not found (the
    # caller fails closed on a missing object).
    asked = [spec for spec in specs if "\n" not in spec]
    if not asked:
        return [None] * len(specs)
    names = "".join(f"{spec}\n" for spec in asked).encode("utf-8", "surrogateescape")
    out = run(repo, "cat-file", "--batch", stdin=names).stdout
    found: list[tuple[str, str, bytes] | None] = []
    at = 0
    for spec in specs:
        if "\n" in spec:
            found.append(None)
            continue
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        at = end + 1
        # Found: "<oid> <type> <size>"; else "<name> missing" (or "ambiguous"), where
        # the name may hold spaces: only an all-hex oid and a number are a find.
        if len(header) != 3 or not header[2].isdigit() or _HEX.fullmatch(header[0]) is None:
            found.append(None)
            continue
        size = int(header[2])
        found.append((header[1].decode(), header[0].decode(), out[at : at + size]))
        at += size + 1
    return found


def without_index() -> dict[str, str]:
    """This process's environment, with git reading no index.

    `diff-tree` reads the whole index before anything else, though comparing
    two trees never uses it: ~10 ms on 100,000 files, and an unreadable index
    would fail it where `git diff A B` (which never reads it) works.
    `GIT_INDEX_FILE` naming a file that cannot exist makes it an empty index.
    """
    return {**os.environ, "GIT_INDEX_FILE": _NO_INDEX}


# The empty tree, by object-id length (SHA-1, SHA-256); git knows it without storing it.
EMPTY_TREE = {
    40: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    64: "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}
# Only "no such file" means "empty index" to git. Nothing can be created in
# /proc/self (ENOENT even for root), and where there is no /proc the open fails
# the same way.
_NO_INDEX = "/proc/self/ci-evals-no-index"


def parse_changed_paths(output: bytes) -> list[str]:
    """Parse `git diff --name-only -z`: NUL-terminated names, nothing else."""
    return split_z(output)
