"""A pull request's links may not lead out of the repository, nor into its `.git`.

The labsmith example in its own git repository, with `.git/config` holding a
token (as `actions/checkout` leaves it) and a secret file on the host beside
it. Each kind of link a pull request could commit — relative to `.git/config`,
absolute to the host file, a chain through a link of the repository, a linked
folder — is refused by `check`, `run`, `check-coverage` and `init`: exit 2,
one line naming the link and where it leads, the secret never printed. A link
that stays in the repository keeps working, and the copy refuses on its own
a link swapped after the suite was checked.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ci_evals.errors import EXIT_USAGE, UserError
from ci_evals.main import main
from ci_evals.suite.load import load_suite
from ci_evals.workspace.create import create_workspace
from tests.conftest import ExampleLayout

TOKEN = "ghs_SECRETTOKEN0123456789"
HOST_SECRET = "host secret 42"
STUB = "stub:examples/labsmith/stub/labsmith.yaml"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(labsmith: ExampleLayout) -> ExampleLayout:
    """The example with a token in `.git/config` and a secret on the host beside it."""
    _git(labsmith.root, "config", "http.extraheader", f"AUTHORIZATION: basic {TOKEN}")
    (labsmith.root.parent / "host-secret.txt").write_text(HOST_SECRET + "\n")
    return labsmith


def _to_git_config(layout: ExampleLayout) -> tuple[Path, str]:
    link = layout.plugin / "x.md"
    link.symlink_to(os.path.relpath(layout.root / ".git" / "config", link.parent))
    return link, ".git"


def _to_host_file(layout: ExampleLayout) -> tuple[Path, str]:
    link = layout.plugin / "x.md"
    link.symlink_to(layout.root.parent / "host-secret.txt")
    return link, "leads outside"


def _chain(layout: ExampleLayout) -> tuple[Path, str]:
    # A link to a link of the repository's, which leads out: resolved to the end.
    (layout.root / "notes.md").symlink_to("../host-secret.txt")
    link = layout.plugin / "x.md"
    link.symlink_to(os.path.relpath(layout.root / "notes.md", link.parent))
    return link, "leads outside"


def _linked_git_folder(layout: ExampleLayout) -> tuple[Path, str]:
    link = layout.plugin / "git"
    link.symlink_to(os.path.relpath(layout.root / ".git", link.parent))
    return link, ".git"


def _through_linked_folder(layout: ExampleLayout) -> tuple[Path, str]:
    # A folder of the repository's, linked in; inside it, a link out.
    shared = layout.root / "shared"
    shared.mkdir()
    (shared / "x.md").symlink_to("../../host-secret.txt")
    (layout.plugin / "shared").symlink_to(os.path.relpath(shared, layout.plugin))
    return layout.plugin / "shared" / "x.md", "leads outside"


LINKS: dict[str, Callable[[ExampleLayout], tuple[Path, str]]] = {
    "to .git/config": _to_git_config,
    "to a host file": _to_host_file,
    "a chain": _chain,
    "a linked .git": _linked_git_folder,
    "through a linked folder": _through_linked_folder,
}
COMMANDS = {
    "check": ["check", "--model", STUB],
    "run": ["run", "--model", STUB, "--isolation", "none"],
    "check-coverage": ["check-coverage"],
}


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], link: Path, why: str) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, (out, err)
    # `check` lists its problems, then counts them: one problem, on one line.
    lines = [
        line for line in err.splitlines() if line.strip() and "nothing was started" not in line
    ]
    assert len(lines) == 1, err
    shown = os.path.relpath(link) if link.is_absolute() else str(link)
    assert shown in lines[0] or str(link) in lines[0], lines[0]
    assert why in lines[0], lines[0]
    assert TOKEN not in out + err and HOST_SECRET not in out + err


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(LINKS))
def test_a_link_leaving_the_repository_is_refused(
    repo: ExampleLayout, capsys: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    link, why = LINKS[kind](repo)
    _git(repo.root, "add", "-A")  # check-coverage reads the index, as a commit does
    _refused(capsys, COMMANDS[command], link, why)
    assert not (repo.root / ".ci-evals").exists()  # nothing started, nothing written


@pytest.mark.parametrize("kind", sorted(LINKS))
def test_init_refuses_a_plugin_with_such_a_link(
    repo: ExampleLayout,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    link, why = LINKS[kind](repo)
    drafts = repo.root / "evals"
    drafts.mkdir()
    monkeypatch.chdir(drafts)
    _refused(capsys, ["init", str(repo.plugin)], link, why)
    assert list(drafts.iterdir()) == []  # nothing drafted


def test_a_link_inside_the_repository_is_followed(repo: ExampleLayout, tmp_path: Path) -> None:
    shared = repo.root / "shared"
    shared.mkdir()
    (shared / "style.md").write_text("house style\n")
    (repo.plugin / "style").symlink_to(os.path.relpath(shared, repo.plugin))
    (repo.plugin / "alias.md").symlink_to("style/style.md")
    _git(repo.root, "add", "-A")
    assert main(["check-coverage"]) != EXIT_USAGE  # not refused (coverage is another matter)
    ws = create_workspace(load_suite(repo.suite), 1, tmp_path / "ws")
    assert (ws.plugin / "alias.md").read_text() == "house style\n"
    assert not (ws.plugin / "style").is_symlink()
    assert not (ws.plugin / ".git").exists()


def test_the_copy_refuses_a_link_swapped_after_the_check(
    repo: ExampleLayout, tmp_path: Path
) -> None:
    (repo.root / "ok.md").write_text("fine\n")
    link = repo.plugin / "x.md"
    link.symlink_to(os.path.relpath(repo.root / "ok.md", link.parent))
    suite = load_suite(repo.suite)  # checked: the link stays inside
    link.unlink()
    link.symlink_to(os.path.relpath(repo.root / ".git" / "config", link.parent))
    with pytest.raises(UserError, match=r"x\.md leads into git's own files") as info:
        create_workspace(suite, 1, tmp_path / "ws")
    assert TOKEN not in str(info.value)
    copied = tmp_path / "ws" / "plugin" / "x.md"
    assert not copied.exists() or TOKEN not in copied.read_text()


def test_a_fixture_folder_linked_out_is_refused(repo: ExampleLayout, tmp_path: Path) -> None:
    seed = repo.fixtures / "0-seed"
    seed.symlink_to(os.path.relpath(repo.root / ".git", repo.fixtures))
    with pytest.raises(UserError, match=r"fixture folder .*0-seed is a link to .* git's own"):
        create_workspace(load_suite(repo.suite), 1, tmp_path / "ws")
    assert not (tmp_path / "ws" / "workspace").exists()
