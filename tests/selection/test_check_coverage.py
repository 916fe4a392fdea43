"""`ci-evals check-coverage` on real git repositories: the index is what counts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_evals.main import main
from tests.conftest import git

MAP = """\
version: 1
root: plugin
stages: [research, plan, write]
entries:
  - { glob: "agents/*.md", stage: research }
  - { glob: "skills/plan/**", stage: plan }
  - { glob: "README.md", stage: 3 }
global: [plugin/suite.yaml]
fixtures: plugin/fixtures
"""
FAILED = (
    "ci-evals: stage map check failed: {what} (add an entry for each uncovered file, "
    "remove or fix each dead entry in stage_map.yaml)"
)


@pytest.fixture(autouse=True)
def _from_the_repository(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the top of the repository, as the hook does: messages name the map
    from the current folder (`text.display_path`), so there it is `stage_map.yaml`."""
    monkeypatch.chdir(repo)


def _write(repo: Path, relative: str, text: str = "x\n") -> None:
    path = repo / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def plugin_repo(repo: Path) -> Path:
    """A repository whose plugin is fully covered, everything staged and committed."""
    _write(repo, "stage_map.yaml", MAP)
    for relative in [
        "plugin/agents/researcher.md",
        "plugin/skills/plan/SKILL.md",
        "plugin/skills/plan/scripts/run.py",
        "plugin/README.md",
        "plugin/suite.yaml",  # global: needs no entry
        "plugin/fixtures/1-research-output/notes.txt",  # fixture: needs no entry
        "docs/outside.txt",  # outside root: not the map's business
    ]:
        _write(repo, relative)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "plugin")
    return repo


