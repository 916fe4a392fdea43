"""The stage-map cache under .git/ci-evals/: same answers, or no cache at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.selection import map_cache
from ci_evals.selection.stage_map import load_stage_map

MAP = """\
version: 1
root: plugin
stages: [research, plan, write]
entries:
  - { glob: "agents/*.md", stage: 1 }
  - { glob: "skills/test_*.py", stage: plan }
  - { glob: "a/*/deep/[a-c]*.md", stage: 3 }
  - { glob: "docs/", stage: write }
  - { glob: "agents/*.md", stage: 2 }
  - { glob: "mod_0[0-4]/", stage: 2 }
global: ["stub/*.y?ml", "plugin/skills/*.py", "**/test_?.py"]
fixtures: fixtures
"""
PATHS = [
    "agents/x.md",
    "skills/test_a.py",
    "skills/a.py",
    "a/q/deep/b1.md",
    "a/q/deep/d1.md",
    "docs/z/y.txt",
    "x/mod_03/y.txt",
    "other.txt",
]


@pytest.fixture(autouse=True)
def _from_the_repository(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the top of the repository, as the hook does: messages name the map
    from the current folder (`text.display_path`), so there it is `stage_map.yaml`."""
    monkeypatch.chdir(repo)


@pytest.fixture
def plugin(repo: Path) -> Path:
    (repo / "plugin").mkdir()
    (repo / "stage_map.yaml").write_text(MAP, encoding="utf-8")
    return repo


def _cache_files(repo: Path) -> list[Path]:
    folder = repo / ".git" / "ci-evals"
    return sorted(folder.glob("stage-map-*.cache")) if folder.is_dir() else []


def test_second_load_comes_from_the_cache_and_equals_the_first(plugin: Path) -> None:
    fresh = load_stage_map(plugin / "stage_map.yaml", cache=False, warn=False)
    assert _cache_files(plugin) == []
    first = load_stage_map(plugin / "stage_map.yaml", warn=False)
    (cached_file,) = _cache_files(plugin)
    written = cached_file.stat().st_mtime_ns
    second = load_stage_map(plugin / "stage_map.yaml", warn=False)
    assert first == second == fresh
    assert cached_file.stat().st_mtime_ns == written  # read, not rewritten


