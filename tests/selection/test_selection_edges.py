"""Review of the lazy selection records, the cut `matches_json`, the quick exit,
the retry checkpoint and per-scenario fixtures: each checked against the
straightforward definition, on random inputs and at the edges."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.commands.compute_stage import EXPLAIN_LIMIT, explain, matches_output
from ci_evals.fs.checkpoint import FolderCheckpoint
from ci_evals.selection import decide as selection
from ci_evals.selection.decide import Match, Selection
from ci_evals.selection.matcher import GlobMatcher
from ci_evals.selection.stage_map import StageMap, load_stage_map
from tests.conftest import git
from tests.stage_repo import branch, commit, plugin_repo, write

CLI = str(Path(sys.executable).with_name("ci-evals"))

MAP = """\
version: 1
root: plugin
stages: [one, two, three, four]
entries:
  - { glob: "x/**", stage: 2 }
  - { glob: "*.md", stage: 3 }
  - { glob: "y/*.md", stage: 4 }
global: [g.yml]
fixtures: fixtures
"""
NAMES = ["a.md", "é.md", "x/ü", "x/b", "y/c.md", "日本.md", "z.txt", "q"]
PREFIXES = ["plugin/", "plugin/", "plugin/", "other/", "fixtures/1-a/", "fixtures/acme/2-b/"]


@pytest.fixture(scope="module")
def stage_map(tmp_path_factory: pytest.TempPathFactory) -> StageMap:
    folder = tmp_path_factory.mktemp("map")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "plugin").mkdir()
    (folder / "stage_map.yaml").write_text(MAP, encoding="utf-8")
    return load_stage_map(folder / "stage_map.yaml")


def random_paths(rng: random.Random, n: int, under_root: bool) -> list[str]:
    prefixes = ["plugin/"] if under_root else PREFIXES
    found = (rng.choice(prefixes) + rng.choice(NAMES) + str(rng.randint(0, 40)) for _ in range(n))
    return list(dict.fromkeys(found))


def chosen_from(stage_map: StageMap, chunks: list[list[str]]) -> Selection:
    selector = selection.Selector(stage_map, GlobMatcher(stage_map.globs))
    for chunk in chunks:
        selector.add(chunk)
    return selector.finish()


def random_selection(stage_map: StageMap, rng: random.Random, n: int) -> Selection:
    # Chunks of either kind: all under root (ranked) or mixed (records built).
    chunks = [random_paths(rng, rng.randint(0, n), rng.random() < 0.6) for _ in range(3)]
    seen: set[str] = set()
    unique = [[p for p in c if not (p in seen or seen.add(p))] for c in chunks]  # type: ignore[func-returns-value]
    return chosen_from(stage_map, unique)


def reference_lowest(records: list[Match], count: int) -> tuple[int, list[Match]]:
    relevant = sorted((m for m in records if m.stage is not None), key=lambda m: (m.stage, m.path))
    return len(relevant), relevant[:count]


# --- 1. lazy records ------------------------------------------------------------


def test_lowest_relevant_and_records_agree_before_and_after_reading(stage_map: StageMap) -> None:
    rng = random.Random(7)
    for _ in range(300):
        chosen = random_selection(stage_map, rng, 12)
        counts = [0, 1, 2, 5, 50, -1]
        before = [selection.lowest_relevant(chosen.matches, k) for k in counts]
        records = list(chosen.matches)
        after = [selection.lowest_relevant(chosen.matches, k) for k in counts]
        expected = [reference_lowest(records, max(k, 0)) for k in counts]
        assert before == after == expected
        # The deciding path: lowest (stage, rule rank, path) over the records.
        rank = {"global-file": 0, "unmatched-file": 1, "fixture-changed": 2, "matched": 3}
        keys = [(m.stage, rank[m.rule], m.path) for m in records if m.stage is not None]
        if keys:
            stage, _, path = min(keys)
            assert chosen.decided_by is not None
            assert (chosen.from_stage, chosen.decided_by.path) == (stage, path)
            assert chosen.decided_by in records
        else:
            assert (chosen.from_stage, chosen.decided_by) == (None, None)


def test_lazy_matches_behave_like_a_tuple(stage_map: StageMap) -> None:
    rng = random.Random(11)
    for _ in range(100):
        chosen = random_selection(stage_map, rng, 8)
        lazy = chosen.matches
        eager = tuple(chosen_from(stage_map, [[m.path for m in lazy]]).matches)
        assert len(lazy) == len(eager) == chosen.changed
        same: object = lazy  # compared as any object would be
        as_list: object = list(eager)
        assert same == eager and eager == same and same == as_list
        assert hash(lazy) == hash(eager)
        for index in range(-len(eager), len(eager)):
            assert lazy[index] == eager[index]
        for start, stop, step in [(None, None, -1), (1, -1, 2), (-3, None, None), (5, 2, None)]:
            assert lazy[start:stop:step] == eager[start:stop:step]
        with pytest.raises(IndexError):
            lazy[len(eager)]
        assert list(reversed(lazy)) == list(reversed(eager))
        assert bool(lazy) == bool(eager)
        other: object = chosen.matches
        assert other != "abc" and other != 3


@pytest.mark.parametrize(
    ("chunks", "stage", "reason", "relevant"),
    [
        ([], None, "no-relevant-change", 0),
        ([[]], None, "no-relevant-change", 0),
        ([["other/a"], ["other/b"]], None, "no-relevant-change", 0),
        ([["plugin/q1", "plugin/q0"]], 1, "unmatched-file", 2),
        # A stage-1 entry cannot outrank an unmatched file at the same stage.
        ([["plugin/x/a"], ["plugin/q"], ["plugin/a.md"]], 1, "unmatched-file", 3),
        ([["other/1"], ["plugin/y/c.md", "plugin/a.md"]], 3, "matched", 2),
        ([["plugin/y/c.md"], ["fixtures/acme/2-b/f"]], 3, "fixture-changed", 2),
        ([["fixtures/acme/2-b"], ["plugin/x/1"]], 1, "fixture-changed", 2),
        ([["fixtures/acme/x/2-b/f"], ["plugin/x/1"]], 1, "fixture-changed", 2),
        ([["g.yml", "plugin/q"]], 1, "global-file", 2),
    ],
)
def test_selection_edges(
    stage_map: StageMap, chunks: list[list[str]], stage: int | None, reason: str, relevant: int
) -> None:
    chosen = chosen_from(stage_map, chunks)
    assert (chosen.from_stage, chosen.reason) == (stage, reason)
    assert selection.lowest_relevant(chosen.matches, 10)[0] == relevant


def test_a_path_under_root_also_under_fixtures(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "plugin").mkdir()
    (tmp_path / "stage_map.yaml").write_text(
        MAP.replace("fixtures: fixtures", "fixtures: plugin/fixtures"), encoding="utf-8"
    )
    stage_map = load_stage_map(tmp_path / "stage_map.yaml")
    chosen = chosen_from(stage_map, [["plugin/fixtures/3-b/f.md"], ["plugin/fixtures/1-a/y.md"]])
    by_path = {m.path: (m.stage, m.rule) for m in chosen.matches}
    # 3-b feeds stage 4 but *.md is stage 3: lower wins; y.md: fixture 1 -> 2 beats *.md -> 3.
    assert by_path == {
        "plugin/fixtures/3-b/f.md": (3, "matched"),
        "plugin/fixtures/1-a/y.md": (2, "fixture-changed"),
    }
    assert (chosen.from_stage, chosen.reason) == (2, "fixture-changed")
    # Not covered by an entry: unmatched (stage 1) outranks the fixture's stage 2.
    (m,) = chosen_from(stage_map, [["plugin/fixtures/1-a/zz"]]).matches
    assert (m.stage, m.rule) == (1, "unmatched-file")


# --- 2. matches_json and --explain ---------------------------------------------------


def reference_output(chosen: Selection, limit: int) -> tuple[str, bool]:
    parts: list[str] = []
    relevant = sorted(
        (m for m in chosen.matches if m.stage is not None), key=lambda m: (m.stage, m.path)
    )
    for m in relevant:
        part = json.dumps(m.as_json(), ensure_ascii=False)
        if len(("[" + ",".join([*parts, part]) + "]").encode("utf-8")) > limit:
            return "[" + ",".join(parts) + "]", True
        parts.append(part)
    return "[" + ",".join(parts) + "]", False


def test_matches_output_matches_the_obvious_cut_away_from_the_exact_limit(
    stage_map: StageMap,
) -> None:
    rng = random.Random(3)
    for _ in range(600):
        chosen = random_selection(stage_map, rng, rng.choice([6, 60]))
        if rng.random() < 0.3:
            list(chosen.matches)  # records already read
        limit = rng.choice([rng.randint(2, 300), rng.randint(300, 6000)])
        got, expected = matches_output(chosen, limit), reference_output(chosen, limit)
        exact = len(expected[0].encode("utf-8")) == limit
        if not exact:
            assert got == expected
        assert len(got[0].encode("utf-8")) <= limit
        assert json.loads(got[0]) == json.loads(expected[0])[: len(json.loads(got[0]))]


def test_matches_output_with_more_records_than_its_first_guess(stage_map: StageMap) -> None:
    # limit // 64 records asked first: far more, short records, all fit.
    paths = [f"plugin/q{i}" for i in range(3000)]
    chosen = chosen_from(stage_map, [paths[:1000], paths[1000:]])
    out, cut = matches_output(chosen, 10**6)
    assert (len(json.loads(out)), cut) == (3000, False)
    assert (out, cut) == reference_output(chosen, 10**6)


def test_matches_output_keeps_a_list_exactly_at_the_limit() -> None:
    one = Match("plugin/é.md", 3, "*.md", "matched", "")
    chosen = Selection(3, "matched", 1, (one,))
    full = "[" + json.dumps(one.as_json(), ensure_ascii=False) + "]"
    assert matches_output(chosen, len(full.encode("utf-8"))) == (full, False)


def listed_path(line: str) -> str:
    found = re.match(r" [ *] stage \d+  (.*?)  \[", line)
    assert found is not None, line
    return found[1]


def test_explain_lists_the_lowest_relevant_like_a_full_sort(stage_map: StageMap) -> None:
    rng = random.Random(5)
    for _ in range(150):
        chosen = random_selection(stage_map, rng, rng.choice([5, 40]))
        text = explain(chosen, stage_map)
        records = list(chosen.matches)
        relevant = sorted(
            (m for m in records if m.stage is not None), key=lambda m: (m.stage, m.path)
        )
        listed = [line for line in text.splitlines() if line.startswith(("   stage", " * stage"))]
        assert [listed_path(line) for line in listed] == [
            selection.quote_path(m.path) for m in relevant[:EXPLAIN_LIMIT]
        ]
        starred = [line for line in listed if line.startswith(" *")]
        assert len(starred) == (1 if chosen.decided_by in relevant[:EXPLAIN_LIMIT] else 0)
        if records:
            ignored = len(records) - len(relevant)
            assert f"{len(records)} path(s): {len(relevant)} relevant, {ignored} ignored" in text
        if len(relevant) > EXPLAIN_LIMIT:
            assert f"... {len(relevant) - EXPLAIN_LIMIT} more (see --json)" in text


# --- 3. the quick exit of the real console script ------------------------------------


@pytest.fixture
def big(repo: Path) -> Path:
    """main: the plugin; feature: 2000 files under the plugin, 300 outside it."""
    plugin_repo(repo)
    branch(repo)
    for i in range(2000):
        write(repo, f"plugin/skills/plan/f{i:05}é.md")
    for i in range(300):
        write(repo, f"other/o{i}.txt")
    commit(repo)
    return repo


def cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None, **kw: object
) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [CLI, *args],
        cwd=cwd,
        env={**environ, **(env or {})},
        capture_output=True,
        check=False,
        **kw,
    )


@pytest.mark.slow
def test_big_json_to_a_pipe_and_to_a_file_is_complete(big: Path, tmp_path: Path) -> None:
    piped = cli(big, "compute-stage", "main", "--json")
    assert piped.returncode == 0, piped.stderr
    answer = json.loads(piped.stdout)
    assert (answer["from_stage"], answer["changed"], len(answer["matches"])) == (2, 2300, 2300)

    out = tmp_path / "out.json"
    with out.open("wb") as fh:
        to_file = subprocess.run(
            [CLI, "compute-stage", "main", "--json"], cwd=big, stdout=fh, check=False
        )
    assert to_file.returncode == 0
    assert out.read_bytes() == piped.stdout

    explained = cli(big, "compute-stage", "main", "--explain")
    assert explained.returncode == 0
    assert explained.stdout.decode().endswith(
        "300 path(s) outside the plugin root ignored (see --json)\n"
    )


@pytest.mark.slow
def test_actions_outputs_are_complete(big: Path, tmp_path: Path) -> None:
    output = tmp_path / "output"
    done = cli(big, "compute-stage", "main", env={"GITHUB_OUTPUT": str(output)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"2\n"
    text = output.read_text(encoding="utf-8")
    assert "\nmatches_truncated=false\n" in text
    assert "\nfixture_stages=\n" in text  # no fixture changed
    assert "\nregrade=false\nregrade_reason=\n" in text  # the plugin changed: a run
    assert re.search(r"\nbase=[0-9a-f]{40}\n\Z", text), text[-200:]  # written to its last line
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert values["changed_count"] == "2300"
    records = json.loads(values["matches_json"])
    assert len(records) == 2000 and records[0]["path"] == "plugin/skills/plan/f00000é.md"


@pytest.mark.slow
def test_check_coverage_keeps_exit_1_and_writes_the_whole_summary(
    repo: Path, tmp_path: Path
) -> None:
    plugin_repo(repo)
    for i in range(500):
        write(repo, f"plugin/uncovered/u{i}.txt")
    git(repo, "add", "-A")
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    done = cli(
        repo,
        "check-coverage",
        env={
            "GITHUB_ACTIONS": "true",
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(output),
        },
    )
    assert done.returncode == 1
    lines = done.stdout.decode().splitlines()
    assert sum("not covered by any entry" in line for line in lines) == 500
    assert any(line.startswith("ci-evals: stage map check failed: 500 uncovered") for line in lines)
    rows = [line for line in summary.read_text().splitlines() if line.startswith("- `plugin/")]
    assert len(rows) == 500


def test_exit_codes_are_kept(big: Path, tmp_path: Path) -> None:
    assert cli(big, "compute-stage", "main").returncode == 0
    usage = cli(big, "compute-stage")
    assert usage.returncode == 2 and b"BASE is required" in usage.stderr
    assert cli(big, "compute-stage", "main", "--no-such-option").returncode == 2
    assert cli(big, "compute-stage", "main", "--head", "no-such-rev").returncode == 2
    # A bug: the outputs file is a folder.
    folder = tmp_path / "outputs-folder"
    folder.mkdir()
    crash = cli(
        big, "compute-stage", "main", env={"GITHUB_OUTPUT": str(folder), "TMPDIR": str(tmp_path)}
    )
    assert crash.returncode == 3
    assert b"this is a bug in ci-evals" in crash.stderr
    assert crash.stdout == b"2\n"  # the answer printed before the crash is not lost


def run_shell(cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={**environ, "CLI": CLI},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_a_reader_that_goes_away_gets_no_garbage_on_stderr(big: Path) -> None:
    done = run_shell(
        big, '"$CLI" compute-stage main --json | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}"'
    )
    assert done.stdout.strip() in {"0", "1", "120"}
    assert done.stderr == ""


def test_a_closed_stdout_keeps_the_exit_code(big: Path) -> None:
    done = run_shell(big, '"$CLI" compute-stage main >&-; echo "rc=$?"')
    assert "Traceback" not in done.stderr
    assert done.stdout.strip() == "rc=0"


# --- 4. the retry checkpoint ---------------------------------------------------


def test_checkpoint_keeps_odd_names_links_and_never_follows_inner_links(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "precious").write_text("keep")
    odd = os.fsencode(work / "sub") + b"/bad\xffname\nwith newline"
    with open(odd, "wb") as fh:
        fh.write(b"odd")
    os.symlink(outside, work / "out")  # absolute, pointing outside
    os.symlink("../sub", work / "sub" / "loop")
    checkpoint = FolderCheckpoint([work], tmp_path / "store")
    checkpoint.save()

    # The attempt: an inner folder replaced by a link outside, the odd file gone.
    shutil.rmtree(work / "sub")
    os.symlink(outside, work / "sub")
    os.unlink(work / "out")
    (work / "out").mkdir()
    checkpoint.restore()

    assert (outside / "precious").read_text() == "keep"
    assert sorted(os.listdir(outside)) == ["precious"]
    assert not (work / "sub").is_symlink()
    with open(odd, "rb") as fh:
        assert fh.read() == b"odd"
    assert os.readlink(work / "out") == str(outside)
    assert os.readlink(work / "sub" / "loop") == "../sub"
    checkpoint.discard()
    assert not (tmp_path / "store").exists()
    assert (outside / "precious").exists()


def test_restore_never_empties_the_target_of_a_folder_replaced_by_a_link(tmp_path: Path) -> None:
    work, outside = tmp_path / "plugin", tmp_path / "home"
    work.mkdir()
    (work / "a.txt").write_text("a")
    outside.mkdir()
    (outside / "precious").write_text("keep")
    checkpoint = FolderCheckpoint([work], tmp_path / "store")
    checkpoint.save()
    shutil.rmtree(work)
    os.symlink(outside, work)
    with contextlib.suppress(OSError):  # refusing is fine; touching `outside` is not
        checkpoint.restore()
    assert sorted(os.listdir(outside)) == ["precious"]


def test_restore_of_a_very_deep_tree(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    checkpoint = FolderCheckpoint([work], tmp_path / "store")
    checkpoint.save()
    deep = str(work)
    for _ in range(1100):  # os.makedirs would recurse once per level itself
        deep = os.path.join(deep, "d")
        os.mkdir(deep)
    try:
        checkpoint.restore()
    except OSError:
        pass  # refusing is what retry.py expects
    else:
        assert os.listdir(work) == []


# --- 6. per-scenario fixtures, through the rule ----------------------------------------


@pytest.mark.parametrize(
    ("path", "stage"),
    [
        ("fixtures/1-a/f", 2),
        ("fixtures/01-a/f", 2),
        ("fixtures/acme/1-a/f", 2),
        ("fixtures/acme/0-a/deep/f", 1),
        ("fixtures/acme/3-a/f", 4),
        ("fixtures/acme/4-a/f", 1),  # feeds no stage
        ("fixtures/acme/1-a", 1),  # a file named like a folder
        ("fixtures/acme/1a/f", 1),
        ("fixtures/acme/x/1-a/f", 1),
        ("fixtures/1-a", 1),
        ("fixtures/acme", 1),
        ("fixtures/acme/", 1),
        ("fixtures/\uff11-a/f", 1),  # a full-width digit is not a stage number
    ],
)
def test_fixture_rule(stage_map: StageMap, path: str, stage: int) -> None:
    (m,) = chosen_from(stage_map, [[path]]).matches
    assert (m.stage, m.rule) == (stage, "fixture-changed")


REPLACES_THE_PLUGIN = """  - name: s5-replaces-the-plugin
    match: {command: demo:s5}
    variants:
      - - tools: [{bash: "rm -rf ../plugin && ln -s OUTSIDE ../plugin"}]
        - fault: {http_status: 529}
      - - text: "stage 5 done"
"""


@pytest.mark.slow
def test_a_retry_never_deletes_outside_the_run(tmp_path: Path) -> None:
    from ci_evals.agents.registry import get_agent  # noqa: PLC0415
    from ci_evals.agents.retry import RetryingAgent  # noqa: PLC0415
    from ci_evals.backoff import RetryPolicy  # noqa: PLC0415
    from tests.agents.test_retry import run_stage_5  # noqa: PLC0415

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep\n")
    agent = RetryingAgent(get_agent("claude"), RetryPolicy(first_s=0.1))
    run_stage_5(tmp_path / "t", REPLACES_THE_PLUGIN.replace("OUTSIDE", str(outside)), agent)

    assert sorted(os.listdir(outside)) == ["precious.txt"]