def _run(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(["check-coverage", "--map", str(repo / "stage_map.yaml")])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_ok_prints_one_line(plugin_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(plugin_repo, capsys)
    assert (code, err) == (0, "")
    assert out == [
        "ci-evals: stage map OK: 6 staged files under plugin/, 3 entries: "
        "every file covered, every entry used"
    ]


def test_default_map_is_found_from_the_working_directory(
    plugin_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(plugin_repo / "plugin" / "agents")
    assert main(["check-coverage"]) == 0
    assert capsys.readouterr().out.startswith("ci-evals: stage map OK")


def test_uncovered_staged_files_are_listed(
    plugin_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(plugin_repo, "plugin/agents/new.txt")
    _write(plugin_repo, "plugin/a b/ünï.md")
    git(plugin_repo, "add", ".")
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 1
    assert out == [
        "plugin/a b/ünï.md: not covered by any entry in stage_map.yaml",
        "plugin/agents/new.txt: not covered by any entry in stage_map.yaml",
        FAILED.format(what="2 uncovered files"),
    ]


def test_untracked_files_are_ignored(plugin_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(plugin_repo, "plugin/scratch.txt")  # never `git add`-ed
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 0, out


def test_dead_entry_is_listed_with_its_position(
    plugin_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(plugin_repo, "rm", "-q", "-r", "plugin/skills")  # deletion staged: gone from the index
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 1
    assert out == [
        "stage_map.yaml:6:13: entries[1].glob: 'skills/plan/**' matches no staged file",
        FAILED.format(what="1 dead entry"),
    ]


def test_deleted_but_not_staged_file_still_counts(
    plugin_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commit still contains the file, so its entry is not dead."""
    (plugin_repo / "plugin" / "README.md").unlink()
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 0, out


def test_uncovered_and_dead_together(plugin_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    git(plugin_repo, "mv", "plugin/README.md", "plugin/README.txt")
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 1
    assert out == [
        "plugin/README.txt: not covered by any entry in stage_map.yaml",
        "stage_map.yaml:7:13: entries[2].glob: 'README.md' matches no staged file",
        FAILED.format(what="1 uncovered file, 1 dead entry"),
    ]


def _actions_run(repo: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    output.write_text("")
    summary.write_text("")
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    result = subprocess.run(
        [sys.executable, "-m", "ci_evals", "check-coverage"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return result, output, summary


def test_actions_annotations_are_capped_and_summary_lists_all(
    plugin_repo: Path, tmp_path: Path
) -> None:
    for n in range(12):
        _write(plugin_repo, f"plugin/notes/n{n:02d}.txt")
    _write(plugin_repo, "plugin/notes/evil%0A::warning::x,y:z.txt")
    git(plugin_repo, "add", ".")
    git(plugin_repo, "rm", "-q", "-r", "plugin/skills")
    result, _, summary = _actions_run(plugin_repo, tmp_path)
    assert result.returncode == 1, result.stderr
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert len(annotations) == 11  # 10 errors, then one notice about the rest
    assert annotations[0] == (
        "::error file=plugin/notes/evil%250A%3A%3Awarning%3A%3Ax%2Cy%3Az.txt,"
        "title=File not in the stage map::plugin/notes/evil%250A::warning::x,y:z.txt is "
        "covered by no entry in stage_map.yaml; add one so changes to it select a stage"
    )
    assert annotations[1].startswith("::error file=plugin/notes/n00.txt,title=")
    assert annotations[10] == "::notice::4 more not shown here; see the step summary"
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("### Stage map coverage\n")
    assert text.count("not covered by any entry") == 13
    assert "`stage_map.yaml` line 6: `skills/plan/**` matches no staged file" in text


def test_actions_dead_entry_annotates_the_map_line(plugin_repo: Path, tmp_path: Path) -> None:
    git(plugin_repo, "rm", "-q", "-r", "plugin/skills")
    result, _, _ = _actions_run(plugin_repo, tmp_path)
    assert result.returncode == 1
    assert (
        "::error file=stage_map.yaml,line=6,col=13,title=Dead stage-map entry::"
        "entries[1] 'skills/plan/**' matches no staged file; remove or fix it"
    ) in result.stdout.splitlines()


def test_actions_dead_global_glob_annotates_the_map_line(plugin_repo: Path, tmp_path: Path) -> None:
    _write(plugin_repo, "stage_map.yaml", MAP.replace("[plugin/suite.yaml]", '["stub/*"]'))
    result, _, summary = _actions_run(plugin_repo, tmp_path)
    assert result.returncode == 1
    assert (
        "::error file=stage_map.yaml,line=8,col=10,title=Dead global glob::"
        "global[0] 'stub/*' matches no staged file; remove or fix it"
    ) in result.stdout.splitlines()
    assert "`stage_map.yaml` line 8: `stub/*` matches no staged file" in summary.read_text()


def test_actions_map_error_is_annotated_and_exits_2(plugin_repo: Path, tmp_path: Path) -> None:
    _write(plugin_repo, "stage_map.yaml", MAP.replace("stage: plan", "stage: review"))
    result, _, summary = _actions_run(plugin_repo, tmp_path)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "::error file=stage_map.yaml,line=6,col=38,title=Stage map::stage_map.yaml:6:38: "
        "entries[1].stage: unknown stage 'review' (use 1..3 or a name: 1=research, 2=plan, "
        "3=write (or none: no stage reads its files))"
    ]
    assert result.stderr.startswith("ci-evals: error: stage_map.yaml:6:38: entries[1].stage:")
    assert "The stage map is invalid" in summary.read_text(encoding="utf-8")


def test_a_global_glob_matching_nothing_is_dead_and_one_matching_exempts_files(
    plugin_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`global` globs mean what entries mean: `plugin/stub/**` needs no entry for its
    files; a wildcard global matching no staged file is reported like a dead entry
    (a plain path is not: it may name a file still to come)."""
    _write(
        plugin_repo,
        "stage_map.yaml",
        MAP.replace(
            "global: [plugin/suite.yaml]",
            'global: [plugin/suite.yaml, "plugin/stub/**", "stubs/*.yaml", later.yml]',
        ),
    )
    _write(plugin_repo, "plugin/stub/feature-dev.yaml")
    git(plugin_repo, "add", ".")
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 1
    assert out == [
        "stage_map.yaml:8:47: global[2]: 'stubs/*.yaml' matches no staged file",
        FAILED.format(what="1 dead global glob"),
    ]
    _write(plugin_repo, "stubs/a.yaml")  # outside root: listed for the glob all the same
    git(plugin_repo, "add", ".")
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 0, out


def test_global_and_fixture_files_need_no_entry_but_keep_an_entry_alive(
    plugin_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry matching only a fixture is not dead; the fixture itself needs no entry."""
    _write(
        plugin_repo,
        "stage_map.yaml",
        MAP.replace(
            '  - { glob: "README.md", stage: 3 }\n',
            '  - { glob: "README.md", stage: 3 }\n  - { glob: "fixtures/**", stage: 2 }\n',
        ),
    )
    _write(plugin_repo, "plugin/fixtures/2-plan-output/x.md")
    git(plugin_repo, "add", ".")
    code, out, _ = _run(plugin_repo, capsys)
    assert code == 0, out


def test_from_a_sub_folder_messages_climb_but_annotations_do_not(
    plugin_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person reads `../../stage_map.yaml`; GitHub needs the path from the top."""
    dead = '  - { glob: "README.md", stage: 3 }\n  - { glob: "gone.md", stage: 1 }\n'
    (plugin_repo / "stage_map.yaml").write_text(
        MAP.replace('  - { glob: "README.md", stage: 3 }\n', dead)
    )
    git(plugin_repo, "add", ".")
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "out")}
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    result = subprocess.run(
        [sys.executable, "-m", "ci_evals", "check-coverage"],
        cwd=plugin_repo / "plugin" / "agents", env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "../../stage_map.yaml:" in result.stdout
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert annotations and all("file=stage_map.yaml," in line for line in annotations)
    assert "../" not in (tmp_path / "summary.md").read_text()


def test_a_map_error_in_actions_annotates_the_repo_relative_file(
    plugin_repo: Path, tmp_path: Path
) -> None:
    (plugin_repo / "stage_map.yaml").write_text("version: 1\nroot: [plugin\n")
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "out")}
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    result = subprocess.run(
        [sys.executable, "-m", "ci_evals", "check-coverage"],
        cwd=plugin_repo / "plugin", env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "ci-evals: error: ../stage_map.yaml:2:" in result.stderr
    assert "::error file=stage_map.yaml,line=2," in result.stdout