def test_warnings_are_printed_again_from_the_cache(
    plugin: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        loaded = load_stage_map(plugin / "stage_map.yaml")
        err = capsys.readouterr().err
        assert "entries[4].glob: 'agents/*.md' repeats entries[0]" in err
        assert loaded.warnings and err.splitlines() == list(loaded.warnings)


def test_a_changed_map_is_loaded_again(plugin: Path) -> None:
    load_stage_map(plugin / "stage_map.yaml", warn=False)
    # Same size, same second: only the content hash can tell.
    edited = MAP.replace('"docs/", stage: write', '"docs/", stage: plan ')
    assert len(edited) == len(MAP)
    stat = (plugin / "stage_map.yaml").stat()
    (plugin / "stage_map.yaml").write_text(edited, encoding="utf-8")
    os.utime(plugin / "stage_map.yaml", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    reloaded = load_stage_map(plugin / "stage_map.yaml", warn=False)
    assert reloaded.entries[3].stage == 2


def test_an_error_is_never_cached(plugin: Path) -> None:
    load_stage_map(plugin / "stage_map.yaml", warn=False)
    (plugin / "stage_map.yaml").write_text(MAP.replace("stage: 3", "stage: 9"), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(UserError, match="stage 9 is out of range"):
            load_stage_map(plugin / "stage_map.yaml", warn=False)


def test_a_root_removed_since_is_reported_by_the_real_loader(plugin: Path) -> None:
    load_stage_map(plugin / "stage_map.yaml", warn=False)
    (plugin / "plugin").rmdir()
    with pytest.raises(UserError, match="'plugin' does not exist"):
        load_stage_map(plugin / "stage_map.yaml", warn=False)


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: b"",
        lambda blob: blob[: len(blob) // 2],  # truncated
        lambda blob: blob[:40] + bytes([blob[40] ^ 0xFF]) + blob[41:],  # one byte flipped
        lambda blob: b"\x00" * 32 + b"garbage",
    ],
    ids=["empty", "truncated", "flipped", "garbage"],
)
def test_a_damaged_cache_is_ignored_and_rewritten(plugin: Path, damage: object) -> None:
    expected = load_stage_map(plugin / "stage_map.yaml", warn=False)
    (cached_file,) = _cache_files(plugin)
    cached_file.write_bytes(damage(cached_file.read_bytes()))  # type: ignore[operator]
    assert load_stage_map(plugin / "stage_map.yaml", warn=False) == expected
    assert map_cache.read(cached_file, map_cache.key(
        expected.file, expected.repo_root, "", expected.file.read_bytes()
    )) is not None  # fmt: skip


def test_a_well_formed_cache_of_the_wrong_shape_is_ignored(plugin: Path) -> None:
    expected = load_stage_map(plugin / "stage_map.yaml", warn=False)
    (cached_file,) = _cache_files(plugin)
    key = map_cache.key(expected.file, expected.repo_root, "", expected.file.read_bytes())
    map_cache.write(cached_file, key, ("not", "a", "map"))
    assert load_stage_map(plugin / "stage_map.yaml", warn=False) == expected


def test_an_unwritable_cache_folder_is_no_error(plugin: Path) -> None:
    (plugin / ".git" / "ci-evals").write_text("a file where the folder would go")
    first = load_stage_map(plugin / "stage_map.yaml", warn=False)
    assert load_stage_map(plugin / "stage_map.yaml", warn=False) == first


def test_the_environment_switch_bypasses_it(plugin: Path) -> None:
    env = {**os.environ, map_cache.DISABLE_ENV: "1"}
    subprocess.run(
        [sys.executable, "-m", "ci_evals", "check-coverage"],
        cwd=plugin,
        env=env,
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert _cache_files(plugin) == []


_PROBE = """
import json, sys
from pathlib import Path
from ci_evals.selection.stage_map import load_stage_map
from ci_evals.selection.matcher import GlobMatcher
m = load_stage_map(Path("stage_map.yaml"), warn=False)
paths = json.loads(sys.argv[1])
answers = [GlobMatcher(m.globs).matches(p) for p in paths]
# compute-stage's matcher (entries + globals rewritten for root) and the globals'.
answers += [GlobMatcher(m.selection_globs).matches(p) for p in paths]
answers += [GlobMatcher(m.global_paths).matches("plugin/" + p) for p in paths]
print(json.dumps({"answers": answers, "yaml": "yaml" in sys.modules,
                  "pathspec": "pathspec" in sys.modules}))
"""


def _probe(repo: Path, **env: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(PATHS)],
        cwd=repo,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    found: dict[str, object] = json.loads(result.stdout)
    return found


def test_from_the_cache_neither_yaml_nor_pathspec_is_imported_and_answers_agree(
    plugin: Path,
) -> None:
    uncached = _probe(plugin, **{map_cache.DISABLE_ENV: "1"})
    assert uncached["yaml"] and uncached["pathspec"]
    first = _probe(plugin)  # writes the cache
    cached = _probe(plugin)
    assert cached == {"answers": uncached["answers"], "yaml": False, "pathspec": False}
    assert first["answers"] == uncached["answers"]
    entries = [[0, 4], [1], [], [2], [], [3], [5], []]
    with_globals = [[0, 4], [1, 6, 7], [6], [2], [], [3], [5], []]
    globals_ = [[], [2, 3], [2], [], [], [], [], []]
    assert uncached["answers"] == entries + with_globals + globals_


def test_map_cache_sources_exist_after_the_move() -> None:
    # A missing path is stamped (-1, -1, -1) forever: its changes would never
    # change the cache key.
    for name in map_cache._SOURCES:
        assert (map_cache._PACKAGE / name).is_file(), name


def test_map_cache_key_covers_every_selection_module_the_map_depends_on() -> None:
    """The cache is trusted while `_SOURCES` (size, mtime, inode) and the version are
    unchanged, so every selection module the map loader imports must be listed: the
    matcher split into six modules (issue 37) first listed two of them, and an edit
    to the others would have left a stale cached map trusted."""
    code = (
        "import sys, ci_evals.selection.stage_map as s, ci_evals.selection.map_cache as c\n"
        "s.load_stage_map  # noqa\n"
        "import ci_evals.selection.manifest_change\n"
        "mods = sorted(m for m in sys.modules if m.startswith('ci_evals.selection.'))\n"
        "print('\\n'.join(mods)); print('--'); print('\\n'.join(c._SOURCES))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(map_cache.__file__).resolve().parents[2],
    )
    imported, listed = done.stdout.split("--\n")
    sources = set(listed.split())
    missing = [
        name
        for name in imported.split()
        if name.removeprefix("ci_evals.").replace(".", "/") + ".py" not in sources
    ]
    assert not missing, f"imported by the stage map loader, not in map_cache._SOURCES: {missing}"
