"""Loading stage_map.yaml: every mistake is one line `file:line:col: field: message`, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.selection.stage_map import CHECKOUT_INDEX, StageMap, load_stage_map
from tests.conftest import git

HEAD = "version: 1\nroot: plugin\nstages: [research, plan, write]\nentries:\n"
STAGE_HINT = "(use 1..3 or a name: 1=research, 2=plan, 3=write (or none: no stage reads its files))"


@pytest.fixture(autouse=True)
def _from_the_repository(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the top of the repository, as the hook does: messages name the map
    from the current folder (`text.display_path`), so there it is `stage_map.yaml`."""
    monkeypatch.chdir(repo)


def _entry(glob: str, stage: str = "1") -> str:
    return HEAD + f"  - {{ glob: {glob}, stage: {stage} }}\n"


def _check(repo: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    (repo / "plugin").mkdir(exist_ok=True)
    (repo / "stage_map.yaml").write_text(text, encoding="utf-8")
    code = main(["check-coverage", "--map", str(repo / "stage_map.yaml")])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


ERRORS = {
    "yaml syntax": (
        "version: 1\nroot: [plugin\n",
        "stage_map.yaml:2:14: YAML syntax error: did not find expected ',' or ']' at the end "
        "of the file (while parsing a flow sequence at 2:7)",
    ),
    "unknown top key": (
        _entry('"a.md"') + "foo: 1\n",
        "stage_map.yaml:6:1: foo: unknown key 'foo' "
        "(known keys: entries, evals, fixtures, global, ignore_metadata, marketplace, root, "
        "stages, version)",
    ),
    "unknown entry key": (
        HEAD + '  - { glob: "a.md", stage: 1, note: x }\n',
        "stage_map.yaml:5:31: entries[0].note: unknown key 'note' "
        "(known keys: cases, except, glob, scenarios, stage, tags)",
    ),
    "missing top key": (
        "version: 1\nroot: plugin\nstages: [a]\n",
        "stage_map.yaml:1:1: missing required key 'entries'",
    ),
    "missing root": (
        "version: 1\nstages: [a]\nentries: []\n",
        "stage_map.yaml:1:1: missing required key 'root'",
    ),
    "missing stage": (
        HEAD + '  - { glob: "a.md" }\n',
        "stage_map.yaml:5:5: entries[0]: missing required key 'stage'",
    ),
    "entry not a mapping": (
        HEAD + '  - "a.md"\n',
        "stage_map.yaml:5:5: entries[0]: expected a mapping with 'glob' and 'stage', got a string",
    ),
    "unknown stage name": (
        _entry('"a.md"', "review"),
        f"stage_map.yaml:5:28: entries[0].stage: unknown stage 'review' {STAGE_HINT}",
    ),
    "stage 0": (
        _entry('"a.md"', "0"),
        f"stage_map.yaml:5:28: entries[0].stage: stage 0 is out of range {STAGE_HINT}",
    ),
    "stage too high": (
        _entry('"a.md"', "4"),
        f"stage_map.yaml:5:28: entries[0].stage: stage 4 is out of range {STAGE_HINT}",
    ),
    "stage as string too high": (
        _entry('"a.md"', '"9"'),
        f"stage_map.yaml:5:28: entries[0].stage: stage 9 is out of range {STAGE_HINT}",
    ),
    "stage boolean": (
        _entry('"a.md"', "true"),
        f"stage_map.yaml:5:28: entries[0].stage: expected a stage number or name {STAGE_HINT}",
    ),
    "stage list": (
        _entry('"a.md"', "[1]"),
        f"stage_map.yaml:5:28: entries[0].stage: expected a stage number or name {STAGE_HINT}",
    ),
    "blank glob": (
        _entry('""'),
        "stage_map.yaml:5:13: entries[0].glob: blank glob "
        "(gitignore compiles it to a pattern that matches nothing; remove the entry)",
    ),
    "whitespace glob": (
        _entry('"   "'),
        "stage_map.yaml:5:13: entries[0].glob: blank glob "
        "(gitignore compiles it to a pattern that matches nothing; remove the entry)",
    ),
    "comment glob": (
        _entry('"#notes.md"'),
        "stage_map.yaml:5:13: entries[0].glob: glob starts with '#', which gitignore reads as "
        "a comment (it matches nothing) (write '\\#' for a name that starts with '#')",
    ),
    "trailing backslash": (
        _entry('"agents\\\\"'),
        "stage_map.yaml:5:13: entries[0].glob: glob ends with a backslash, which escapes "
        "nothing (remove it, or write '\\\\' for a literal backslash)",
    ),
    "integer glob": (
        _entry("12"),
        "stage_map.yaml:5:13: entries[0].glob: expected a string, got an integer",
    ),
    "null glob": (
        _entry("null"),
        "stage_map.yaml:5:13: entries[0].glob: expected a string, got null",
    ),
    "list glob": (
        _entry("[a.md]"),
        "stage_map.yaml:5:13: entries[0].glob: expected a string, got a list",
    ),
    "negated glob": (
        _entry('"!a.md"'),
        "stage_map.yaml:5:13: entries[0].glob: negated glob ('!') is not allowed in a stage "
        "map (to leave files out of an entry, list them under its except:; write '\\!' for a "
        "name that starts with '!')",
    ),
    "trailing **/": (
        _entry('"skills/**/"'),
        "stage_map.yaml:5:13: entries[0].glob: '**/' at the end of a glob: git and pathspec "
        "disagree on it (git reads 'dir/**/' as sub-folders only, pathspec as everything "
        "under dir; write 'dir/**' (everything under dir) or 'dir/*/**' (only inside "
        "sub-folders))",
    ),
    "double star inside a name": (
        _entry('"skills/a**/x.md"'),
        "stage_map.yaml:5:13: entries[0].glob: '**' inside a name (like 'a**' or '**.md'): git "
        "and pathspec disagree on it ('**' means any folders only as a whole segment "
        "('a/**/b'); inside a name write '*')",
    ),
    "bad range": (
        _entry('"[z-a].md"'),
        "stage_map.yaml:5:13: entries[0].glob: invalid glob: bad character range z-a "
        "(check the '[...]' ranges)",
    ),
    "unclosed bracket": (
        _entry('"a[.md"'),
        "stage_map.yaml:5:13: entries[0].glob: glob has an unclosed '[', so git ignores the "
        "whole pattern (write '\\[' for a literal bracket)",
    ),
    "posix class": (
        _entry('"[[:alpha:]].md"'),
        "stage_map.yaml:5:13: entries[0].glob: POSIX character classes ('[[:alpha:]]') are "
        "not supported (pathspec and git read them differently; use a range such as '[a-z]')",
    ),
    "trailing space": (
        _entry('"a.md "'),
        "stage_map.yaml:5:13: entries[0].glob: glob ends with whitespace, which gitignore "
        "silently drops (remove it, or write '\\ ' for a name that ends with a space)",
    ),
    "empty segment": (
        _entry('"a//b.md"'),
        "stage_map.yaml:5:13: entries[0].glob: glob has an empty path segment ('//', or just "
        "'/'), so it matches nothing (globs name files relative to root, e.g. 'agents/x.md' "
        "or 'skills/**')",
    ),
    "lone slash": (
        _entry('"/"'),
        "stage_map.yaml:5:13: entries[0].glob: glob has an empty path segment ('//', or just "
        "'/'), so it matches nothing (globs name files relative to root, e.g. 'agents/x.md' "
        "or 'skills/**')",
    ),
    "dot-dot glob": (
        _entry('"../b.md"'),
        "stage_map.yaml:5:13: entries[0].glob: glob contains a '.' or '..' segment, which "
        "never matches a path (globs are relative to root and cannot leave it)",
    ),
    "root does not exist": (
        _entry('"a.md"').replace("root: plugin", "root: nowhere"),
        "stage_map.yaml:2:7: root: 'nowhere' does not exist "
        "(root is the plugin folder, relative to the stage map)",
    ),
    "root outside the repo": (
        _entry('"a.md"').replace("root: plugin", "root: ../elsewhere"),
        "stage_map.yaml:2:7: root: '../elsewhere' is outside the repository "
        "(paths are relative to the stage map's folder and must stay in the repository)",
    ),
    "root escapes through a folder": (
        _entry('"a.md"').replace("root: plugin", "root: plugin/../.."),
        "stage_map.yaml:2:7: root: 'plugin/../..' is outside the repository "
        "(paths are relative to the stage map's folder and must stay in the repository)",
    ),
    "absolute root": (
        _entry('"a.md"').replace("root: plugin", "root: /etc"),
        "stage_map.yaml:2:7: root: absolute path '/etc' "
        "(paths are relative to the stage map's folder)",
    ),
    "root is a file": (
        _entry('"a.md"').replace("root: plugin", "root: stage_map.yaml"),
        "stage_map.yaml:2:7: root: 'stage_map.yaml' is not a folder "
        "(root is the plugin folder, relative to the stage map)",
    ),
    "version 2": (
        _entry('"a.md"').replace("version: 1", "version: 2"),
        "stage_map.yaml:1:10: version: unsupported version 2 (this ci-evals reads version 1)",
    ),
    "version as string": (
        _entry('"a.md"').replace("version: 1", 'version: "1"'),
        "stage_map.yaml:1:10: version: expected an integer, got a string",
    ),
    "duplicate stage names": (
        _entry('"a.md"').replace("[research, plan, write]", "[research, plan, research]"),
        "stage_map.yaml:3:26: stages[2]: duplicate stage name 'research' "
        "(also stage 1 in this list)",
    ),
    "numeric stage name": (
        _entry('"a.md"').replace("[research, plan, write]", "[research, '2']"),
        "stage_map.yaml:3:20: stages[1]: stage name '2' is a number "
        "(entries may give a stage by number or by name, so names cannot be numbers)",
    ),
    "no stages": (
        _entry('"a.md"').replace("[research, plan, write]", "[]"),
        "stage_map.yaml:3:9: stages: must not be empty",
    ),
    "global outside the repo": (
        _entry('"a.md"') + "global: [../x.yml]\n",
        "stage_map.yaml:6:10: global[0]: '../x.yml' is outside the repository "
        "(paths are relative to the stage map's folder and must stay in the repository)",
    ),
    "global names a folder, not files": (
        _entry('"a.md"') + "global: [ci-evals.yaml, ./]\n",
        "stage_map.yaml:6:25: global[1]: './' names a folder, not files "
        "(write 'FOLDER/**' for everything in it)",
    ),
    "negated global": (
        _entry('"a.md"') + 'global: ["!x.yml"]\n',
        "stage_map.yaml:6:10: global[0]: negated glob ('!') is not allowed in a stage map "
        "(to leave files out of an entry, list them under its except:; "
        "write '\\!' for a name that starts with '!')",
    ),
    "global with an empty segment": (
        _entry('"a.md"') + 'global: ["stub//x"]\n',
        "stage_map.yaml:6:10: global[0]: glob has an empty path segment ('//', or just '/'), "
        "so it matches nothing (globs name files relative to root, e.g. 'agents/x.md' "
        "or 'skills/**')",
    ),
    "global inside .git": (
        _entry('"a.md"') + "global: [.git/config]\n",
        "stage_map.yaml:6:10: global[0]: '.git/config' is inside .git "
        "(git never lists changes there)",
    ),
    "absolute fixtures": (
        _entry('"a.md"') + "fixtures: /tmp/fixtures\n",
        "stage_map.yaml:6:11: fixtures: absolute path '/tmp/fixtures' "
        "(paths are relative to the stage map's folder)",
    ),
    "empty file": ("", "stage_map.yaml:1: file is empty"),
    "two documents": (
        "version: 1\n---\nversion: 1\n",
        "stage_map.yaml:3: expected one YAML document, found several",
    ),
    "not a mapping": (
        "- a\n",
        "stage_map.yaml:1:1: expected a mapping of stage-map settings, got a list",
    ),
}


@pytest.mark.parametrize(("text", "expected"), list(ERRORS.values()), ids=list(ERRORS))
def test_every_mistake_is_one_line_with_position_and_exit_2(
    repo: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    code, out, err = _check(repo, text, capsys)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"ci-evals: error: {expected}"]
    assert "Traceback" not in err


def test_map_file_not_found(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-coverage", "--map", str(repo / "missing.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        "ci-evals: error: missing.yaml: file not found "  # named from the current folder
        "(create stage_map.yaml here or above, up to your repository's top, or pass --map PATH)"
    ]


def test_map_outside_a_git_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "stage_map.yaml").write_text(_entry('"a.md"'), encoding="utf-8")
    code = main(["check-coverage", "--map", str(tmp_path / "stage_map.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    # The folder lies outside the current work tree (the repository inside it): absolute.
    assert err.startswith(f"ci-evals: error: {tmp_path}: not inside a git repository")


def test_duplicate_entries_warn_with_file_and_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = HEAD + '  - { glob: "a.md", stage: 1 }\n  - { glob: "a.md", stage: plan }\n'
    (repo / "plugin").mkdir()
    (repo / "plugin" / "a.md").write_text("x\n")
    git(repo, "add", "plugin/a.md")
    code, out, err = _check(repo, text, capsys)
    assert code == 0
    assert err.splitlines() == [
        "stage_map.yaml:6: warning: entries[1].glob: 'a.md' repeats entries[0] "
        "(line 5, stage 1 there); the lowest stage wins, remove one"
    ]
    assert out.startswith("ci-evals: stage map OK")


def test_loaded_record(repo: Path) -> None:
    (repo / "plugin").mkdir()
    (repo / "stage_map.yaml").write_text(
        HEAD
        + '  - { glob: "agents/a.md", stage: 1 }\n'
        + '  - { glob: "skills/plan/**", stage: plan }\n'
        + '  - { glob: "*.md", stage: "3" }\n'
        + "global: [ci-evals.yaml, .github/workflows/evals.yml]\n"
        + "fixtures: fixtures\n",
        encoding="utf-8",
    )
    stage_map = load_stage_map(repo / "stage_map.yaml")
    assert stage_map.root == "plugin"
    assert stage_map.repo_root == repo.resolve()
    assert stage_map.display == "stage_map.yaml"
    assert stage_map.stages == ("research", "plan", "write")
    assert [(e.glob, e.stage, e.line, e.index) for e in stage_map.entries] == [
        ("agents/a.md", 1, 5, 0),
        ("skills/plan/**", 2, 6, 1),
        ("*.md", 3, 7, 2),
    ]
    # Globs relative to the repository top; a name without a slash at any depth.
    assert _written(stage_map) == (
        "/stage_map.yaml",
        "ci-evals.yaml",
        ".github/workflows/evals.yml",
    )
    # The only ones that reach root (a `.gitattributes` at any depth below it, too).
    assert stage_map.root_globals == ("ci-evals.yaml", ".gitattributes")
    assert [(g.glob, g.line, g.index) for g in stage_map.global_globs][:3] == [
        ("stage_map.yaml", 0, -1),
        ("ci-evals.yaml", 8, 0),
        (".github/workflows/evals.yml", 8, 1),
    ]
    assert stage_map.fixtures == "fixtures"
    assert stage_map.stage_of("plan") == 2
    assert stage_map.stage_of("3") == 3
    assert stage_map.stage_of(1) == 1
    with pytest.raises(UserError, match="unknown stage 'review'"):
        stage_map.stage_of("review")
    assert stage_map.relative_to_root("plugin/agents/a.md") == "agents/a.md"
    assert stage_map.relative_to_root("plugin") is None
    assert stage_map.relative_to_root("plugins/x.md") is None
    assert stage_map.relative_to_root("README.md") is None


def _written(stage_map: StageMap) -> tuple[str, ...]:
    """The globals the map wrote (or defaulted): without the files git applies at
    checkout, which every map gets (tests/selection/test_selection_checkout.py)."""
    return tuple(g.path for g in stage_map.global_globs if g.index != CHECKOUT_INDEX)


def test_paths_are_relative_to_the_map_folder(repo: Path) -> None:
    """A map kept in a sub-folder: root, global and fixtures resolve from there."""
    folder = repo / "evals"
    (folder / "plugin").mkdir(parents=True)
    (folder / "stage_map.yaml").write_text(
        _entry('"a.md"') + "global: [suite.yaml]\nfixtures: fixtures\n", encoding="utf-8"
    )
    stage_map = load_stage_map(folder / "stage_map.yaml")
    assert stage_map.display == stage_map.path == "evals/stage_map.yaml"
    assert stage_map.root == "evals/plugin"
    assert _written(stage_map) == ("/evals/stage_map.yaml", "/evals/**/suite.yaml")
    assert stage_map.root_globals == ("suite.yaml", ".gitattributes")
    assert stage_map.fixtures == "evals/fixtures"
    assert stage_map.relative_to_root("evals/plugin/a.md") == "a.md"


def test_globals_leave_a_sub_folder_map_with_dot_dot(repo: Path) -> None:
    """`../` moves the globals' folder up; what follows it is anchored there."""
    folder = repo / "evals"
    (folder / "plugin").mkdir(parents=True)
    (folder / "stage_map.yaml").write_text(
        _entry('"a.md"') + 'global: ["../.github/workflows/*.yml", "./stub/**", "/x.md"]\n',
        encoding="utf-8",
    )
    stage_map = load_stage_map(folder / "stage_map.yaml")
    assert _written(stage_map) == (
        "/evals/stage_map.yaml",
        "/.github/workflows/*.yml",
        "/evals/stub/**",
        "/evals/x.md",
    )
    # None of them reaches evals/plugin; the `.gitattributes` below it do.
    assert stage_map.root_globals == (".gitattributes",)


def test_default_global_paths_and_repo_top_root(repo: Path) -> None:
    (repo / "stage_map.yaml").write_text(
        _entry('"a.md"').replace("root: plugin", "root: ."), encoding="utf-8"
    )
    stage_map = load_stage_map(repo / "stage_map.yaml")
    assert stage_map.root == ""
    assert stage_map.relative_to_root("a/b.md") == "a/b.md"
    # The default: the suite config beside the map, the workflow at the top.
    assert _written(stage_map) == (
        "/stage_map.yaml",
        "/ci-evals.yaml",
        "/.github/workflows/evals.yml",
    )
    assert stage_map.root_globals == stage_map.global_paths  # root is the top
    assert stage_map.fixtures is None


def test_messages_name_the_map_from_the_current_folder(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As git names paths: from a sub-folder the map is `../stage_map.yaml`; what the
    record keeps for globals (and GitHub's annotations) stays repo-relative."""
    (repo / "plugin" / "agents").mkdir(parents=True)
    text = _entry('"a.md"') + '  - { glob: "a.md", stage: 1 }\n'
    (repo / "stage_map.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(repo / "plugin")
    for _ in range(2):  # loaded, then from the cache: the same words
        stage_map = load_stage_map(repo / "stage_map.yaml")
        err = capsys.readouterr().err
        assert err.startswith("../stage_map.yaml:6: warning: entries[1].glob: 'a.md' repeats")
    assert (stage_map.display, stage_map.path) == ("../stage_map.yaml", "stage_map.yaml")
    assert stage_map.global_paths[0] == "/stage_map.yaml"  # a glob anchored at the top

    (repo / "stage_map.yaml").write_text(text.replace("stage: 1 }\n", "stage: 9 }\n"))
    with pytest.raises(UserError) as info:
        load_stage_map(repo / "stage_map.yaml")
    assert str(info.value).startswith("../stage_map.yaml:5:28: entries[0].stage: stage 9")


def test_a_global_the_matcher_cannot_take_from_a_sub_folder_is_one_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`**/` in a sub-folder's map becomes `evals/**/**/` at the top, which git and
    pathspec read differently: a file:line error (it crashed with a traceback)."""
    folder = repo / "evals"
    (folder / "plugin").mkdir(parents=True)
    (folder / "plugin" / "a.md").write_text("x\n")
    (folder / "stage_map.yaml").write_text(_entry('"a.md"') + 'global: ["**/"]\n')
    git(repo, "add", ".")
    code = main(["check-coverage", "--map", str(folder / "stage_map.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        "ci-evals: error: evals/stage_map.yaml:6:10: global[0]: '**/' cannot be matched "
        "from the map's folder (as '/evals/**/**/': '**/' at the end of a glob: git and "
        "pathspec disagree on it) (name the files it should match, e.g. `dir/**`)"
    ]
