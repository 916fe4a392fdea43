"""A plugin at the repository's top (`source: "./"`, as obra/superpowers is): its
folder also holds `.git`, a developer's `.venv`, the suite, the fixtures (the
known-good answers), the stub script and earlier run folders. The plugin copy
an agent gets holds none of them, the `.venv` (its links leave the repository)
refuses nothing, and a second run is not refused for the first one's run folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.fs.digest import tree_sha256
from ci_evals.suite.load import load_suite
from ci_evals.workspace.create import create_workspace
from tests.conftest import git
from tests.onboarding_helpers import cli, follow_printed_lines, write

ANSWER = "KNOWN-GOOD ANSWER 4217"  # what the fixture holds: never the agent's to read
STUB = "stub:stub/toptool.yaml"


def top_plugin(tmp_path: Path) -> Path:
    """A repository whose top is the plugin: a manifest, a command, a skill, its
    marketplace naming `./`, and a developer's `.venv` git ignores (its python
    links to the system's: outside the repository)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo / ".claude-plugin" / "plugin.json", '{"name": "toptool"}\n')
    write(
        repo / ".claude-plugin" / "marketplace.json",
        '{"name": "top-dev", "owner": {"name": "x"},\n'
        ' "plugins": [{"name": "toptool", "source": "./"}]}\n',
    )
    write(
        repo / "commands" / "do.md",
        "---\ndescription: Do it\nargument-hint: [topic]\n---\n"
        "Write notes about $ARGUMENTS to outputs/do.md.\n",
    )
    write(repo / "skills" / "kind" / "SKILL.md", "---\nname: kind\ndescription: k\n---\nBe kind.\n")
    write(repo / ".gitignore", ".venv/\n")
    venv = repo / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)  # leaves the repository
    write(repo / ".venv" / "pyvenv.cfg", "home = /usr/bin\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the plugin, at the top")
    return repo


def drafted(tmp_path: Path) -> tuple[Path, str]:
    """`top_plugin` with `init` run at its top and the answer in its fixture."""
    repo = top_plugin(tmp_path)
    proc = cli(repo, "init")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (repo / "fixtures" / "1-do-output" / "outputs" / "do.md").write_text(ANSWER + "\n")
    return repo, proc.stdout


def copied(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()
    )


def test_the_copy_holds_what_a_commit_would_and_nothing_of_ours(tmp_path: Path) -> None:
    repo, _ = drafted(tmp_path)
    # An earlier run's folder (`--out ci-evals-out`), its saved workspace links
    # dangling now that the workspace is gone.
    out = repo / "ci-evals-out"
    write(out / "results.json", json.dumps(dict.fromkeys(("version", "run_id", "tool_version", "scenarios"), 1)))  # fmt: skip  # noqa: E501
    (out / "example" / "1-do" / "after").mkdir(parents=True)
    (out / "example" / "1-do" / "after" / "commands").symlink_to("../plugin/commands")
    # A virtual environment git does not ignore (superpowers' .gitignore has no .venv).
    (repo / "venv2" / "bin").mkdir(parents=True)
    (repo / "venv2" / "bin" / "python").symlink_to(sys.executable)
    write(repo / "venv2" / "pyvenv.cfg", "home = /usr/bin\n")
    (repo / "stage_map.yaml").unlink()  # drafted again: no entry for a venv's files
    again = cli(repo, "init")
    assert again.returncode == 0, again.stderr
    assert "venv2" not in (repo / "stage_map.yaml").read_text()
    # A skill being written (untracked, not ignored: the next commit holds it;
    # written after the draft, which would give it a stage of its own).
    write(repo / "skills" / "new" / "SKILL.md", "---\nname: new\ndescription: n\n---\nNew.\n")
    suite = load_suite(repo / "ci-evals.yaml")  # not refused: the venvs, dangling links
    ws = create_workspace(suite, 1, tmp_path / "ws", run_dir=repo / ".ci-evals" / "runs" / "x")
    assert copied(ws.plugin) == [
        ".claude-plugin/marketplace.json",
        ".claude-plugin/plugin.json",
        ".github/workflows/evals.yml",  # drafted by init at the top, as the hooks' file
        ".gitignore",
        ".pre-commit-config.yaml",
        "commands/do.md",
        "skills/kind/SKILL.md",
        "skills/new/SKILL.md",
    ]
    for root in (ws.plugin, ws.root):
        for path in root.rglob("*"):
            if path.is_file():
                assert ANSWER not in path.read_text(errors="replace"), path
    # The digest a run records is of the same files: a run folder added changes nothing.
    before = tree_sha256(suite.plugin.path, suite.plugin.files)
    write(repo / "later-out" / "results.json", (out / "results.json").read_text())
    write(repo / "later-out" / "x.md", "a saved state\n")
    assert tree_sha256(suite.plugin.path, load_suite(repo / "ci-evals.yaml").plugin.files) == before


def test_a_suite_in_its_own_folder_inside_the_plugin_is_left_whole(tmp_path: Path) -> None:
    """`init --plugin toptool` drafts into evals/toptool/: the whole folder is ci-evals'."""
    repo = top_plugin(tmp_path)
    proc = cli(repo, "init", ".", "--plugin", "toptool")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    here = repo / "evals" / "toptool"
    (here / "fixtures" / "1-do-output" / "outputs" / "do.md").write_text(ANSWER + "\n")
    (here / "notes.md").write_text(ANSWER + "\n")  # anything beside the suite is ours
    ws = create_workspace(load_suite(here / "ci-evals.yaml"), 1, tmp_path / "ws")
    assert not [p for p in copied(ws.plugin) if p.startswith(("evals", "stub", "fixtures"))]
    assert "commands/do.md" in copied(ws.plugin)


