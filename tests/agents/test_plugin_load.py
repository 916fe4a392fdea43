"""`agents.plugin_load`: Claude Code's own loader (the bundled CLI, `plugin list`)
asked whether it loads a plugin, on plugins written here in the shapes it refuses
and the shapes it loads — some of which `claude plugin validate` calls errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ci_evals.agents import plugin_load
from tests.onboarding_helpers import write
from tests.run_helpers import bundled_cli

AGENT = "---\nname: critic\ndescription: Reviews things\n---\nYou are the critic.\n"


def plugin(tmp_path: Path, manifest: dict[str, object] | None) -> Path:
    folder = tmp_path / "plug"
    write(folder / "agents" / "critic.md", AGENT)
    write(folder / "commands" / "x.md", "---\ndescription: x\n---\nDo x.\n")
    if manifest is not None:
        write(folder / ".claude-plugin" / "plugin.json", json.dumps(manifest))
    return folder


def test_a_folder_where_claude_code_wants_files_is_refused_with_its_reason(
    tmp_path: Path,
) -> None:
    # As wshobson/agents' pptx-deck-creation ships it.
    verdict = plugin_load.ask(plugin(tmp_path, {"name": "plug", "agents": ["./agents"]}))
    assert verdict.loaded is False
    assert verdict.reason == 'agents.0: Invalid string: must end with ".md"'


def test_other_manifests_the_loader_refuses(tmp_path: Path) -> None:
    for manifest, reason in [
        ({"name": "my plug"}, "name: Plugin name cannot contain spaces."),
        ({"name": "plug", "version": 1}, "version: Invalid input: expected string"),
        ({"name": "plug", "commands": ["commands/x.md"]}, "commands: Invalid input"),
    ]:
        folder = tmp_path / str(len(reason))
        verdict = plugin_load.ask(plugin(folder, manifest))
        assert verdict.loaded is False, manifest
        assert verdict.reason.startswith(reason), verdict.reason


def test_manifests_the_loader_takes_are_loaded_even_where_validate_says_error(
    tmp_path: Path,
) -> None:
    shapes: list[dict[str, object]] = [
        {"name": "plug", "agents": ["./agents/critic.md"]},
        {"name": "plug", "author": "someone"},  # validate: "expected object"
        {"name": "plug", "unknown": 1},  # validate: a warning
        {"name": "plug", "commands": "./commands"},
    ]
    for n, manifest in enumerate(shapes):
        folder = plugin(tmp_path / str(n), manifest)
        verdict = plugin_load.ask(folder)
        assert verdict == plugin_load.LoadVerdict(True), manifest
    # `claude plugin validate` would have refused the author string: never asked.
    validate = subprocess.run(
        [str(bundled_cli()), "plugin", "validate", str(tmp_path / "1" / "plug")],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert validate.returncode == 1, validate.stdout


def test_a_missing_component_loads_the_plugin_less_that_part(tmp_path: Path) -> None:
    verdict = plugin_load.ask(plugin(tmp_path, {"name": "plug", "agents": ["./agents/gone.md"]}))
    assert verdict == plugin_load.LoadVerdict(True, ("Path not found: agents/gone.md (agents)",))


def test_a_marketplace_entry_standing_in_for_the_manifest_is_what_is_asked(
    tmp_path: Path,
) -> None:
    folder = plugin(tmp_path, None)  # no manifest of its own: the entry is one
    assert plugin_load.ask(folder, {"name": "plug"}).loaded is True
    refused = plugin_load.ask(folder, {"name": "plug", "agents": "./agents"})
    assert refused.loaded is False
    assert refused.reason == 'agents: Invalid string: must end with ".md"'
    assert not (folder / ".claude-plugin").exists()  # the folder itself untouched


def test_listing_starts_nothing_of_the_plugin(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()

    def touch(name: str) -> list[str]:
        return ["-c", f"touch {marks / name}"]

    manifest = {
        "name": "plug",
        "mcpServers": {"m": {"command": "/bin/sh", "args": touch("mcp")}},
        "lspServers": {
            "l": {"command": "/bin/sh", "args": touch("lsp"), "extensionToLanguage": {".py": "py"}}
        },
    }
    folder = plugin(tmp_path, manifest)
    hook = {"type": "command", "command": f"touch {marks / 'hook'}"}
    write(
        folder / "hooks" / "hooks.json",
        json.dumps({"hooks": {e: [{"hooks": [hook]}] for e in ("SessionStart", "Setup")}}),
    )
    write(
        folder / ".mcp.json",
        json.dumps({"mcpServers": {"n": {"command": "touch", "args": [str(marks / "mcp2")]}}}),
    )
    assert plugin_load.ask(folder).loaded is True
    assert list(marks.iterdir()) == []
