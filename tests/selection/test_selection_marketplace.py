"""The map features that make selection save on a marketplace's history: the plugin's
own marketplace entry compared (`marketplace:`), metadata keys ignored
(`ignore_metadata:`), entries no stage reads (`stage: none`) and `except:` globs.
Real git repositories; each decision checked through `compute-stage` itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.selection import decide as selection
from ci_evals.selection.coverage import check_coverage
from ci_evals.selection.stage_map import load_stage_map
from tests.conftest import git
from tests.stage_repo import by_path, commit, compute, write

MAP = """\
version: 1
root: plugins/alpha
stages: [plan, build]
entries:
  - { glob: /.claude-plugin/plugin.json, stage: plan }
  - { glob: /commands/plan.md, stage: plan }
  - { glob: /commands/build.md, stage: build }
  - glob: /skills/**
    except: [/skills/legacy/**]
    stage: build
  - { glob: /skills/legacy/**, stage: none }
  - { glob: README.md, stage: none }
  - { glob: /LICENSE, stage: none }
global: [/ci-evals.yaml]
marketplace: { file: /.claude-plugin/marketplace.json, plugin: alpha }
ignore_metadata: [version, description, author, keywords, category, tags, owner]
fixtures: fixtures
"""


def _market(**alpha: object) -> str:
    entry = {"name": "alpha", "source": "./plugins/alpha", "version": "1.0.0", **alpha}
    other = {"name": "beta", "source": "./plugins/beta", "version": "0.1.0"}
    doc = {"name": "m", "owner": {"name": "o"}, "plugins": [entry, other]}
    return json.dumps(doc, indent=2) + "\n"


def _manifest(**extra: object) -> str:
    return json.dumps({"name": "alpha", "version": "1.0.0", **extra}, indent=2) + "\n"


@pytest.fixture
def market(repo: Path) -> Path:
    files = {
        "stage_map.yaml": MAP,
        "ci-evals.yaml": "suite: x\n",
        ".claude-plugin/marketplace.json": _market(),
        "plugins/alpha/.claude-plugin/plugin.json": _manifest(),
        "plugins/alpha/commands/plan.md": "plan\n",
        "plugins/alpha/commands/build.md": "build\n",
        "plugins/alpha/skills/write/SKILL.md": "write\n",
        "plugins/alpha/skills/legacy/SKILL.md": "old\n",
        "plugins/alpha/README.md": "readme\n",
        "plugins/alpha/LICENSE": "MIT\n",
        "plugins/beta/commands/x.md": "x\n",
        "fixtures/1-plan-output/plan.md": "p\n",
    }
    for path, text in files.items():
        write(repo, path, text)
    commit(repo, "marketplace")
    return repo


def _change(repo: Path, files: dict[str, str]) -> selection.Selection:
    base = git(repo, "rev-parse", "HEAD").strip()
    for path, text in files.items():
        write(repo, path, text)
    commit(repo)
    return compute(repo, base)


def test_another_plugins_entry_or_a_version_bump_runs_nothing(market: Path) -> None:
    doc = json.loads(_market())
    doc["plugins"][1]["version"] = "0.2.0"
    doc["plugins"][1]["commands"] = ["./x.md"]  # beta's loading keys: not alpha's business
    doc["plugins"][0]["version"] = "1.0.1"
    doc["plugins"][0]["description"] = "now described"
    doc["owner"] = {"name": "someone else"}
    chosen = _change(market, {".claude-plugin/marketplace.json": json.dumps(doc)})
    assert chosen.from_stage is None
    assert chosen.reason == selection.NO_RELEVANT_CHANGE
    assert by_path(chosen) == {
        ".claude-plugin/marketplace.json": (None, None, selection.LISTING_ONLY)
    }
    assert "marketplace" in chosen.detail


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("commands", ["./commands/plan.md"]),
        ("strict", False),
        ("source", "./plugins/alpha2"),
        ("hooks", {"Stop": []}),
        ("skills", ["./skills/write"]),
    ],
)
def test_the_plugins_own_loading_keys_run_everything_without_a_folder_change(
    market: Path, key: str, value: object
) -> None:
    chosen = _change(market, {".claude-plugin/marketplace.json": _market(**{key: value})})
    assert (chosen.from_stage, chosen.reason) == (1, selection.GLOBAL_FILE)
    assert f"entry.{key}" in chosen.detail


def test_plugin_root_outside_plugins_counts(market: Path) -> None:
    doc = json.loads(_market())
    doc["metadata"] = {"pluginRoot": "./plugins", "version": "2"}
    chosen = _change(market, {".claude-plugin/marketplace.json": json.dumps(doc)})
    assert chosen.from_stage == 1
    assert "metadata" in chosen.detail


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not valid JSON at HEAD"),
        ("[1, 2]", "not a JSON object at HEAD"),
        ('{"plugins": {}}', '"plugins" is not a list'),
        (json.dumps({"plugins": [{"name": "beta"}]}), "entry (removed)"),
        (json.dumps({"plugins": [{"name": "alpha"}, {"name": "alpha"}]}), "2 entries"),
        (b"\xff\xfe".decode("latin-1"), "not valid JSON"),
    ],
)
def test_an_unreadable_or_ambiguous_marketplace_runs_everything_with_the_reason(
    market: Path, text: str, why: str
) -> None:
    chosen = _change(market, {".claude-plugin/marketplace.json": text})
    assert (chosen.from_stage, chosen.reason) == (1, selection.GLOBAL_FILE)
    assert why in chosen.detail


def test_an_entry_absent_on_both_sides_is_no_change_and_one_added_is(market: Path) -> None:
    doc = json.loads(_market())
    del doc["plugins"][0]  # alpha leaves the marketplace: a change
    chosen = _change(market, {".claude-plugin/marketplace.json": json.dumps(doc)})
    assert chosen.from_stage == 1
    assert "entry (removed)" in chosen.detail
    doc["plugins"][0]["version"] = "0.3.0"  # beta's version, alpha absent on both sides
    chosen = _change(market, {".claude-plugin/marketplace.json": json.dumps(doc)})
    assert chosen.from_stage is None
    doc["metadata"] = {"pluginRoot": "./plugins"}  # outside plugins: still counts
    chosen = _change(market, {".claude-plugin/marketplace.json": json.dumps(doc)})
    assert chosen.from_stage == 1
    chosen = _change(market, {".claude-plugin/marketplace.json": _market()})  # back again
    assert chosen.from_stage == 1
    assert "entry (added)" in chosen.detail


def test_a_removed_marketplace_runs_everything(market: Path) -> None:
    base = git(market, "rev-parse", "HEAD").strip()
    (market / ".claude-plugin/marketplace.json").unlink()
    commit(market)
    chosen = compute(market, base)
    assert chosen.from_stage == 1
    assert "added or removed" in chosen.detail


def test_manifest_metadata_only_runs_nothing_and_a_loading_key_its_stage(market: Path) -> None:
    manifest = "plugins/alpha/.claude-plugin/plugin.json"
    chosen = _change(market, {manifest: _manifest(version="1.1.0", keywords=["x"])})
    assert chosen.from_stage is None
    assert by_path(chosen)[manifest] == (None, None, selection.LISTING_ONLY)
    chosen = _change(market, {manifest: _manifest(version="1.2.0", commands=["./c.md"])})
    assert (chosen.from_stage, chosen.reason) == (1, selection.MATCHED)
    assert by_path(chosen)[manifest] == (1, "/.claude-plugin/plugin.json", selection.MATCHED)
    assert "commands" in chosen.detail
    chosen = _change(market, {manifest: _manifest(name="alpha2")})  # names every command
    assert chosen.from_stage == 1


def test_without_ignore_metadata_a_version_bump_counts(market: Path) -> None:
    text = MAP.replace(
        "ignore_metadata: [version, description, author, keywords, category, tags, owner]\n", ""
    )
    write(market, "stage_map.yaml", text)
    commit(market, "map")
    chosen = _change(market, {".claude-plugin/marketplace.json": _market(version="9")})
    assert chosen.from_stage == 1
    # Another plugin's entry still runs nothing: only alpha's entry is compared.
    doc = json.loads(_market(version="9"))
    doc["plugins"][1]["version"] = "9"
    chosen = _change(market, {".claude-plugin/marketplace.json": json.dumps(doc)})
    assert chosen.from_stage is None


def test_stage_none_selects_nothing_and_a_staged_entry_still_wins(market: Path) -> None:
    chosen = _change(
        market, {"plugins/alpha/README.md": "new\n", "plugins/alpha/LICENSE": "Apache\n"}
    )
    assert (chosen.from_stage, chosen.reason) == (None, selection.NO_RELEVANT_CHANGE)
    assert "none that a stage reads" in chosen.detail
    assert by_path(chosen)["plugins/alpha/README.md"] == (None, "README.md", selection.STAGE_NONE)
    # README.md at any depth is none, but skills/write/ is the build stage's: it wins.
    chosen = _change(market, {"plugins/alpha/skills/write/README.md": "x\n"})
    assert chosen.from_stage == 2


def test_except_leaves_a_folder_to_another_entry(market: Path) -> None:
    chosen = _change(market, {"plugins/alpha/skills/legacy/SKILL.md": "changed\n"})
    assert chosen.from_stage is None
    assert by_path(chosen)["plugins/alpha/skills/legacy/SKILL.md"] == (
        None,
        "/skills/legacy/**",
        selection.STAGE_NONE,
    )
    chosen = _change(
        market,
        {"plugins/alpha/skills/legacy/SKILL.md": "again\n", "plugins/alpha/skills/write/a.md": "a"},
    )
    assert (chosen.from_stage, chosen.decided_by.path) == (2, "plugins/alpha/skills/write/a.md")  # type: ignore[union-attr]


def test_except_without_another_entry_leaves_the_file_uncovered(repo: Path) -> None:
    write(repo, "stage_map.yaml", MAP.replace("  - { glob: /skills/legacy/**, stage: none }\n", ""))
    write(repo, "plugins/alpha/skills/legacy/SKILL.md", "old\n")
    write(repo, "plugins/alpha/skills/write/SKILL.md", "w\n")
    for path in (
        "commands/plan.md",
        "commands/build.md",
        "README.md",
        "LICENSE",
        ".claude-plugin/plugin.json",
    ):
        write(repo, f"plugins/alpha/{path}", "x\n")
    write(repo, ".claude-plugin/marketplace.json", _market())
    base = commit(repo)
    report = check_coverage(load_stage_map(repo / "stage_map.yaml"))
    assert report.uncovered == ("plugins/alpha/skills/legacy/SKILL.md",)
    write(repo, "plugins/alpha/skills/legacy/SKILL.md", "new\n")
    commit(repo)
    chosen = compute(repo, base)
    assert (chosen.from_stage, chosen.reason) == (1, selection.UNMATCHED_FILE)


def test_coverage_counts_none_entries_and_the_marketplace_and_finds_dead_excepts(
    market: Path,
) -> None:
    report = check_coverage(load_stage_map(market / "stage_map.yaml"))
    assert report.ok, report
    write(
        market,
        "stage_map.yaml",
        MAP.replace("except: [/skills/legacy/**]", "except: [/skills/typo/**]"),
    )
    commit(market)
    report = check_coverage(load_stage_map(market / "stage_map.yaml", cache=False))
    assert [(e.glob, n) for e, n in report.dead_excepts] == [("/skills/**", 0)]


def test_explain_says_which_files_no_stage_reads(
    market: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = git(market, "rev-parse", "HEAD").strip()
    write(market, "plugins/alpha/README.md", "new\n")
    write(market, ".claude-plugin/marketplace.json", _market(version="2"))
    commit(market)
    monkeypatch.chdir(market)
    assert main(["compute-stage", base, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "answer:   none" in out
    assert "no stage  plugins/alpha/README.md  [stage-none] entry 'README.md'" in out
    assert "no stage  .claude-plugin/marketplace.json  [listing-only]" in out
    assert "outside the plugin root ignored" not in out


def test_the_map_refuses_loading_keys_and_the_reserved_stage_name(repo: Path) -> None:
    write(repo, "plugin/a.md", "a\n")
    bad = {
        "ignore_metadata: [version, source]": "'source' is not a metadata key",
        "ignore_metadata: [commands]": "'commands' is not a metadata key",
        "marketplace: { file: /.claude-plugin/*.json, plugin: a }": "is not one file's path",
    }
    head = "version: 1\nroot: plugin\nstages: [one]\nentries:\n  - { glob: a.md, stage: 1 }\n"
    for extra, message in bad.items():
        write(repo, "stage_map.yaml", head + extra + "\n")
        with pytest.raises(UserError, match=message.replace("*", r"\*")):
            load_stage_map(repo / "stage_map.yaml", cache=False)
    write(repo, "stage_map.yaml", head.replace("[one]", "[one, none]"))
    with pytest.raises(UserError, match="'none' is reserved"):
        load_stage_map(repo / "stage_map.yaml", cache=False)


def test_the_new_keys_survive_the_map_cache(market: Path) -> None:
    fresh = load_stage_map(market / "stage_map.yaml", cache=False)
    load_stage_map(market / "stage_map.yaml")  # writes the cache
    cached = load_stage_map(market / "stage_map.yaml")
    assert cached == fresh
    assert cached.marketplace is not None and cached.marketplace.plugin == "alpha"
    assert [e.excepts for e in cached.entries if e.excepts] == [("/skills/legacy/**",)]
    assert [e.glob for e in cached.entries if e.stage is None] == [
        "/skills/legacy/**",
        "README.md",
        "/LICENSE",
    ]


def _renamed(renames: object, **alpha: object) -> str:
    doc = json.loads(_market(**alpha))
    doc["renames"] = renames
    return json.dumps(doc, indent=2) + "\n"


def test_only_the_renames_naming_the_plugin_count(market: Path) -> None:
    # As anthropics/claude-plugins-official extends its `renames` map for one plugin
    # or another: before, every such commit ran all of every plugin's stages.
    path = ".claude-plugin/marketplace.json"
    chosen = _change(market, {path: _renamed({"beta-old": "beta", "gone": None})})
    assert chosen.from_stage is None, chosen.detail  # the map added, naming others
    chosen = _change(market, {path: _renamed({"beta-old": "beta", "gone": None, "b0": "beta-old"})})
    assert chosen.from_stage is None, chosen.detail
    chosen = _change(market, {path: _renamed({"beta-old": "beta", "alpha-old": "alpha"})})
    assert (chosen.from_stage, chosen.reason) == (1, selection.GLOBAL_FILE)
    assert "renames.alpha-old (added)" in chosen.detail
    # A chain through a name that now leads to alpha: `a0 -> alpha-old -> alpha`.
    chosen = _change(
        market, {path: _renamed({"beta-old": "beta", "alpha-old": "alpha", "a0": "alpha-old"})}
    )
    assert chosen.from_stage == 1
    assert "renames.a0" in chosen.detail
    # alpha's own key (renamed on): names it. Another plugin's entry removed: not.
    chosen = _change(market, {path: _renamed({"alpha-old": "alpha", "a0": "alpha-old"})})
    assert chosen.from_stage is None, chosen.detail
    chosen = _change(
        market, {path: _renamed({"alpha-old": "alpha", "a0": "alpha-old", "alpha": "alpha2"})}
    )
    assert chosen.from_stage == 1
    # A map the loader cannot read as a whole: any change to it counts.
    chosen = _change(market, {path: _renamed(["alpha-old"])})
    assert chosen.from_stage == 1
    chosen = _change(market, {path: _renamed({"x": ["y"], "y": "beta"})})
    assert chosen.from_stage == 1  # from a list to an object


def test_a_cycle_in_renames_ends(market: Path) -> None:
    path = ".claude-plugin/marketplace.json"
    chosen = _change(market, {path: _renamed({"p": "q", "q": "p"})})
    assert chosen.from_stage is None
    chosen = _change(market, {path: _renamed({"p": "q", "q": "p", "r": "alpha"})})
    assert chosen.from_stage == 1


def test_display_name_is_metadata_and_a_value_the_cli_refuses_counts(market: Path) -> None:
    # The CLI's plugin schema: displayName is "shown in UI ... not used for
    # namespacing or lookup". A drafted map lists it (suite.draft: METADATA_KEYS).
    write(
        market,
        "stage_map.yaml",
        MAP.replace("tags, owner]", "tags, owner, displayName]"),
    )
    commit(market, "map")
    path = ".claude-plugin/marketplace.json"
    manifest = "plugins/alpha/.claude-plugin/plugin.json"
    chosen = _change(
        market, {path: _market(displayName="Alpha"), manifest: _manifest(displayName="A")}
    )
    assert chosen.from_stage is None, chosen.detail
    # `"version": 1`: the CLI refuses the whole manifest (tests/agents/test_plugin_load.py).
    chosen = _change(market, {manifest: _manifest(version=1, displayName="A")})
    assert chosen.from_stage == 1
    assert "version" in chosen.detail
    chosen = _change(market, {path: _market(displayName=["A"], version=2)})
    assert chosen.from_stage == 1
    assert "entry.version" in chosen.detail


def test_an_ignored_key_counts_when_its_value_is_of_another_shape(market: Path) -> None:
    manifest = "plugins/alpha/.claude-plugin/plugin.json"
    chosen = _change(market, {manifest: _manifest(keywords=["a"], author={"name": "x"})})
    assert chosen.from_stage is None, chosen.detail
    chosen = _change(market, {manifest: _manifest(keywords=["a"], author="x")})  # the loader
    assert chosen.from_stage is None, chosen.detail  # ignores an author string
    for value in ({"text": "x"}, ["x"], 3, None):
        chosen = _change(market, {manifest: _manifest(description=value)})
        assert chosen.from_stage == 1, value
        chosen = _change(market, {manifest: _manifest()})
    chosen = _change(market, {manifest: _manifest(keywords="a")})
    assert chosen.from_stage == 1
