"""Property: the pruned plain answer (`Selector`, the default) is exactly the
unpruned one (`Selector(prune=False)`: every path's rank, then the minimum),
and both agree with the records `--json` prints.

The maps mix what pruning looks at: globs matching whole folders (`a/**`,
`t/`, `*/t/**`, `*`), wildcard names active everywhere (`**/f*`, `f?.md`) or
in some folders (`**/t/f*`, `a/*.md`), exact names and extensions, at every
stage, so that ties (same stage, several paths), uncovered files (stage 1,
`unmatched-file`), global files and fixtures all occur; the paths come in any
order and in chunks, so the running minimum is found early, late, or in a
later chunk. Globals that reach into root are matched either in the entries'
pass (the matcher built from `StageMap.selection_globs`) or path by path (a
matcher of the entries alone, or a global that cannot be rewritten for root):
every way gives the same answer.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals.selection import decide as selection
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git

STAGES = ["one", "two", "three", "four"]
_GLOBS = st.sampled_from(
    [
        "a/**",
        "t/",
        "*/t/**",
        "*",
        "a/b/**",
        "**/f*",
        "**/t/f*",
        "f?.md",
        "a/*.md",
        "*.md",
        "*.py",
        "x.py",
        "a/t/f1.md",
        "b/**/g*",
        "**/t/*.py",
        "[ab]/*/",
    ]
)
_SEGMENT = st.sampled_from(["a", "b", "t", "c"])
_NAME = st.sampled_from(["f1.md", "f2.py", "g.md", "x.py", "y.txt", "f", "fa.md", "z"])
_UNDER = st.tuples(st.lists(_SEGMENT, max_size=3), _NAME).map(lambda p: "/".join([*p[0], p[1]]))
_PATH = st.one_of(
    _UNDER.map(lambda p: f"plugin/{p}"),
    _UNDER.map(lambda p: f"plugin/{p}"),
    st.sampled_from(["fixtures/0-seed/a", "fixtures/2-plan/b", "fixtures/acme/1-x/c", "g.yml"]),
    _UNDER,  # outside root: ignored
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("map")
    git(folder, "init", "-q")
    (folder / "plugin").mkdir()
    (folder / "fixtures").mkdir()
    return folder


def _answer(chosen: selection.Selection) -> tuple[object, ...]:
    return (chosen.from_stage, chosen.reason, chosen.changed, chosen.detail, chosen.decided_by)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    entries=st.lists(
        st.tuples(_GLOBS, st.integers(1, 4)), min_size=1, max_size=8, unique_by=lambda e: e[0]
    ),
    paths=st.one_of(  # all under root (the pruned batches), sorted or not, or anything
        st.lists(_UNDER.map(lambda p: f"plugin/{p}"), max_size=16, unique=True).map(sorted),
        st.lists(_UNDER.map(lambda p: f"plugin/{p}"), max_size=16, unique=True),
        st.lists(_PATH, max_size=16, unique=True),
    ),
    cuts=st.lists(st.integers(0, 16), max_size=4),
    extras=st.sampled_from(
        [
            "",
            "global: [g.yml]\n",
            "fixtures: fixtures\n",
            "global: [plugin/b]\n",
            'global: [g.yml, "plugin/a/*.md", "f?.py"]\n',  # rewritten for root
            'global: ["*/t/**"]\n',  # cannot be: path by path
            "global: [f1.md, z]\n",  # literal names in every folder, below every entry
            "global: [plugin]\n",  # everything under root
        ]
    ),
)
def test_pruned_answer_is_the_full_one(
    root: Path, entries: list[tuple[str, int]], paths: list[str], cuts: list[int], extras: str
) -> None:
    lines = [f'  - {{ glob: "{glob}", stage: {stage} }}' for glob, stage in entries]
    (root / "stage_map.yaml").write_text(
        "version: 1\nroot: plugin\n"
        f"stages: [{', '.join(STAGES)}]\n"
        "entries:\n" + "\n".join(lines) + "\n" + extras,
        encoding="utf-8",
    )
    stage_map = load_stage_map(root / "stage_map.yaml")
    bounds = sorted({0, *(min(c, len(paths)) for c in cuts), len(paths)})
    answers = []
    for prune, globs in [
        (True, stage_map.selection_globs),
        (False, stage_map.selection_globs),
        (True, stage_map.globs),
        (False, stage_map.globs),
    ]:
        selector = selection.Selector(stage_map, GlobMatcher(globs), prune=prune)
        for start, end in pairwise(bounds):  # the paths in a few chunks
            selector.add(paths[start:end])
        chosen = selector.finish()
        # `--explain`'s and `matches_json`'s lowest first (pruned while unread), then all.
        lowest = [selection.lowest_relevant(chosen.matches, k) for k in (0, 1, 2, 5, 40)]
        answers.append((_answer(chosen), lowest, list(chosen.matches)))
    assert answers[2:] == answers[:2]  # globals in the entries' pass, or path by path
    (pruned, pruned_lowest, pruned_records), (full, full_lowest, full_records) = answers[:2]
    assert pruned == full
    assert pruned_lowest == full_lowest
    assert pruned_records == full_records
    # The records (`--json`) decide the same: the lowest (stage, rule rank, path).
    relevant = [m for m in full_records if m.stage is not None]
    if relevant:
        rank = {"global-file": 0, "unmatched-file": 1, "fixture-changed": 2, "matched": 3}
        lowest = min(relevant, key=lambda m: (m.stage, rank[m.rule], m.path))
        assert pruned[4] == lowest
        assert pruned[:2] == (lowest.stage, lowest.rule)
    else:
        assert pruned[:2] == (None, "no-relevant-change")


@pytest.mark.parametrize(
    ("chunks", "stage", "path", "entry"),
    [
        # A tie at the minimum, later and at a smaller path (out of order): it decides.
        ([["plugin/b/f1.md", "plugin/c/z"], ["plugin/a/f1.md"]], 2, "plugin/a/f1.md", "**/f*"),
        # The minimum only at the very end, in a folder covered at stage 3.
        ([["plugin/a/x.py", "plugin/c/z"], ["plugin/t/f1.md"]], 1, "plugin/t/f1.md", "t/"),
        # An uncovered file beats a stage-1 match, whatever the order.
        ([["plugin/t/z", "plugin/c/y.txt"], ["plugin/b/y.txt"]], 1, "plugin/b/y.txt", None),
    ],
)
def test_the_minimum_found_late_decides(
    root: Path, chunks: list[list[str]], stage: int, path: str, entry: str | None
) -> None:
    (root / "stage_map.yaml").write_text(
        "version: 1\nroot: plugin\n"
        f"stages: [{', '.join(STAGES)}]\n"
        "entries:\n"
        '  - { glob: "**/f*", stage: 2 }\n'
        '  - { glob: "a/**", stage: 3 }\n'
        '  - { glob: "c/**", stage: 3 }\n'
        '  - { glob: "t/", stage: 1 }\n',
        encoding="utf-8",
    )
    stage_map = load_stage_map(root / "stage_map.yaml")
    for prune in (True, False):
        selector = selection.Selector(stage_map, GlobMatcher(stage_map.globs), prune=prune)
        for chunk in chunks:
            selector.add(chunk)
        chosen = selector.finish()
        assert chosen.from_stage == stage
        assert chosen.decided_by is not None
        assert (chosen.decided_by.path, chosen.decided_by.entry) == (path, entry)
