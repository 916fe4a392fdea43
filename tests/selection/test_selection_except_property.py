"""Property: `stage: none` entries and `except:` globs decide every path as the rule
says, computed here the slow way (one matcher per glob, every path alone), for
pruned and unpruned selection alike, paths in any order and in chunks; and
`check-coverage` agrees on which files are uncovered."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ci_evals.selection import decide as selection
from ci_evals.selection.coverage import check_coverage
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git
from tests.selection.test_selection_prune_property import _GLOBS, _UNDER

STAGES = ["one", "two", "three"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("map")
    git(folder, "init", "-q")
    (folder / "plugin").mkdir()
    return folder


def _expected(entries: list[tuple[str, int, list[str]]], path: str) -> tuple[int | None, str]:
    """(stage, rule) by the documented rule, one glob at a time."""
    stages = [
        stage
        for glob, stage, excepts in entries
        if GlobMatcher([glob]).matches(path)
        and not any(GlobMatcher([g]).matches(path) for g in excepts)
    ]
    if not stages:
        return 1, selection.UNMATCHED_FILE
    staged = [s for s in stages if s]
    if not staged:
        return None, selection.STAGE_NONE
    return min(staged), selection.MATCHED


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(
        st.tuples(_GLOBS, st.integers(0, 3), st.lists(_GLOBS, max_size=2, unique=True)),
        min_size=1,
        max_size=6,
        unique_by=lambda e: e[0],
    ),
    paths=st.lists(_UNDER.map(lambda p: f"plugin/{p}"), max_size=14, unique=True),
    cuts=st.lists(st.integers(0, 14), max_size=3),
)
def test_none_and_except_decide_each_path_as_the_rule_says(
    root: Path, entries: list[tuple[str, int, list[str]]], paths: list[str], cuts: list[int]
) -> None:
    lines = []
    for glob, stage, excepts in entries:
        shown = "none" if stage == 0 else str(stage)
        extra = f", except: [{', '.join(repr(g) for g in excepts)}]" if excepts else ""
        lines.append(f"  - {{ glob: {glob!r}, stage: {shown}{extra} }}")
    (root / "stage_map.yaml").write_text(
        f"version: 1\nroot: plugin\nstages: [{', '.join(STAGES)}]\nentries:\n"
        + "\n".join(lines)
        + "\nglobal: []\n",
        encoding="utf-8",
    )
    stage_map = load_stage_map(root / "stage_map.yaml", warn=False)
    expected = {p: _expected(entries, p[len("plugin/") :]) for p in paths}
    bounds = sorted({0, *(min(c, len(paths)) for c in cuts), len(paths)})
    answers = []
    # The entries' matcher with the globals folded in (compute-stage's: paths in
    # ranked batches), and without (every path matched alone).
    for prune, globs in [
        (True, stage_map.selection_globs),
        (False, stage_map.selection_globs),
        (True, stage_map.globs),
        (False, stage_map.globs),
    ]:
        selector = selection.Selector(stage_map, GlobMatcher(globs), prune=prune)
        for start, end in pairwise(bounds):
            selector.add(paths[start:end])
        chosen = selector.finish()
        assert {m.path: (m.stage, m.rule) for m in chosen.matches} == expected
        relevant = [(s, p) for p, (s, _) in expected.items() if s is not None]
        assert chosen.from_stage == (min(relevant)[0] if relevant else None)
        lowest = [selection.lowest_relevant(chosen.matches, k) for k in (1, 3, 40)]
        answers.append((chosen.from_stage, chosen.reason, chosen.decided_by, lowest))
        assert lowest[-1][0] == len(relevant)
    assert answers[1:] == answers[:1] * 3
    report = check_coverage(stage_map, paths)
    uncovered = {p for p, (_, rule) in expected.items() if rule == selection.UNMATCHED_FILE}
    assert set(report.uncovered) == uncovered
