"""Every path a suite, a stub script or a grader names lies in the repository,
outside .git, and a folder laid into workspaces is not the repository's top.

The labsmith example in its own git repository, with a token in `.git/config`
(as `actions/checkout` leaves it), an untracked credentials file at the top
(as `google-github-actions/auth` writes one) and a secret on the host beside
it. Each way in is refused in one line naming the file, line and field (exit
2, nothing written, no secret shown), or leaves the secret out; what stays
inside keeps working.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ci_evals.errors import EXIT_USAGE
from ci_evals.main import main
from ci_evals.suite.load import load_suite
from ci_evals.workspace.create import create_workspace
from tests.conftest import ExampleLayout
from tests.suite.test_leaving_links import HOST_SECRET, STUB, TOKEN, repo

__all__ = ["repo"]  # the fixture, shared with test_leaving_links

CREDS = "gha-creds-7f3a.json"
CREDS_TEXT = '{"type": "external_account", "secret": "creds 99"}\n'


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _suite_with(layout: ExampleLayout, old: str, new: str) -> None:
    text = layout.suite.read_text()
    assert old in text
    layout.suite.write_text(text.replace(old, new, 1))


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run `argv`: refused (exit 2) in one line holding every needle, no secret shown."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, (out, err)
    lines = [
        line for line in err.splitlines() if line.strip() and "nothing was started" not in line
    ]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    for secret in (TOKEN, HOST_SECRET, "creds 99"):
        assert secret not in out + err
    return lines[0]


def _leaks(folder: Path) -> list[str]:
    """The files under `folder` holding the token or a secret."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(s.encode() in data for s in (TOKEN, HOST_SECRET, "creds 99")):
                found.append(str(path))
    return found


