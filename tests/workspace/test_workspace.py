"""Workspaces: the plugin copied (never linked), fixtures merged, escaping links refused."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.fs.snapshot import content_hash, diff_snapshots, take_snapshot
from ci_evals.suite.load import Suite, load_suite
from ci_evals.workspace.create import check_fixtures, create_workspace

SUITE = """\
version: 1
plugin: plugin
stage_map: null
stages:
  - { name: research, prompt: "/demo:research {company}" }
  - { name: plan, prompt: "/demo:plan", cwd: "labs/{company}" }
  - { name: build, prompt: "/demo:build in {workspace} using {plugin}/templates" }
scenarios:
  - { id: acme, inputs: { company: acme } }
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path: Path, text: str = "x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def top(tmp_path: Path) -> Path:
    """A suite folder: plugin with components, fixtures for stages 1 and 2."""
    top = tmp_path / "repo"
    write(top / "plugin" / ".claude-plugin" / "plugin.json", '{"name": "demo"}')
    write(top / "plugin" / "agents" / "researcher.md", "agent\n")
    for command in ("research", "plan", "build"):  # the suite's prompts name them
        write(top / "plugin" / "commands" / f"{command}.md", "command\n")
    write(top / "plugin" / "templates" / "lab.md", "template\n")
    write(top / "plugin" / "README.md", "not a folder: not linked\n")
    fixtures = top / "fixtures"
    write(fixtures / "1-research-output" / "research" / "company.md", "v1 company\n")
    write(fixtures / "1-research-output" / "shared.md", "from stage 1\n")
    (fixtures / "1-research-output" / "empty").mkdir()
    write(fixtures / "2-plan-output" / "labs" / "acme" / "plan.md", "plan\n")
    write(fixtures / "2-plan-output" / "shared.md", "from stage 2\n")
    script = write(fixtures / "2-plan-output" / "run.sh", "#!/bin/sh\n")
    script.chmod(0o755)
    (top / "ci-evals.yaml").write_text(SUITE)
    return top


def suite_at(top: Path) -> Suite:
    return load_suite(top / "ci-evals.yaml", "ci-evals.yaml")


