"""The stage map `init` drafts for a marketplace's plugin: its own entry compared
(`marketplace:`), metadata keys ignored, documents nothing names as `stage: none`.
A marketplace of two plugins written here, in the shape of the public ones."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ci_evals.suite.draft_unread import unread_files
from tests.conftest import git
from tests.onboarding_helpers import cli, write


def _marketplace(tmp_path: Path) -> Path:
    repo = tmp_path / "market"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("alpha", "beta"):
        plugin = repo / "plugins" / name
        write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": name}) + "\n")
        write(plugin / "commands" / "plan.md", "---\ndescription: Plan\n---\nWrite a plan.\n")
        write(plugin / "README.md", f"# {name}\n")
        write(plugin / "LICENSE", "MIT\n")
    # alpha's command reads its CHANGELOG: that one is read by a stage.
    write(
        repo / "plugins/alpha/commands/release.md",
        "---\ndescription: Release\n---\nUpdate CHANGELOG.md from the plan.\n",
    )
    write(repo / "plugins/alpha/CHANGELOG.md", "## 1.0\n")
    market = {
        "name": "m",
        "owner": {"name": "o"},
        "plugins": [
            {"name": n, "source": f"./plugins/{n}", "version": "1.0.0"} for n in ("alpha", "beta")
        ],
    }
    write(repo / ".claude-plugin" / "marketplace.json", json.dumps(market, indent=2) + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "marketplace")
    return repo


def test_init_compares_the_entry_ignores_metadata_and_drafts_unread_documents(
    tmp_path: Path,
) -> None:
    repo = _marketplace(tmp_path)
    suite = repo / "evals" / "alpha"
    suite.mkdir(parents=True)
    proc = cli(
        suite, "init", "../..", "--plugin", "alpha", "--into", ".", "--stages", "plan,release"
    )
    assert proc.returncode == 0, proc.stderr
    drafted = yaml.safe_load((suite / "stage_map.yaml").read_text())
    assert drafted["marketplace"] == {
        "file": "../../.claude-plugin/marketplace.json",
        "plugin": "alpha",
    }
    assert all("marketplace" not in glob for glob in drafted["global"])
    assert "version" in drafted["ignore_metadata"] and "source" not in drafted["ignore_metadata"]
    stages = {e["glob"]: e["stage"] for e in drafted["entries"]}
    assert stages["/README.md"] == "none" and stages["/LICENSE"] == "none"
    assert stages["/CHANGELOG.md"] == "release"  # a command names it
    git(repo, "add", "-A")
    coverage = cli(suite, "check-coverage")
    assert coverage.returncode == 0, coverage.stdout + coverage.stderr
    checked = cli(suite, "check", "--model", "stub:stub/alpha.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    git(repo, "commit", "-q", "-m", "evals")

    def answer(change: dict[str, str]) -> str:
        for path, text in change.items():
            write(repo / path, text)
        git(repo, "commit", "-q", "-am", "change")
        proc = cli(suite, "compute-stage", "HEAD~1")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    market = json.loads((repo / ".claude-plugin/marketplace.json").read_text())
    market["plugins"][0]["version"] = "1.0.1"  # a version bump
    market["plugins"][1]["commands"] = ["./commands/plan.md"]  # another plugin's entry
    assert answer({".claude-plugin/marketplace.json": json.dumps(market)}) == "none"
    assert answer({"plugins/alpha/README.md": "# alpha, better\n"}) == "none"
    assert answer({"plugins/beta/commands/plan.md": "beta's\n"}) == "none"
    manifest = {"name": "alpha", "version": "2.0.0", "description": "now described"}
    assert answer({"plugins/alpha/.claude-plugin/plugin.json": json.dumps(manifest)}) == "none"
    assert answer({"plugins/alpha/CHANGELOG.md": "## 2.0\n"}) == "2"
    market["plugins"][0]["strict"] = False  # what loads alpha, with no folder change
    assert answer({".claude-plugin/marketplace.json": json.dumps(market)}) == "1"


def test_a_document_some_file_names_is_read(tmp_path: Path) -> None:
    plugin = tmp_path / "p"
    files = {
        "README.md": "x",
        "docs/LICENSE.txt": "x",
        "NOTICE": "x",
        "agents/a.md": "See the NOTICE file.",
        "skills/s/README.md": "x",
        "guide.md": "x",
    }
    for path, text in files.items():
        write(plugin / path, text)
    assert unread_files(plugin, sorted(files)) == {"README.md", "docs/LICENSE.txt"}


def _skills_plugin(tmp_path: Path, skills: tuple[str, ...], build_uses: str) -> Path:
    """A repository of a plugin: /fold:plan, /fold:build (which uses `build_uses`), skills."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    plugin = repo / "plugin"
    write(plugin / ".claude-plugin" / "plugin.json", '{"name": "fold"}\n')
    write(plugin / "commands" / "plan.md", "---\ndescription: Plan\n---\nWrite plan.md.\n")
    write(
        plugin / "commands" / "build.md",
        f"---\ndescription: Build\n---\nRead plan.md; use {build_uses}; write build.md.\n",
    )
    for name in skills:
        write(plugin / "skills" / name / "SKILL.md", f"---\nname: {name}\ndescription: d\n---\nx\n")
    return repo


def test_a_folder_mostly_at_stage_one_is_one_entry_with_except(tmp_path: Path) -> None:
    # "Everything under skills/ but one" without an entry per skill (issue 33).
    repo = _skills_plugin(tmp_path, ("s1", "s2", "s3", "s4", "s5", "s6", "late"), "the late skill")
    proc = cli(repo, "init", "plugin", "--stages", "plan,build")
    assert proc.returncode == 0, proc.stderr
    text = (repo / "stage_map.yaml").read_text()
    assert (
        '  - { glob: "/skills/**", except: ["skills/late/**"], stage: plan }   # 6 of its 7 '
        "entries at stage 1, as is a file added later; the rest below\n"
    ) in text
    entries = yaml.safe_load(text)["entries"]
    assert [e["glob"] for e in entries if e["glob"].startswith(("skills", "/skills"))] == [
        "/skills/**",
        "skills/late/**",
    ]
    git(repo, "add", "-A")
    coverage = cli(repo, "check-coverage")
    assert coverage.returncode == 0, coverage.stdout + coverage.stderr
    git(repo, "commit", "-q", "-m", "plugin and suite")

    def answer(path: str) -> str:
        write(repo / path, "changed\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "change")
        proc = cli(repo, "compute-stage", "HEAD~1")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert answer("plugin/skills/late/SKILL.md") == "2"
    assert answer("plugin/skills/s4/SKILL.md") == "1"
    assert answer("plugin/skills/new/SKILL.md") == "1"  # added later: stage 1, covered


def test_a_folder_mostly_at_later_stages_keeps_an_entry_each(tmp_path: Path) -> None:
    # A file added there later would be matched at a stage no one chose: not folded.
    names = ("s1", "s2", "s3", "s4", "s5", "s6")
    repo = _skills_plugin(tmp_path, names, ", ".join(names))
    assert cli(repo, "init", "plugin", "--stages", "plan,build").returncode == 0
    entries = yaml.safe_load((repo / "stage_map.yaml").read_text())["entries"]
    skills = [e for e in entries if "skills" in e["glob"]]
    assert len(skills) == 6 and {e["stage"] for e in skills} == {"build"}
    assert all("except" not in e for e in entries)
