"""A plugin Claude Code loads, ci-evals loads: without `.claude-plugin/plugin.json`
(named after its folder) and from a marketplace (named by its entry), through
`init`, `check-coverage`, `check`, `compute-stage` and a run on the real CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.suite.load import Suite, load_suite
from ci_evals.workspace.create import create_workspace
from tests.conftest import git
from tests.onboarding_helpers import cli, copy_feature_dev, write

STAGES = "explore,architect,implement"


def marketplace_repo(tmp_path: Path, folder: str = "fdev") -> Path:
    """The layout of anthropics/claude-code: `.claude-plugin/marketplace.json` at the
    top listing `plugins/<folder>`, whose plugin has no manifest of its own; the
    entry's name differs from the folder's, so only the entry can name it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    plugin = copy_feature_dev(repo / "plugins", folder)
    shutil.rmtree(plugin / ".claude-plugin")
    market = {
        "name": "test-marketplace",
        "owner": {"name": "ci-evals"},
        "plugins": [
            {"name": "feature-dev", "source": f"./plugins/{folder}", "category": "development"},
            {"name": "remote", "source": {"source": "github", "repo": "o/r"}},
            {"name": "Spaced Name", "source": f"./plugins/{folder}"},
        ],
    }
    write(repo / ".claude-plugin" / "marketplace.json", json.dumps(market, indent=2) + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a marketplace")
    return repo


def marketplace_suite(repo: Path, stage: str, prompt: str) -> Suite:
    """A one-stage suite naming the marketplace's `feature-dev`, loaded."""
    write(
        repo / "ci-evals.yaml",
        "version: 1\nplugin: { marketplace: ., name: feature-dev }\nstage_map: null\n"
        f'stages:\n  - {{ name: {stage}, prompt: "{prompt}" }}\n',
    )
    return load_suite(repo / "ci-evals.yaml")


def test_init_in_a_marketplace_lists_its_plugins(tmp_path: Path) -> None:
    repo = marketplace_repo(tmp_path)
    proc = cli(repo, "init")
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert ". is a marketplace of 3 plugins (listed above)" in line, line
    assert proc.stdout.splitlines() == [  # one per line, each with where it comes from
        "  feature-dev  (./plugins/fdev)",
        "  remote  (a remote source)",
        "  Spaced Name  (./plugins/fdev)",
    ]
    assert "(choose one: ci-evals init . --plugin NAME)" in line, line
    for name, message in [
        ("nope", "the marketplace lists no plugin 'nope' (its plugins: feature-dev, remote"),
        ("remote", "plugin 'remote' comes from a github source, not a folder of this repository"),
        ("Spaced Name", "its marketplace name is not a plugin name"),
    ]:
        proc = cli(repo, "init", ".", "--plugin", name)
        assert proc.returncode == 2
        assert len(proc.stderr.splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert not (repo / "ci-evals.yaml").exists() and not (repo / "evals").exists()


@pytest.mark.slow
def test_a_marketplace_plugin_without_a_manifest_runs_end_to_end(tmp_path: Path) -> None:
    repo = marketplace_repo(tmp_path)
    proc = cli(repo, "init", ".", "--plugin", "feature-dev", "--stages", STAGES)
    assert proc.returncode == 0, proc.stderr
    here = repo / "evals" / "feature-dev"  # one folder per plugin of the marketplace
    suite = (here / "ci-evals.yaml").read_text()
    assert 'plugin: { marketplace: "../..", name: "feature-dev" }' in suite
    assert "/feature-dev:feature-dev" in suite  # the entry's name, not the folder's
    stage_map = (here / "stage_map.yaml").read_text()
    # It names the plugin: its entry is compared (`marketplace:`), not the whole file.
    assert (
        'marketplace: { file: "../../.claude-plugin/marketplace.json", plugin: "feature-dev" }'
        in stage_map
    )
    assert 'root: "../../plugins/fdev"' in stage_map
    git(repo, "add", "-A")
    coverage = cli(here, "check-coverage")
    assert coverage.returncode == 0, coverage.stdout + coverage.stderr
    stub = "stub:stub/feature-dev.yaml"
    checked = cli(here, "check", "--model", stub)
    assert checked.returncode == 0, checked.stderr
    git(repo, "commit", "-q", "-m", "evals")

    out = tmp_path / "run"
    ran = cli(here, "run", "--model", stub, "--from-stage", "3", "--out", str(out))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = json.loads((out / "results.json").read_text())
    [stage] = results["scenarios"][0]["stages"]
    assert stage["status"] == "passed", stage
    trajectory = (out / stage["trajectory"]).read_text()
    assert "stub: no rule matched" not in trajectory  # the CLI expanded /feature-dev:…
    # The repository's plugin folder is as its authors left it: no manifest written there.
    assert not (repo / "plugins" / "fdev" / ".claude-plugin").exists()

    # A listing-only change to its entry (its category) runs nothing; a change to
    # what loads it (its components) runs everything.
    market = repo / ".claude-plugin" / "marketplace.json"
    market.write_text(market.read_text().replace('"development"', '"productivity"'))
    git(repo, "commit", "-q", "-am", "recategorise")
    answer = cli(here, "compute-stage", "HEAD~1")
    assert answer.stdout.strip() == "none", answer.stdout + answer.stderr
    market.write_text(
        market.read_text().replace('"productivity"', '"productivity", "strict": false')
    )
    git(repo, "commit", "-q", "-am", "not strict")
    answer = cli(here, "compute-stage", "HEAD~1")
    assert answer.stdout.strip() == "1", answer.stdout + answer.stderr


@pytest.mark.slow
def test_a_plugin_without_a_manifest_runs_under_its_folder_name(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    plugin = copy_feature_dev(repo, "feature-dev")
    shutil.rmtree(plugin / ".claude-plugin")
    git(repo, "add", "-A")
    proc = cli(repo, "init", "feature-dev", "--stages", STAGES)
    assert proc.returncode == 0, proc.stderr
    git(repo, "add", "-A")
    assert cli(repo, "check-coverage").returncode == 0
    stub = "stub:stub/feature-dev.yaml"
    out = tmp_path / "run"
    ran = cli(repo, "run", "--model", stub, "--from-stage", "3", "--out", str(out))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [stage] = json.loads((out / "results.json").read_text())["scenarios"][0]["stages"]
    assert stage["status"] == "passed", stage


def test_the_workspace_copy_carries_the_name(tmp_path: Path) -> None:
    """The copy is `plugin/`: without a manifest Claude Code would call it "plugin"."""
    repo = marketplace_repo(tmp_path)
    suite = marketplace_suite(repo, "build", "/feature-dev:feature-dev x")
    assert suite.plugin.path == repo / "plugins" / "fdev"
    workspace = create_workspace(suite, 1, tmp_path / "ws")
    manifest = json.loads((workspace.plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest == {"name": "feature-dev"}
    assert not workspace.plugin_changes()  # the written manifest is no agent's edit


def test_a_marketplace_entry_is_the_manifest_of_a_plugin_without_one(tmp_path: Path) -> None:
    """Components the entry declares (`commands`) load, as Claude Code reads them."""
    repo = marketplace_repo(tmp_path)
    write(repo / "plugins" / "fdev" / "extra" / "ship.md", "Ship $ARGUMENTS\n")
    market = repo / ".claude-plugin" / "marketplace.json"
    data = json.loads(market.read_text())
    data["plugins"][0]["commands"] = ["./extra/ship.md"]
    market.write_text(json.dumps(data))
    suite = marketplace_suite(repo, "ship", "/feature-dev:ship x")
    assert "ship" in suite.plugin.commands
    assert suite.plugin.manifest_to_write == {
        "name": "feature-dev",
        "commands": ["./extra/ship.md"],
    }


def test_a_stage_map_that_misses_the_marketplace_is_refused(tmp_path: Path) -> None:
    repo = marketplace_repo(tmp_path)
    write(
        repo / "ci-evals.yaml",
        """\
        version: 1
        plugin: { marketplace: ., name: feature-dev }
        stages:
          - { name: build, prompt: "/feature-dev:feature-dev x" }
        """,
    )
    write(
        repo / "stage_map.yaml",
        """\
        version: 1
        root: plugins/fdev
        stages: [build]
        entries:
          - { glob: "**", stage: 1 }
        global: [/ci-evals.yaml]
        """,
    )
    with pytest.raises(UserError) as info:
        load_suite(repo / "ci-evals.yaml", "ci-evals.yaml")
    message = str(info.value)
    assert "the marketplace .claude-plugin/marketplace.json is in no stage" in message
    assert "add '/.claude-plugin/marketplace.json' to the map's global:" in message


def test_a_suite_naming_a_folder_without_a_marketplace(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    write(
        tmp_path / "ci-evals.yaml",
        """\
        version: 1
        plugin: { marketplace: m, name: x }
        stages:
          - { name: build, prompt: "go" }
        """,
    )
    with pytest.raises(UserError) as info:
        load_suite(tmp_path / "ci-evals.yaml", "ci-evals.yaml")
    message = str(info.value)
    assert message.startswith(
        "ci-evals.yaml:2:24: plugin.marketplace: no .claude-plugin/marketplace.json in "
    )
    assert "m (name the folder holding the marketplace's .claude-plugin/)" in message