def tree(root: Path) -> dict[str, str]:
    """Every entry under root: file content, `-> target` for links, `/` for folders."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "/"
            else:
                out[rel] = path.read_text()
    return out


def test_from_stage_one_has_the_plugin_and_no_fixtures(top: Path, tmp_path: Path) -> None:
    suite = suite_at(top)
    ws = create_workspace(suite, 1, tmp_path / "run" / "acme")
    assert ws.parent == tmp_path / "run" / "acme"
    assert ws.root == ws.parent / "workspace"
    assert ws.plugin == ws.parent / "plugin"
    assert ws.fixtures == ()
    # Every top-level plugin folder is linked, relative, into the copy.
    assert ws.links == ("agents", "commands", "templates")
    assert tree(ws.root) == {
        "agents": "-> ../plugin/agents",
        "commands": "-> ../plugin/commands",
        "templates": "-> ../plugin/templates",
    }
    assert (ws.root / "templates" / "lab.md").read_text() == "template\n"
    # The plugin is a copy, not a link, with the manifest.
    assert not ws.plugin.is_symlink()
    assert tree(ws.plugin) == tree(top / "plugin")


def test_fixtures_are_merged_in_order(top: Path, tmp_path: Path) -> None:
    suite = suite_at(top)
    ws = create_workspace(suite, suite.stage("build"), tmp_path / "ws")
    assert ws.fixtures == (
        top / "fixtures" / "1-research-output",
        top / "fixtures" / "2-plan-output",
    )
    files = tree(ws.root)
    assert files["research/company.md"] == "v1 company\n"
    assert files["labs/acme/plan.md"] == "plan\n"
    assert files["shared.md"] == "from stage 2\n"  # the later fixture wins
    assert files["empty"] == "/"  # empty folders are kept
    assert stat.S_IMODE((ws.root / "run.sh").stat().st_mode) & 0o111  # still executable


def test_the_agent_cannot_write_into_the_repo(top: Path, tmp_path: Path) -> None:
    before = tree(top)
    ws = create_workspace(suite_at(top), 3, tmp_path / "ws")
    # Through a component link, and over a fixture file: both land in copies.
    (ws.root / "agents" / "researcher.md").write_text("tampered\n")
    (ws.root / "templates" / "new.md").write_text("new\n")
    (ws.root / "shared.md").write_text("tampered\n")
    (ws.plugin / ".claude-plugin" / "plugin.json").write_text("{}")
    assert tree(top) == before
    assert (ws.plugin / "agents" / "researcher.md").read_text() == "tampered\n"
    # No path in the workspace resolves into the repository.
    for folder, dirs, files in os.walk(ws.parent, followlinks=True):
        for name in dirs + files:
            resolved = (Path(folder) / name).resolve()
            assert not resolved.is_relative_to(top), resolved


def test_remove_deletes_the_copies_only(top: Path, tmp_path: Path) -> None:
    before = tree(top)
    ws = create_workspace(suite_at(top), 3, tmp_path / "ws")
    ws.remove()
    assert not ws.parent.exists()
    assert tree(top) == before


def test_a_fixture_of_the_same_name_wins_over_a_component_link(top: Path, tmp_path: Path) -> None:
    write(top / "fixtures" / "1-research-output" / "templates" / "mine.md", "fixture\n")
    ws = create_workspace(suite_at(top), 2, tmp_path / "ws")
    assert "templates" not in ws.links
    assert not (ws.root / "templates").is_symlink()
    assert tree(ws.root / "templates") == {"mine.md": "fixture\n"}


def test_prompt_and_cwd_use_the_workspace_and_plugin_copy(top: Path, tmp_path: Path) -> None:
    suite = suite_at(top)
    ws = create_workspace(suite, 1, tmp_path / "ws")
    scenario = suite.scenario("acme")
    build = suite.stage("build")
    assert ws.prompt_for(suite, build, scenario) == (
        f"/demo:build in {ws.root} using {ws.plugin}/templates"
    )
    cwd = ws.cwd_for(suite, suite.stage("plan"), scenario)
    assert cwd == ws.root / "labs" / "acme"
    assert cwd.is_dir()  # created, since no fixture made it
    assert ws.values(suite, build, scenario)["plugin"] == str(ws.plugin)


def test_workspace_folders_must_be_fresh(top: Path, tmp_path: Path) -> None:
    suite = suite_at(top)
    create_workspace(suite, 1, tmp_path / "ws")
    with pytest.raises(UserError, match=r"workspace folder already exists: .*ws/plugin"):
        create_workspace(suite, 1, tmp_path / "ws")


# -- missing fixtures -------------------------------------------------------------


def test_missing_fixture_folder(top: Path, tmp_path: Path) -> None:
    suite = suite_at(top)
    (top / "fixtures" / "2-plan-output" / "run.sh").unlink()
    for path in sorted((top / "fixtures" / "2-plan-output").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (top / "fixtures" / "2-plan-output").rmdir()
    assert check_fixtures(suite, 2) == (top / "fixtures" / "1-research-output",)
    with pytest.raises(UserError) as info:
        check_fixtures(suite, 3)
    message = str(info.value)
    assert message.startswith("ci-evals.yaml: missing fixture folder for stage 2 (plan): ")
    assert str(top / "fixtures" / "2-plan-output") in message
    with pytest.raises(UserError):
        create_workspace(suite, 3, tmp_path / "ws")
    assert not (tmp_path / "ws").exists()  # nothing was created


def test_missing_fixture_folder_names_a_near_miss(top: Path) -> None:
    (top / "fixtures" / "2-plan-output").rename(top / "fixtures" / "2-planning-output")
    with pytest.raises(UserError) as info:
        check_fixtures(suite_at(top), 3)
    assert str(info.value).endswith(
        "(found 2-planning-output; the folder must be named <k>-<stage name>-output)"
    )


def test_from_stage_out_of_range(top: Path) -> None:
    with pytest.raises(UserError, match="unknown stage '4'"):
        check_fixtures(suite_at(top), 4)


def test_stage_one_needs_no_fixtures_folder(top: Path, tmp_path: Path) -> None:
    suite = suite_at(top)
    for path in sorted((top / "fixtures").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (top / "fixtures").rmdir()
    assert check_fixtures(suite, 1) == ()
    assert create_workspace(suite, 1, tmp_path / "ws").fixtures == ()


# -- links in fixtures ----------------------------------------------------------


def test_links_inside_a_fixture_are_kept(top: Path, tmp_path: Path) -> None:
    fixture = top / "fixtures" / "1-research-output"
    (fixture / "latest.md").symlink_to("research/company.md")
    (fixture / "research" / "up.md").symlink_to("../shared.md")
    (fixture / "data").symlink_to("research")
    ws = create_workspace(suite_at(top), 2, tmp_path / "ws")
    files = tree(ws.root)
    assert files["latest.md"] == "-> research/company.md"
    assert files["research/up.md"] == "-> ../shared.md"
    assert files["data"] == "-> research"
    assert (ws.root / "latest.md").read_text() == "v1 company\n"
    assert (ws.root / "data" / "company.md").read_text() == "v1 company\n"


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("escape.md", "../../../../etc/passwd"),
        ("research/escape.md", "../../ci-evals.yaml"),
        ("sibling.md", "../2-plan-output/shared.md"),
        ("absolute.md", "/etc/passwd"),
        ("inside/../../x", None),
    ],
)
def test_links_leaving_a_fixture_are_refused(
    top: Path, tmp_path: Path, link: str, target: str | None
) -> None:
    fixture = top / "fixtures" / "1-research-output"
    if target is None:  # a link whose own name is fine, target climbs via a folder
        (fixture / "research" / "deep").mkdir()
        link, target = "research/deep/x.md", "../../../outside.md"
    (fixture / link).symlink_to(target)
    suite = suite_at(top)
    with pytest.raises(UserError) as info:
        check_fixtures(suite, 2)
    message = str(info.value)
    assert f"fixture link {fixture / link} -> {target}" in message
    assert "absolute" in message if target.startswith("/") else "points outside" in message
    with pytest.raises(UserError):
        create_workspace(suite, 3, tmp_path / "ws")
    assert not (tmp_path / "ws" / "workspace").exists()


def test_links_climbing_out_through_another_link_are_refused(top: Path) -> None:
    fixture = top / "fixtures" / "1-research-output"
    (fixture / "here").symlink_to(".")  # fine on its own
    (fixture / "sneaky.md").symlink_to("here/../2-plan-output/shared.md")
    with pytest.raises(UserError) as info:
        check_fixtures(suite_at(top), 2)
    message = str(info.value)
    assert f"fixture link {fixture / 'sneaky.md'} -> here/../2-plan-output/shared.md" in message
    assert "points outside the workspace by way of other links" in message


def test_links_chained_across_fixtures_are_refused(top: Path) -> None:
    # Each is harmless in its own folder; merged, `up` climbs out of the workspace.
    (top / "fixtures" / "1-research-output" / "here").symlink_to(".")
    (top / "fixtures" / "2-plan-output" / "up").symlink_to("here/..")
    suite = suite_at(top)
    assert check_fixtures(suite, 2)  # fixture 1 alone is fine
    with pytest.raises(UserError, match=r"up -> here/\.\. points outside the workspace"):
        check_fixtures(suite, 3)


def test_link_loops_are_refused(top: Path) -> None:
    fixture = top / "fixtures" / "1-research-output"
    (fixture / "a").symlink_to("b")
    (fixture / "b").symlink_to("a/x")
    with pytest.raises(UserError, match="is part of a loop of links"):
        check_fixtures(suite_at(top), 2)


def test_escaping_link_in_a_fixture_not_laid_down_is_not_checked(top: Path, tmp_path: Path) -> None:
    (top / "fixtures" / "2-plan-output" / "bad").symlink_to("/etc")
    assert check_fixtures(suite_at(top), 2) == (top / "fixtures" / "1-research-output",)


def test_folder_replaced_by_a_file_is_refused(top: Path) -> None:
    write(top / "fixtures" / "2-plan-output" / "research", "now a file\n")
    with pytest.raises(UserError) as info:
        check_fixtures(suite_at(top), 3)
    message = str(info.value)
    assert "is a file, but an earlier fixture has a dir at research" in message


def test_special_files_in_a_fixture_are_refused(top: Path) -> None:
    os.mkfifo(top / "fixtures" / "1-research-output" / "pipe")
    with pytest.raises(UserError, match="not a file, folder or link"):
        check_fixtures(suite_at(top), 2)


# -- links in the plugin ------------------------------------------------------


def test_plugin_links_are_copied_as_content(top: Path, tmp_path: Path) -> None:
    shared = write(top / "shared" / "rubric.md", "shared rubric\n")
    (top / "plugin" / "references").symlink_to(shared.parent)
    (top / "plugin" / "agents" / "alias.md").symlink_to("researcher.md")
    ws = create_workspace(suite_at(top), 1, tmp_path / "ws")
    assert not (ws.plugin / "references").is_symlink()
    assert (ws.plugin / "references" / "rubric.md").read_text() == "shared rubric\n"
    assert not (ws.plugin / "agents" / "alias.md").is_symlink()
    (ws.plugin / "references" / "rubric.md").write_text("tampered\n")
    assert shared.read_text() == "shared rubric\n"


def test_dangling_plugin_link_is_a_user_error(top: Path, tmp_path: Path) -> None:
    (top / "plugin" / "agents" / "gone.md").symlink_to("missing.md")
    # Refused when the suite loads, before any workspace (test_fail_closed_plugin.py).
    with pytest.raises(UserError, match=r"gone\.md is a dangling link"):
        create_workspace(suite_at(top), 1, tmp_path / "ws")


# -- the baseline snapshot ------------------------------------------------------


def test_baseline_matches_a_full_snapshot(top: Path, tmp_path: Path) -> None:
    (top / "fixtures" / "1-research-output" / "latest.md").symlink_to("shared.md")
    ws = create_workspace(suite_at(top), 3, tmp_path / "ws")
    assert ws.baseline is not None
    full = take_snapshot(ws.root)
    assert set(ws.baseline.entries) == set(full.entries)
    for rel, entry in ws.baseline.entries.items():
        assert content_hash(entry) == full.entries[rel].sha256, rel
        assert entry.kind == full.entries[rel].kind
    assert ws.baseline.entries["agents"].target == "../plugin/agents"
    assert ws.baseline.entries["latest.md"].target == "shared.md"


def test_first_snapshot_does_not_read_fixture_files(top: Path, tmp_path: Path) -> None:
    ws = create_workspace(suite_at(top), 3, tmp_path / "ws")
    assert ws.baseline is not None
    before = take_snapshot(ws.root, previous=ws.baseline)
    entry = before.entries["shared.md"]
    assert entry.sha256 is None  # still deferred: the file was not read
    assert entry.source == str(top / "fixtures" / "2-plan-output" / "shared.md")
    assert not diff_snapshots(ws.baseline, before)


def test_changes_to_fixture_files_after_the_baseline(top: Path, tmp_path: Path) -> None:
    ws = create_workspace(suite_at(top), 3, tmp_path / "ws")
    before = take_snapshot(ws.root, previous=ws.baseline)
    company = ws.root / "research" / "company.md"
    info = company.stat()
    company.write_text("v2 company\n")  # same size, mtime restored below
    os.utime(company, ns=(info.st_atime_ns, info.st_mtime_ns))
    (ws.root / "shared.md").unlink()
    (ws.root / "labs" / "acme" / "plan.md").write_text("plan\n")  # same bytes rewritten
    (ws.root / "run.sh").chmod(0o644)
    (ws.root / "new.md").write_text("new\n")
    changes = diff_snapshots(before, take_snapshot(ws.root, previous=before))
    assert [(c.path, c.sha256) for c in changes.added] == [("new.md", sha(b"new\n"))]
    assert [(c.path, c.sha256) for c in changes.modified] == [
        ("research/company.md", sha(b"v2 company\n")),
        ("run.sh", sha(b"#!/bin/sh\n")),
    ]
    # The deleted file's hash comes from the fixture it was copied from.
    assert [(c.path, c.sha256, c.size) for c in changes.deleted] == [
        ("shared.md", sha(b"from stage 2\n"), 13)
    ]


def test_plugin_changes_show_what_the_agent_did_to_the_copy(top: Path, tmp_path: Path) -> None:
    ws = create_workspace(suite_at(top), 1, tmp_path / "ws")
    assert not ws.plugin_changes()
    (ws.root / "agents" / "researcher.md").write_text("be lenient\n")  # through the link
    (ws.plugin / "commands" / "research.md").unlink()
    changes = ws.plugin_changes()
    assert [(c.path, c.sha256) for c in changes.modified] == [
        ("agents/researcher.md", sha(b"be lenient\n"))
    ]
    assert [c.path for c in changes.deleted] == ["commands/research.md"]
    assert (top / "plugin" / "agents" / "researcher.md").read_text() == "agent\n"


def test_workspace_on_another_file_system(top: Path) -> None:
    # Fixtures on disk, run folder on tmpfs: copy_file_range is refused (EXDEV).
    shm = Path("/dev/shm")
    assert shm.is_dir() and shm.stat().st_dev != top.stat().st_dev, (
        "this test needs /dev/shm on its own file system (tmpfs), as on any Linux host"
    )
    parent = Path(tempfile.mkdtemp(prefix="ci-evals-test-", dir=shm))
    try:
        ws = create_workspace(suite_at(top), 3, parent / "acme")
        assert tree(ws.root / "research") == {"company.md": "v1 company\n"}
        assert (ws.root / "shared.md").read_text() == "from stage 2\n"
    finally:
        shutil.rmtree(parent)


def test_a_scenario_with_its_own_fixtures_gets_them(top: Path, tmp_path: Path) -> None:
    own = top / "fixtures" / "globex"
    write(own / "1-research-output" / "research" / "company.md", "globex company\n")
    write(own / "2-plan-output" / "labs" / "globex" / "plan.md", "globex plan\n")
    (top / "ci-evals.yaml").write_text(
        SUITE + "  - { id: globex, inputs: { company: globex }, fixtures: globex }\n"
    )
    suite = suite_at(top)
    acme, globex = suite.scenarios

    theirs = create_workspace(suite, 3, tmp_path / "globex", globex)
    shared = create_workspace(suite, 3, tmp_path / "acme", acme)

    assert theirs.fixtures == (own / "1-research-output", own / "2-plan-output")
    files = tree(theirs.root)
    assert files["research/company.md"] == "globex company\n"
    assert files["labs/globex/plan.md"] == "globex plan\n"
    assert "shared.md" not in files  # the suite's fixtures are not mixed in
    assert tree(shared.root)["research/company.md"] == "v1 company\n"


def test_a_scenario_missing_one_of_its_fixtures_is_named(top: Path) -> None:
    write(top / "fixtures" / "globex" / "1-research-output" / "a.md")
    (top / "ci-evals.yaml").write_text(
        SUITE + "  - { id: globex, inputs: { company: globex }, fixtures: globex }\n"
    )
    suite = suite_at(top)

    with pytest.raises(UserError) as info:
        check_fixtures(suite, 3, suite.scenario("globex"))

    message = str(info.value)
    assert "missing fixture folder of scenario 'globex' for stage 2 (plan)" in message
    assert str(top / "fixtures" / "globex" / "2-plan-output") in message


def test_the_seed_fixture_is_what_stage_1_starts_from(top: Path, tmp_path: Path) -> None:
    """`fixtures/0-*/` is the seed a contract may consume from (docs/contracts.md) and
    check-fixtures lays under every stage: the run must lay it too, or a consumed seed
    file is checked present and never there."""
    seed = top / "fixtures" / "0-seed"
    write(seed / "brief.md", "the brief\n")
    write(seed / "shared.md", "from the seed\n")
    suite = suite_at(top)
    ws = create_workspace(suite, 1, tmp_path / "one")
    assert ws.fixtures == (seed,)
    assert tree(ws.root)["brief.md"] == "the brief\n"
    ws = create_workspace(suite, suite.stage("build"), tmp_path / "three")
    assert ws.fixtures == (
        seed,
        top / "fixtures" / "1-research-output",
        top / "fixtures" / "2-plan-output",
    )
    files = tree(ws.root)
    assert (files["brief.md"], files["shared.md"]) == ("the brief\n", "from stage 2\n")


# -- the stage-1 seed: fixtures/0-<name>/ ---------------------------------------


def test_the_seed_is_what_stage_one_starts_from(top: Path, tmp_path: Path) -> None:
    seed = top / "fixtures" / "0-codebase"
    write(seed / "src" / "app.py", "print('hello')\n")
    write(seed / "shared.md", "from the seed\n")

    ws = create_workspace(suite_at(top), 1, tmp_path / "s1")

    assert ws.fixtures == (seed,)
    files = tree(ws.root)
    assert files["src/app.py"] == "print('hello')\n"
    assert files["shared.md"] == "from the seed\n"
    assert "research" not in files  # no stage's output yet
    assert check_fixtures(suite_at(top), 1) == (seed,)


def test_a_later_start_lays_the_seed_then_the_fixtures_over_it(top: Path, tmp_path: Path) -> None:
    seed = top / "fixtures" / "0-codebase"
    write(seed / "src" / "app.py", "seed app\n")
    write(seed / "shared.md", "from the seed\n")
    write(seed / "research" / "notes.md", "seed notes\n")

    ws = create_workspace(suite_at(top), 3, tmp_path / "s3")

    fixtures = top / "fixtures"
    assert ws.fixtures == (seed, fixtures / "1-research-output", fixtures / "2-plan-output")
    files = tree(ws.root)
    assert files["src/app.py"] == "seed app\n"  # kept: no later fixture has it
    assert files["shared.md"] == "from stage 2\n"  # replaced by the later fixtures
    # Folders merge: the seed's and stage 1's research/ are one folder.
    assert files["research/notes.md"] == "seed notes\n"
    assert files["research/company.md"] == "v1 company\n"


def test_a_seed_file_a_fixture_turns_into_a_folder_is_refused(top: Path) -> None:
    write(top / "fixtures" / "0-codebase" / "research", "a file here\n")
    with pytest.raises(UserError) as info:
        check_fixtures(suite_at(top), 2)
    assert "but an earlier fixture has a file at research" in str(info.value)


def test_a_seed_link_leaving_it_is_refused_even_from_stage_one(top: Path) -> None:
    seed = top / "fixtures" / "0-codebase"
    seed.mkdir(parents=True)
    (seed / "out").symlink_to("../1-research-output/shared.md")
    with pytest.raises(UserError) as info:
        check_fixtures(suite_at(top), 1)
    assert "points outside" in str(info.value)


def test_two_seeds_are_an_error_naming_both(top: Path) -> None:
    write(top / "fixtures" / "0-codebase" / "a.md")
    write(top / "fixtures" / "0-old" / "b.md")
    with pytest.raises(UserError) as info:
        check_fixtures(suite_at(top), 1)
    assert str(info.value) == (
        f"{top / 'fixtures'} holds 2 stage-1 seeds: 0-codebase, 0-old "
        "(keep one 0-<name>/ folder; merge the others into it)"
    )


def test_a_file_named_like_a_seed_is_not_one(top: Path, tmp_path: Path) -> None:
    write(top / "fixtures" / "0-notes.md")
    assert create_workspace(suite_at(top), 1, tmp_path / "s1").fixtures == ()


def test_a_scenario_with_its_own_fixtures_has_its_own_seed(top: Path, tmp_path: Path) -> None:
    write(top / "fixtures" / "0-codebase" / "suite.md", "the suite's seed\n")
    own = top / "fixtures" / "globex"
    write(own / "0-codebase" / "globex.md", "globex's seed\n")
    (top / "ci-evals.yaml").write_text(
        SUITE
        + "  - { id: globex, inputs: { company: globex }, fixtures: globex }\n"
        + "  - { id: initech, inputs: { company: initech }, fixtures: initech }\n"
    )
    (top / "fixtures" / "initech").mkdir()
    suite = suite_at(top)
    acme, globex, initech = suite.scenarios

    assert set(tree(create_workspace(suite, 1, tmp_path / "g", globex).root)) >= {"globex.md"}
    assert "suite.md" not in tree(create_workspace(suite, 1, tmp_path / "g2", globex).root)
    assert "suite.md" in tree(create_workspace(suite, 1, tmp_path / "a", acme).root)
    # A set of its own without a seed has none: the suite's is not mixed in.
    assert create_workspace(suite, 1, tmp_path / "i", initech).fixtures == ()


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_a_git_scenario_workspace_is_one_reproducible_commit(top: Path, tmp_path: Path) -> None:
    """`git: true`: the seed is the first commit, by a fixed author at a fixed time
    (the same seed gives the same SHA); the fixtures of the stages before lie on
    top uncommitted, as those stages left them; ci-evals' links are ignored."""
    (top / "ci-evals.yaml").write_text(SUITE.replace("{ id: acme,", "{ id: acme, git: true,"))
    seed = top / "fixtures" / "0-repo"
    write(seed / "shared.md", "as committed\n")
    write(seed / "src" / "main.py", "print('hi')\n").chmod(0o755)
    suite = suite_at(top)
    scenario = suite.scenario("acme")
    first = create_workspace(suite, suite.stage("build"), tmp_path / "one", scenario)
    second = create_workspace(suite, suite.stage("plan"), tmp_path / "two", scenario)
    assert first.commit is not None and first.commit == second.commit
    assert _git(first.root, "rev-parse", "HEAD").strip() == first.commit
    assert _git(first.root, "log", "--format=%an <%ae> %aI %cI").strip() == (
        "ci-evals <ci-evals@workspace.invalid> 2000-01-01T00:00:00Z 2000-01-01T00:00:00Z"
    )
    assert _git(first.root, "branch", "--show-current").strip() == "main"
    assert _git(first.root, "ls-files", "-s").splitlines() == [
        f"100644 {_git(first.root, 'hash-object', str(seed / 'shared.md')).strip()} 0\tshared.md",
        f"100755 {_git(first.root, 'hash-object', str(seed / 'src/main.py')).strip()} 0\t"
        "src/main.py",
    ]
    # Stages 1 and 2's fixtures: uncommitted work (links: in .git/info/exclude).
    assert _git(first.root, "status", "--porcelain").splitlines() == [
        " M shared.md",
        "?? labs/",
        "?? research/",
        "?? run.sh",
    ]
    assert _git(first.root, "diff", "HEAD", "--stat").split()[:2] == ["shared.md", "|"]
    assert first.unrecorded == (".git",)
    assert ".git/HEAD" not in take_snapshot(first.root, exclude=first.unrecorded).entries
    # No scenario, or one without git: no repository.
    plain = create_workspace(suite, suite.stage("build"), tmp_path / "three")
    assert plain.commit is None and not (plain.root / ".git").exists()


def test_a_fixture_s_git_folder_is_never_laid(top: Path, tmp_path: Path) -> None:
    # A repository inside a fixture (vendored, a submodule): its .git, any case,
    # holds a config with tokens and is no file of the fixture's; with or without git: true.
    (top / "ci-evals.yaml").write_text(SUITE.replace("{ id: acme,", "{ id: acme, git: true,"))
    write(top / "fixtures" / "1-research-output" / "vendored" / ".git" / "HEAD", "ref\n")
    write(top / "fixtures" / "1-research-output" / "vendored" / ".Git" / "config", "token\n")
    write(top / "fixtures" / "1-research-output" / "vendored" / "lib.py", "x = 1\n")
    suite = suite_at(top)
    for scenario, name in ((suite.scenario("acme"), "git"), (None, "plain")):
        ws = create_workspace(suite, suite.stage("build"), tmp_path / name, scenario)
        assert sorted(p.name for p in (ws.root / "vendored").iterdir()) == ["lib.py"]
