"""`init` quotes every name it takes from the plugin: a file name with a line
break, `#`, `: `, quotes or U+2028 adds no key to any file it drafts.

A real plugin in a real git repository, drafted by the real command line; each
draft is loaded back (YAML) and must hold exactly the keys `init` writes, the
names round-tripped; `check-coverage` and `check` then pass, or refuse in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import git
from tests.onboarding_helpers import cli, write

# Agent and reference file names a pull request could commit: each would end a
# comment line, or a quoted scalar, early if written into the YAML as it is.
HOSTILE = (
    "evil\ninjected: 1",
    "a #b: \"c' d",
    "line\u2028sep: x",
    "next\x85line: y",
    "cr\rreturn: z",
)
SUITE_KEYS = {"version", "plugin", "fixtures", "stage_map", "budget_usd", "limits", "stages"}
MAP_KEYS = {"version", "root", "stages", "entries", "global", "fixtures", "ignore_metadata"}


def _repo(tmp_path: Path, commands: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    plugin = repo / "plugin"
    write(plugin / ".claude-plugin" / "plugin.json", '{"name": "demo", "version": "0.1.0"}\n')
    for name, text in commands.items():
        write(plugin / "commands" / f"{name}.md", text)
    for name in HOSTILE:
        write(plugin / "agents" / f"{name}.md", "---\ndescription: an agent\n---\nHelp.\n")
        write(plugin / "references" / f"{name}.md", "notes\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    return repo


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_hostile_file_names_add_no_key_to_the_drafts(tmp_path: Path) -> None:
    # The command names every agent, so each agent's name lands in the stub script
    # and its entry's comment ("named by ...") in the stage map.
    names = " ".join(f"`agents/{name}.md`" for name in HOSTILE)
    repo = _repo(
        tmp_path,
        {"build": f"---\nargument-hint: [topic]\n---\nUse {names}; write out.md.\n$ARGUMENTS\n"},
    )
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 0, proc.stderr

    suite = _load(repo / "ci-evals.yaml")
    assert set(suite) == SUITE_KEYS | {"scenarios"}
    stage_map = _load(repo / "stage_map.yaml")
    assert set(stage_map) == MAP_KEYS
    globs = {entry["glob"] for entry in stage_map["entries"]}
    assert any("\n" in glob for glob in globs), globs  # the names as they are
    stub_file = next((repo / "stub").glob("*.yaml"))
    stub = _load(stub_file)
    assert set(stub) == {"rules"}
    rules = [rule["name"] for rule in stub["rules"]]
    for name in HOSTILE:  # each agent's rule, its name round-tripped
        assert any(name in rule for rule in rules), rules
    for rule in stub["rules"]:
        assert set(rule) == {"name", "match", "turns"}

    git(repo, "add", "-A")
    # A glob cannot hold a line break: the map is refused, in one line naming it.
    coverage = cli(repo, "check-coverage")
    assert coverage.returncode == 2, coverage.stdout + coverage.stderr
    assert len(coverage.stderr.splitlines()) == 1
    assert "stage_map.yaml:" in coverage.stderr and "line break" in coverage.stderr
    check = cli(repo, "check", "--model", f"stub:{stub_file.relative_to(repo)}")
    problems = [line for line in check.stderr.splitlines() if "nothing was started" not in line]
    assert check.returncode == 0 or len(problems) == 1, check.stdout + check.stderr


@pytest.mark.parametrize("name", HOSTILE)
def test_a_command_named_so_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    repo = _repo(tmp_path, {name: "Do it.\n", "other": "Other.\n"})
    proc = cli(repo, "init", "plugin")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "makes no stage name" in lines[0] and "--stages NAME=COMMAND" in lines[0]
    assert not (repo / "ci-evals.yaml").exists()


@pytest.mark.parametrize("name", HOSTILE)
def test_a_command_named_so_is_quoted_when_a_stage_runs_it(tmp_path: Path, name: str) -> None:
    repo = _repo(tmp_path, {name: "---\nargument-hint: [topic]\n---\nWrite out.md.\n"})
    proc = cli(repo, "init", "plugin", "--stages", f"build={name}")
    assert proc.returncode == 0, proc.stderr
    suite = _load(repo / "ci-evals.yaml")
    assert set(suite) == SUITE_KEYS | {"scenarios"}
    assert suite["stages"][0]["prompt"].startswith(f"/demo:{name}")
    assert set(_load(repo / "stage_map.yaml")) == MAP_KEYS
    stub = _load(next((repo / "stub").glob("*.yaml")))
    assert set(stub) == {"rules"}
    assert stub["rules"][0]["match"] == {"command": f"demo:{name}"}
    git(repo, "add", "-A")
    check = cli(repo, "check", "--model", "stub:stub/demo.yaml")
    # Loaded as written: it passes, or names what is wrong in one line.
    problems = [line for line in check.stderr.splitlines() if "nothing was started" not in line]
    assert check.returncode == 0 or len(problems) == 1, check.stdout + check.stderr
