"""A cache of the validated stage map, so the hook and `compute-stage` skip YAML and pathspec.

Loading a 1,000-entry map costs more than the rest of the hook on a small
repository: importing PyYAML and pathspec, parsing, validating every glob. The
result depends only on inputs we can name, so it is saved under the
repository's git dir (`.git/ci-evals/`) and reused when ALL of them are
unchanged: the map file's bytes (kept whole and compared: no hashlib on the hot
path), its path, the work-tree root and the map's folder; the ci-evals version
and the source files that give the map its meaning; the installed pathspec and
PyYAML; the Python version.

Facts about the disk are checked again on every use. Only maps that loaded
without error are cached, so every error message still comes from the real
loader. A cache that cannot be read, does not match its CRC-32, or does not
parse is ignored (and rewritten); one that cannot be written is skipped.
`CI_EVALS_NO_MAP_CACHE=1` bypasses it. `marshal`: built in, and the fastest to
load. docs/performance.md (*What makes it fast*: the map cache).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
import zlib
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from ci_evals import __version__

FORMAT = 1
DISABLE_ENV = "CI_EVALS_NO_MAP_CACHE"
_PACKAGE = Path(__file__).resolve().parent.parent  # ci_evals/
# Our modules whose code decides what a map file means.
_SOURCES = (
    "selection/stage_map.py",
    "selection/glob_syntax.py",
    "selection/folder_index.py",  # (which regexes indexing asks for: saved with the map)
    "selection/matcher.py",  # the matcher's parts: `root_globals` and regexes are theirs
    "selection/name_rules.py",
    "selection/ranking.py",
    "selection/bounded_search.py",
    "selection/global_globs.py",
    "config/yaml_source.py",
    "selection/map_cache.py",
    "selection/manifest_change.py",
)
# Third-party packages whose behaviour is part of the answer.
_PACKAGES = ("pathspec", "yaml")
_CHECK = 4  # bytes of CRC-32 in front of the payload


def enabled() -> bool:
    return not os.environ.get(DISABLE_ENV)


def cache_path(repo_root: Path, map_file: Path) -> Path | None:
    """Where the cache for `map_file` lives (one file per map), or None when unknown."""
    git_dir = _git_dir(repo_root)
    if git_dir is None:
        return None
    # The name only spreads maps over files; the key inside says whose it is.
    name = f"{zlib.crc32(os.fsencode(map_file)):08x}"
    return git_dir / "ci-evals" / f"stage-map-{name}.cache"


def _git_dir(repo_root: Path) -> Path | None:
    # The common case without a subprocess: `.git` is a folder and nothing in
    # the environment redirects git. Otherwise ask git (worktrees, submodules).
    if not any(key in os.environ for key in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE")):
        dot_git = repo_root / ".git"
        if dot_git.is_dir():
            return dot_git
    from ci_evals import git  # noqa: PLC0415

    result = git.run(repo_root, "rev-parse", "--git-common-dir", check=False)
    if result.returncode != 0:
        return None
    text = result.stdout.decode("utf-8", "surrogateescape").rstrip("\n")
    return (repo_root / text) if text else None


def key(map_file: Path, repo_root: Path, folder: str, data: bytes) -> tuple[Any, ...]:
    """Everything the loaded map depends on (see the module doc)."""
    return (
        FORMAT,
        __version__,
        tuple(sys.version_info[:2]),
        os.fsencode(map_file),
        os.fsencode(repo_root),
        folder,
        data,
        tuple(_stamp(_PACKAGE / name) for name in _SOURCES),
        tuple(_package_stamp(name) for name in _PACKAGES),
    )


def _stamp(path: Path) -> tuple[str, int, int, int]:
    try:
        info = path.stat()
    except OSError:
        return (str(path), -1, -1, -1)
    return (str(path), info.st_size, info.st_mtime_ns, info.st_ino)


def _package_stamp(name: str) -> tuple[str, int, int, int]:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if origin is None:
        spec = PathFinder.find_spec(name)  # locates the package without importing it
        origin = spec.origin if spec is not None else None
    return _stamp(Path(origin)) if origin else (name, -1, -1, -1)


def read(path: Path | None, expected_key: tuple[object, ...]) -> object | None:
    """The value saved with `expected_key`, or None (missing, stale, or damaged)."""
    if path is None:
        return None
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    check, payload = blob[:_CHECK], blob[_CHECK:]
    if len(check) != _CHECK or zlib.crc32(payload).to_bytes(_CHECK, "big") != check:
        return None
    try:
        # Our own file under .git (trusted like .git/hooks), checksum verified.
        saved_key, value = marshal.loads(payload)  # noqa: S302
    except (ValueError, EOFError, TypeError):
        return None
    return value if saved_key == expected_key else None


def write(path: Path | None, cache_key: tuple[Any, ...], value: tuple[Any, ...]) -> None:
    """Save `value` under `cache_key` (atomically); any failure just means no cache."""
    if path is None:
        return
    # Imported only on a miss: a hit (the hook's usual case) needs no tempfile.
    from ci_evals.fs.atomic import write_atomic  # noqa: PLC0415

    payload = marshal.dumps((cache_key, value))
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        # Not synced: a cache lost on a crash is only rebuilt.
        write_atomic(path, zlib.crc32(payload).to_bytes(_CHECK, "big") + payload, durable=False)
