"""A cache of the validated stage map, so the hook and `compute-stage` skip YAML and pathspec.

Loading a 1,000-entry map costs more than the rest of the hook on a small
repository: importing PyYAML and pathspec, parsing, validating every glob. The
result depends only on inputs we can name, so it is saved under the
repository's git dir (`.git/ci-evals/`; `git rev-parse --git-common-dir` when
`.git` is not a plain folder) and reused when ALL of them are unchanged:

- the map file's bytes (kept whole in the key and compared, not hashed: exact,
  and no hashlib/OpenSSL import on the hot path), its absolute path, the
  work-tree root and the map's folder (every stored path derives from them);
- the ci-evals version and the source files that give the map its meaning
  (`stage_map`, `glob_syntax`, `folder_index`, `global_globs`, `yaml_source`,
  this module): size, mtime, inode;
- the installed pathspec and PyYAML (their `__init__.py`: size, mtime, inode;
  a reinstall or upgrade rewrites it), and the Python version.

Facts about the disk are checked again on every use (the root folder must
still be a folder). Only maps that loaded without error are cached, so every
error message still comes from the real loader. A cache that cannot be read,
does not match its checksum, or does not parse is ignored (and rewritten);
one that cannot be written is skipped. Set `CI_EVALS_NO_MAP_CACHE=1` to
bypass it. `marshal` is used because it is built in and the fastest to load;
a CRC-32 of the payload guards it against a truncated or corrupted file.
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
    payload = marshal.dumps((cache_key, value))
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(zlib.crc32(payload).to_bytes(_CHECK, "big") + payload)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()
