"""Property: `Selector` (batched, records built lazily) gives exactly what the
rules in `ci_evals.selection.decide`'s docstring say, path by path."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals.selection import decide as selection
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import StageMap, load_stage_map
from tests.conftest import git

STAGES = ["one", "two", "three", "four"]
_GLOBS = st.sampled_from(
    ["agents/*.md", "skills/**", "skills/plan/**", "*.md", "commands/", "a/*/c.md", "b", "**/x"]
)
_SEGMENT = st.sampled_from(["agents", "skills", "plan", "a", "b", "c.md", "x", "y.md", "z.txt"])
_UNDER = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)
_PATH = st.one_of(
    _UNDER.map(lambda p: f"plugin/{p}"),  # under root
    _UNDER.map(lambda p: f"fixtures/{p}"),  # fixtures: `2-x/...` and malformed
    st.sampled_from(
        [
            "fixtures/0-seed/a",
            "fixtures/2-plan/b",
            "fixtures/9-late/c",
            "fixtures/acme/2-plan/b",
            "fixtures/acme/3-x/deep/c",
            "fixtures/acme/9-late/c",
            "fixtures/acme/notes.md",
            "fixtures/2-plan/3-more/d",
            "global.yml",
        ]
    ),
    _UNDER,  # outside root
)
RULE_RANK = {"global-file": 0, "unmatched-file": 1, "fixture-changed": 2, "matched": 3}


def reference(stage_map: StageMap, path: str) -> tuple[int | None, str, str | None]:
    """(stage, rule, entry glob) for one path, straight from the rules."""
    candidates: list[tuple[int, int, str | None, str]] = []  # (stage, rule rank, entry, rule)
    if GlobMatcher(stage_map.global_paths).matches(path):
        candidates.append((1, 0, None, "global-file"))
    if path.startswith("plugin/"):
        found = GlobMatcher(stage_map.globs).matches(path.removeprefix("plugin/"))
        if found:
            stage, position = min((stage_map.entries[i].stage, i) for i in found)
            candidates.append((stage, 3, stage_map.entries[position].glob, "matched"))
        else:
            candidates.append((1, 1, None, "unmatched-file"))
    if path.startswith("fixtures/"):
        # fixtures/<k>-*/... or, for a scenario's own, fixtures/<name>/<k>-*/...
        parts = path.removeprefix("fixtures/").split("/")
        stage_folder = re.compile(r"([0-9]+)-")
        found = stage_folder.match(parts[0]) if len(parts) > 1 else None
        if found is None and len(parts) > 2 and not stage_folder.match(parts[0]):
            found = stage_folder.match(parts[1])
        k = int(found.group(1)) if found else None
        good = k is not None and k < len(STAGES)
        candidates.append((k + 1 if good and k is not None else 1, 2, None, "fixture-changed"))
    if not candidates:
        return None, "ignored", None
    stage, _, entry, rule = min(candidates, key=lambda c: (c[0], c[1]))
    return stage, rule, entry


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("map")
    git(folder, "init", "-q")
    (folder / "plugin").mkdir()
    (folder / "fixtures").mkdir()
    return folder


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    entries=st.lists(
        st.tuples(_GLOBS, st.integers(1, 4)), min_size=1, max_size=6, unique_by=lambda e: e[0]
    ),
    paths=st.one_of(  # all under root (the usual, batched case) or anything
        st.lists(_UNDER.map(lambda p: f"plugin/{p}"), max_size=12, unique=True),
        st.lists(_PATH, max_size=12, unique=True),
    ),
    cuts=st.lists(st.integers(0, 12), max_size=3),
)
def test_selector_follows_the_rules(
    root: Path, entries: list[tuple[str, int]], paths: list[str], cuts: list[int]
) -> None:
    lines = [f'  - {{ glob: "{glob}", stage: {stage} }}' for glob, stage in entries]
    (root / "stage_map.yaml").write_text(
        "version: 1\nroot: plugin\n"
        f"stages: [{', '.join(STAGES)}]\n"
        "entries:\n" + "\n".join(lines) + "\n"
        "global: [global.yml, y.md]\nfixtures: fixtures\n",  # y.md: also under root
        encoding="utf-8",
    )
    stage_map = load_stage_map(root / "stage_map.yaml")
    selector = selection.Selector(stage_map, GlobMatcher(stage_map.selection_globs))
    bounds = sorted({0, *(min(c, len(paths)) for c in cuts), len(paths)})
    for start, end in pairwise(bounds):  # the paths in a few chunks
        selector.add(paths[start:end])

    chosen = selector.finish()
    # Before anything reads the records (the ranked fast path), then after.
    lowest = [selection.lowest_relevant(chosen.matches, k) for k in (0, 1, 3, 20)]
    records = list(chosen.matches)
    assert [selection.lowest_relevant(chosen.matches, k) for k in (0, 1, 3, 20)] == lowest
    relevant = sorted((m for m in records if m.stage is not None), key=lambda m: (m.stage, m.path))
    assert lowest == [(len(relevant), relevant[:k]) for k in (0, 1, 3, 20)]

    expected = [reference(stage_map, p) for p in paths]
    assert [(m.path, m.stage, m.rule, m.entry) for m in chosen.matches] == [
        (p, *e) for p, e in zip(paths, expected, strict=True)
    ]
    assert chosen.changed == len(paths)
    keys = [(s, RULE_RANK[r], p) for p, (s, r, _) in zip(paths, expected, strict=True) if s]
    if not keys:
        assert (chosen.from_stage, chosen.reason, chosen.decided_by) == (
            None,
            "no-relevant-change",
            None,
        )
        return
    stage, _, path = min(keys)
    assert chosen.from_stage == stage
    assert chosen.decided_by is not None
    assert chosen.decided_by.path == path
    assert chosen.reason == chosen.decided_by.rule