def test_a_plugin_outside_git_is_copied_whole_less_ours(tmp_path: Path) -> None:
    """No work tree, nothing says what is published: every file, less ci-evals' own."""
    repo, _ = drafted(tmp_path)
    plain = tmp_path / "plain"
    subprocess.run(["cp", "-r", str(repo), str(plain)], check=True)
    subprocess.run(["rm", "-rf", str(plain / ".git"), str(plain / ".venv")], check=True)
    write(plain / "scripts" / "helper.sh", "echo hi\n")
    suite = plain / "ci-evals.yaml"  # a stage map needs a repository
    suite.write_text(suite.read_text().replace("stage_map: stage_map.yaml", "stage_map: null"))
    ws = create_workspace(load_suite(suite), 1, tmp_path / "ws")
    names = copied(ws.plugin)
    assert "scripts/helper.sh" in names and "commands/do.md" in names
    assert not [n for n in names if n.split("/")[0] in ("fixtures", "stub", "ci-evals.yaml")]
    assert "stage_map.yaml" not in names  # beside the suite: ours, whether it names it or not


KIND_RULE = """\
  - name: kind  # the skill's own stage, drafted beside the command's
    match: {prompt_contains: "`toptool:kind`", subagent: false}
    turns:
      - tools:
          - skill: {name: "toptool:kind"}
      - tools:
          - write: {path: "outputs/kind.md", content: "kind\\n"}
      - text: "Kind (stub)."
"""  # the skill's own stage, in both stubs below

STUB_PEEK = """\
rules:
  - name: do
    match: {command: "toptool:do"}
    turns:
      - tools:
          - bash: "mkdir -p outputs; ls -aR ../plugin > outputs/seen.txt; cat ../plugin/ci-evals.yaml ../plugin/fixtures/*/*/* >> outputs/seen.txt 2>&1; echo done > outputs/do.md"
      - text: "Done (stub)."
"""  # noqa: E501
STUB_PEEK += KIND_RULE


@pytest.mark.slow
def test_a_plugin_at_the_top_runs_twice_and_its_agent_cannot_read_the_answers(
    tmp_path: Path,
) -> None:
    """The printed lines, then a run into `ci-evals-out/` (not ignored) and a second
    run: the second is not refused for the first's folder, and the agent's own
    `ls` and `cat` through its plugin copy find no suite, fixture, stub or run."""
    repo, printed = drafted(tmp_path)
    follow_printed_lines(repo, printed)
    (repo / "stub" / "toptool.yaml").write_text(STUB_PEEK)
    for out in ("ci-evals-out", "ci-evals-out-2"):
        ran = cli(repo, "run", "--model", STUB, "--out", out)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        results = json.loads((repo / out / "results.json").read_text())
        stage = results["scenarios"][0]["stages"][0]  # the command's; the skill's passes too
        assert stage["status"] == "passed", stage
        seen = (repo / out / stage["produced_dir"] / "outputs" / "seen.txt").read_text()
        assert "commands" in seen and "SKILL.md" in seen  # the plugin is there
        assert ANSWER not in seen
        assert "No such file" in seen  # the suite and the fixtures are not
        for name in ("ci-evals.yaml", "stage_map.yaml", "fixtures", "stub", ".venv", ".git"):
            assert f"\n{name}\n" not in seen, (name, seen)
        assert "ci-evals-out" not in seen and ".ci-evals" not in seen
    assert os.path.isdir(repo / "ci-evals-out-2")


STUB_DOCS = (
    """\
rules:
  - name: do
    match: {command: "toptool:do"}
    turns:
      - tools:
          - write: {path: "docs/plans/plan.md", content: "the plan\\n"}
      - text: "Planned (stub)."
"""
    + KIND_RULE
)


@pytest.mark.slow
def test_writes_through_a_workspace_link_are_named_in_the_reason_and_the_page(
    tmp_path: Path,
) -> None:
    """superpowers' skills write plans to docs/, a plugin folder: in the workspace
    `docs` is a link into the plugin copy, so the plan is in no saved state and the
    check finds nothing. The stage's reason and its HTML page say where it went."""
    repo, _ = drafted(tmp_path)
    write(repo / "docs" / "README.md", "The plugin's own docs.\n")
    (repo / "stub" / "toptool.yaml").write_text(STUB_DOCS)
    git(repo, "add", "-A")
    ran = cli(repo, "run", "--model", STUB, "--out", "out")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    stage = json.loads((repo / "out" / "results.json").read_text())["scenarios"][0]["stages"][0]
    assert stage["status"] == "failed"
    assert [(c["path"], c["change"]) for c in stage["plugin_changes"]] == [
        ("docs/plans/plan.md", "added")
    ]
    said = (
        "1 file(s) written into the plugin copy through the workspace's docs/, a link into "
        "the plugin, where no grader looks: docs/plans/plan.md (added) (plugin-changes.json)"
    )
    report = cli(repo, "report", "out")
    assert said in report.stdout, report.stdout
    site = tmp_path / "site"
    assert cli(repo, "report", "out", "--html", str(site)).returncode == 1
    pages = [
        p.read_text()
        for p in site.rglob("*.html")
        if "Written into the plugin copy" in p.read_text()
    ]
    (page,) = pages
    assert "<td>docs/plans/plan.md</td>" in page  # the table of what landed there
    assert said.replace("'", "&#x27;") in page  # and the reason, escaped
