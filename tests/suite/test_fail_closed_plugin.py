"""A plugin folder the run could not copy, or a plugin name that is not a plain name,
is refused when the suite loads: exit 2, one line naming the entry, nothing started."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from ci_evals.errors import UserError
from ci_evals.main import main
from ci_evals.suite.load import load_suite
from ci_evals.workspace.create import create_workspace
from tests.run_helpers import make_suite


def _fifo(plugin: Path) -> Path:
    os.mkfifo(plugin / "commands" / "pipe")
    return plugin / "commands" / "pipe"


def _loop(plugin: Path) -> Path:
    (plugin / "templates").mkdir()
    (plugin / "templates" / "loop").symlink_to(".")
    return plugin / "templates" / "loop"


def _loop_to_top(plugin: Path) -> Path:
    (plugin / "templates").mkdir()
    (plugin / "templates" / "up").symlink_to("../..")  # the folder holding the plugin
    return plugin / "templates" / "up"


def _mutual(plugin: Path) -> Path:
    (plugin / "a").mkdir()
    (plugin / "b").mkdir()
    (plugin / "a" / "to-b").symlink_to("../b")
    (plugin / "b" / "to-a").symlink_to("../a")
    return plugin / "a" / "to-b" / "to-a"


def _dangling(plugin: Path) -> Path:
    (plugin / "commands" / "gone.md").symlink_to("nowhere.md")
    return plugin / "commands" / "gone.md"


def _self_link(plugin: Path) -> Path:
    (plugin / "commands" / "self").symlink_to("self")
    return plugin / "commands" / "self"


def _link_to_fifo(plugin: Path) -> Path:
    os.mkfifo(plugin.parent / "outside-pipe")
    (plugin / "commands" / "p").symlink_to(plugin.parent / "outside-pipe")
    return plugin / "commands" / "p"


def _socket(plugin: Path) -> Path:
    path = plugin / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()
    return path


def _link_to_environ(plugin: Path) -> Path:
    # Would copy ci-evals' own environment, its API key, into the agent's workspace.
    (plugin / "commands" / "env.md").symlink_to("/proc/self/environ")
    return plugin / "commands" / "env.md"


def _link_to_proc_folder(plugin: Path) -> Path:
    (plugin / "host").symlink_to("/proc/self")
    return plugin / "host"


BREAKERS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "fifo": (_fifo, "is a named pipe"),
    "loop": (_loop, "is a link to '.', a folder it is inside"),
    "loop-to-top": (_loop_to_top, "is a link to '../..', a folder it is inside"),
    "mutual": (_mutual, "is a link to '../a', a folder it is inside"),
    "dangling": (_dangling, "is a dangling link (to 'nowhere.md'"),
    "self-link": (_self_link, "is a link to 'self' that cannot be followed"),
    "link-to-fifo": (_link_to_fifo, "is a named pipe (through a link)"),
    "socket": (_socket, "is a socket"),
    "link-to-environ": (_link_to_environ, "is a link into /proc (/proc/"),
    "link-to-proc-folder": (_link_to_proc_folder, "is a link into /proc (/proc/"),
}


@pytest.mark.parametrize("case", list(BREAKERS))
def test_a_plugin_the_copy_would_choke_on_is_refused_at_load(tmp_path: Path, case: str) -> None:
    suite, _ = make_suite(tmp_path)
    make, problem = BREAKERS[case]
    entry = make(tmp_path / "plugin")
    with pytest.raises(UserError) as info:
        load_suite(suite)
    text = str(info.value)
    assert text.startswith(f"{suite}:2:"), text  # the suite's `plugin:` line
    assert f"plugin: {entry} {problem}" in text, text
    # one line, short apart from the two paths it names (longer under pytest-xdist)
    assert "\n" not in text and len(text) - len(str(suite)) - len(str(entry)) < 300


@pytest.mark.parametrize("case", ["fifo", "loop", "dangling"])
def test_run_stops_before_anything_starts(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    suite, stub = make_suite(tmp_path)
    BREAKERS[case][0](tmp_path / "plugin")
    out = tmp_path / "out"
    code = main(["run", "--suite", str(suite), "--model", f"stub:{stub}", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert BREAKERS[case][1] in err
    assert not out.exists()


def test_links_the_copy_can_follow_are_still_fine(tmp_path: Path) -> None:
    suite, _ = make_suite(tmp_path)
    plugin = tmp_path / "plugin"
    shared = tmp_path / "shared-rubrics"
    shared.mkdir()
    (shared / "r.md").write_text("# R\n")
    (plugin / "rubrics").symlink_to(shared)  # shared files elsewhere: copied in
    (plugin / "agents").mkdir()
    (plugin / "agents" / "again").symlink_to("../commands")  # a sibling, not a parent
    (plugin / "agents" / "s1.md").symlink_to("../commands/s1.md")
    loaded = load_suite(suite)
    workspace = create_workspace(loaded, 1, tmp_path / "ws")
    assert (workspace.plugin / "rubrics" / "r.md").read_text() == "# R\n"
    assert not (workspace.plugin / "rubrics").is_symlink()
    assert (workspace.plugin / "agents" / "again" / "s1.md").is_file()


@pytest.mark.parametrize(
    "name", ["../../evil", "a/b", "/abs", "..", ".hidden", "x:y", "has space", "-dash", "a..b"]
)
def test_a_plugin_name_that_is_not_a_plain_name_is_refused(tmp_path: Path, name: str) -> None:
    suite, _ = make_suite(tmp_path)
    manifest = tmp_path / "plugin" / ".claude-plugin" / "plugin.json"
    manifest.write_text(json.dumps({"version": "1", "name": name}, indent=2))
    with pytest.raises(UserError) as info:
        load_suite(suite)
    text = str(info.value)
    assert text.startswith(f"{manifest}:3: name: not a plain plugin name: {name!r}"), text
    assert "\n" not in text


@pytest.mark.parametrize("name", ["demo", "lab-smith", "lab_smith", "LabSmith", "v2.plugin"])
def test_plain_plugin_names_load(tmp_path: Path, name: str) -> None:
    suite, _ = make_suite(tmp_path)
    manifest = tmp_path / "plugin" / ".claude-plugin" / "plugin.json"
    manifest.write_text(json.dumps({"name": name}))
    suite.write_text(suite.read_text().replace("/demo:", f"/{name}:"))  # its commands' new name
    assert load_suite(suite).plugin.name == name