# -- fixture and scaffold folders ---------------------------------------------------


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_scaffold_at_the_top_is_refused(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    # No link at all: `scaffold: .` names the repository's top, its .git and the
    # credentials a CI step left there.
    (repo.root / CREDS).write_text(CREDS_TEXT)
    _suite_with(repo, "stage_map: stage_map.yaml\n", "stage_map: stage_map.yaml\nscaffold: .\n")
    argv = [command, "--model", STUB] + (["--isolation", "none"] if command == "run" else [])
    line = _one_line(capsys, argv, "ci-evals.yaml:", "scaffold folder", "repository's top")
    assert "ci-evals.yaml:9:11: scaffold:" in line
    assert not (repo.root / ".ci-evals").exists()


def test_a_seed_linked_to_the_top_is_refused(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo.root / CREDS).write_text(CREDS_TEXT)
    (repo.fixtures / "0-seed").symlink_to("..")
    _git(repo.root, "add", "-A")
    _one_line(
        capsys,
        ["run", "--model", STUB, "--isolation", "none"],
        "fixture folder fixtures/0-seed",
        "repository's top",
    )
    assert not (repo.root / ".ci-evals").exists()


def test_check_fixtures_refuses_a_seed_linked_to_the_top(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A command grader that would print the token from the copy of the top.
    (repo.fixtures / "0-seed").symlink_to("..")
    _suite_with(
        repo,
        "    limits: { max_turns: 20 }\n",
        "    limits: { max_turns: 20 }\n    graders: [{id: leak, command: [cat, .git/config]}]\n",
    )
    out = tmp_path / "out"
    argv = ["check-fixtures", "--no-reviewer", "--stage", "research-company", "--out", str(out)]
    _one_line(capsys, argv, "fixtures/0-seed", "repository's top")
    assert not out.exists() or _leaks(out) == []


def test_a_fixture_folder_lays_neither_git_nor_what_git_ignores(
    repo: ExampleLayout, tmp_path: Path
) -> None:
    scaffold = repo.root / "scaffold"
    (scaffold / "lib").mkdir(parents=True)
    (scaffold / "app.py").write_text("print('app')\n")
    (scaffold / "draft.md").write_text("not yet added: the developer's own work\n")
    # What the repository ignores: credentials, an earlier run's folder, .env.
    (repo.root / ".gitignore").write_text("gha-creds-*.json\n.ci-evals/\n.env\n")
    (scaffold / CREDS).write_text(CREDS_TEXT)
    (scaffold / ".env").write_text("API_KEY=creds 99\n")
    (scaffold / ".ci-evals" / "runs" / "old").mkdir(parents=True)
    (scaffold / ".ci-evals" / "runs" / "old" / "log.txt").write_text("creds 99\n")
    # A nested repository (a vendored checkout, a submodule): its .git, any case.
    _git(scaffold / "lib", "init", "-q")
    _git(scaffold / "lib", "config", "http.extraheader", f"AUTHORIZATION: basic {TOKEN}")
    (scaffold / "lib" / "lib.py").write_text("x = 1\n")
    (scaffold / "lib" / ".GIT").mkdir()  # .git on a case-insensitive file system
    (scaffold / "lib" / ".GIT" / "config").write_text(f"token = {TOKEN}\n")
    _git(repo.root, "add", "scaffold/app.py", ".gitignore")
    _suite_with(
        repo, "stage_map: stage_map.yaml\n", "stage_map: stage_map.yaml\nscaffold: scaffold\n"
    )
    ws = create_workspace(load_suite(repo.suite), 1, tmp_path / "ws")
    laid = sorted(
        p.relative_to(ws.root).as_posix() for p in ws.root.rglob("*") if not p.is_symlink()
    )
    assert "app.py" in laid and "draft.md" in laid and "lib/lib.py" in laid
    assert not any(part.lower() == ".git" for p in laid for part in p.split("/")), laid
    for gone in (CREDS, ".env", ".ci-evals"):
        assert gone not in laid, laid
    assert _leaks(tmp_path / "ws") == []


def test_check_fixtures_lays_no_git_of_a_fixture(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A fixture holding a repository of its own, whose config a grader prints:
    # the folder it grades holds no .git at any depth.
    nested = repo.fixtures / "1-research-company-output" / "lab"
    nested.mkdir(parents=True, exist_ok=True)
    _git(nested, "init", "-q")
    _git(nested, "config", "http.extraheader", f"AUTHORIZATION: basic {TOKEN}")
    _suite_with(
        repo,
        "    limits: { max_turns: 20 }\n",
        "    limits: { max_turns: 20 }\n"
        "    graders: [{id: leak, command: [cat, lab/.git/config]}]\n",
    )
    out = tmp_path / "out"
    argv = ["check-fixtures", "--no-reviewer", "--stage", "research-company", "--out", str(out)]
    assert main(argv) == 1  # the grader finds no .git/config to print
    capsys.readouterr()
    assert _leaks(out) == []
    assert not _leaks(tmp_path / "out")


def test_a_shared_fixture_folder_inside_the_repository_still_works(
    repo: ExampleLayout, tmp_path: Path
) -> None:
    shared = repo.root / "shared" / "seed"
    shared.mkdir(parents=True)
    (shared / "notes.md").write_text("shared seed\n")
    (repo.fixtures / "0-seed").symlink_to(os.path.relpath(shared, repo.fixtures))
    ws = create_workspace(load_suite(repo.suite), 1, tmp_path / "ws")
    assert (ws.root / "notes.md").read_text() == "shared seed\n"


def test_command_graders_copy_the_plugin_within_the_repository(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A plugin link to a file shared elsewhere in the repository (allowed): the
    # graders' copy of the plugin follows it as the workspace's copy does.
    shared = repo.root / "shared"
    shared.mkdir()
    (shared / "style.md").write_text("house style\n")
    link = repo.plugin / "style.md"
    link.symlink_to(os.path.relpath(shared / "style.md", link.parent))
    _suite_with(
        repo,
        "    limits: { max_turns: 20 }\n",
        "    limits: { max_turns: 20 }\n"
        "    graders: [{id: ok, command: [test, -f, research/company.md]}]\n",
    )
    out = tmp_path / "out"
    argv = ["check-fixtures", "--no-reviewer", "--stage", "research-company", "--out", str(out)]
    code = main(argv)
    printed = capsys.readouterr()
    assert code == 0, printed
    report = json.loads((out / "check-fixtures.json").read_text())
    graders = {g["grader"]: g for g in report[0]["graders"]}
    assert graders["command:ok"]["error"] is None, graders["command:ok"]
    assert graders["command:ok"]["criteria"][0]["passed"]


# -- paths a grader names ----------------------------------------------------------

STAGE_1 = "    limits: { max_turns: 20 }\n"


def _outside(layout: ExampleLayout) -> Path:
    """A folder on the host beside the repository: a schema, a script, a secret."""
    outside = layout.root.parent / "outside"
    outside.mkdir()
    (outside / "host.json").write_text(f'{{"description": "{HOST_SECRET}"}}\n')
    (outside / "run.sh").write_text("#!/bin/sh\ncat secret.txt\n")
    (outside / "run.sh").chmod(0o755)
    (outside / "secret.txt").write_text(HOST_SECRET + "\n")
    return outside


def _schema_check(schema: str) -> str:
    return f"    checks: [{{id: s, json_schema: lab/plan.json, schema: '{schema}'}}]\n"


def _grader(script: str, files: str = "") -> str:
    extra = f", files: [{files}]" if files else ""
    return f"    graders: [{{id: leak, script: '{script}'{extra}}}]\n"


PRODUCES = '      - { files: "research/company.md", count: 1,'


def _produces_schema(schema: str) -> tuple[str, str]:
    return PRODUCES, f"{PRODUCES} schema: '{schema}',"


# (what of the suite becomes what, given the outside folder; what the line says)
GRADER_PATHS: dict[str, tuple[Callable[[Path], str | tuple[str, str]], str]] = {
    "schema ..": (lambda o: _schema_check("../outside/host.json"), "lies outside"),
    "schema absolute": (lambda o: _schema_check(str(o / "host.json")), "is an absolute path"),
    "schema linked": (lambda o: _schema_check("host.json"), "is a link to"),
    "schema in .git": (lambda o: _schema_check("g/config"), "git's own files"),
    "plugin: schema ..": (
        lambda o: _schema_check("plugin:../../../../outside/host.json"),
        "lies outside",
    ),
    "produces schema": (lambda o: _produces_schema(str(o / "host.json")), "is an absolute path"),
    "script ..": (lambda o: _grader("../outside/run.sh"), "lies outside"),
    "script absolute": (lambda o: _grader(str(o / "run.sh")), "is an absolute path"),
    "script linked": (lambda o: _grader("grader.sh"), "is a link to"),
    "files ..": (lambda o: _grader("grader.sh", "../outside/secret.txt"), "is a link to"),
    "script in a linked folder": (lambda o: _grader("tools/run.sh"), "reached through a link"),
}


@pytest.mark.parametrize("kind", sorted(GRADER_PATHS))
def test_a_path_a_grader_names_outside_the_repository_is_refused(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    outside = _outside(repo)
    (repo.root / "host.json").symlink_to("../outside/host.json")
    (repo.root / "g").symlink_to(".git")
    (repo.root / "grader.sh").symlink_to("../outside/run.sh")
    (repo.root / "tools").symlink_to("../outside")
    change, why = GRADER_PATHS[kind]
    made = change(outside)
    old, new = made if isinstance(made, tuple) else (STAGE_1, STAGE_1 + made)
    _suite_with(repo, old, new)
    line = _one_line(capsys, ["check", "--model", STUB], "ci-evals.yaml:", why)
    assert not (repo.root / ".ci-evals").exists(), line


def test_a_script_shared_in_the_repository_still_loads(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = repo.root / "shared" / "tools"
    tools.mkdir(parents=True)
    (tools / "run.sh").write_text("#!/bin/sh\ntest -f lib.sh\n")
    (tools / "run.sh").chmod(0o755)
    (tools / "lib.sh").write_text("true\n")
    (repo.root / "tools").symlink_to("shared/tools")
    (repo.root / "schema.json").symlink_to("shared/plan.schema.json")
    (repo.root / "shared" / "plan.schema.json").write_text('{"type": "object"}\n')
    _suite_with(
        repo,
        STAGE_1,
        STAGE_1 + _grader("tools/run.sh", "shared/tools/lib.sh") + _schema_check("schema.json"),
    )
    assert main(["check", "--model", STUB]) == 0, capsys.readouterr()


# -- in GitHub Actions, only what git tracks -------------------------------------------


@pytest.mark.parametrize("actions", [True, False], ids=["actions", "local"])
def test_in_actions_only_tracked_files_reach_the_workspace(
    repo: ExampleLayout, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, actions: bool
) -> None:
    scaffold = repo.root / "scaffold"
    scaffold.mkdir()
    (scaffold / "app.py").write_text("print('app')\n")
    _suite_with(
        repo, "stage_map: stage_map.yaml\n", "stage_map: stage_map.yaml\nscaffold: scaffold\n"
    )
    _git(repo.root, "add", "-A")
    _git(repo.root, "commit", "-q", "-m", "the pull request")
    # Beside the pull request's files, none ignored (the repository's .gitignore does
    # not know them): what a CI step wrote, and a developer's work not yet added.
    (repo.plugin / CREDS).write_text(CREDS_TEXT)  # google-github-actions/auth's
    new_skill = repo.plugin / "skills" / "new-skill"
    new_skill.mkdir()
    (new_skill / "SKILL.md").write_text("---\nname: new-skill\n---\nNot yet added.\n")
    (scaffold / ".env").write_text("API_KEY=creds 99\n")
    fixture = repo.fixtures / "1-research-company-output"
    (fixture / "draft.md").write_text("written, not yet added\n")
    if actions:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")

    ws = create_workspace(load_suite(repo.suite), 2, tmp_path / "ws")

    copied = {p.relative_to(ws.plugin).as_posix() for p in ws.plugin.rglob("*")}
    laid = {p.relative_to(ws.root).as_posix() for p in ws.root.rglob("*")}
    assert "skills/lab-design" in copied and "app.py" in laid  # tracked: always
    untracked = {CREDS, "skills/new-skill/SKILL.md"} <= copied, {".env", "draft.md"} <= laid
    if actions:
        assert not (CREDS in copied or "skills/new-skill" in copied), copied
        assert not ({".env", "draft.md"} & laid), laid
        assert _leaks(tmp_path / "ws") == []
    else:  # locally a skill or fixture not yet added still runs
        assert untracked == (True, True)
