"""Does Claude Code load this plugin? Its own loader says, before anything runs.

`claude --plugin-dir DIR plugin list --json` (the CLI claude-agent-sdk bundles,
the one a run starts, loading the plugin the same way) lists the plugin with
`enabled: false` and the reason when its loader refuses the whole plugin (an
invalid manifest: `"agents": ["./agents"]` names a folder where it wants `.md`
files, a name with spaces, a number as `version`), or with `errors` when it
loads the plugin less a part (a component path that is not there). Listing
reads files only: no hook, MCP or LSP server of the plugin starts
(tests/agents/test_plugin_load.py plants one of each). It takes ~0.4 s.

`claude plugin validate` is not asked: it is stricter than the loader (an
`author` string is an error there, where the loader ignores it with a note),
and a plugin Claude Code loads must never be refused.

The CLI runs with a scratch HOME and working folder, so neither the user's
installed plugins and settings nor the project's `.claude/` colour the answer,
and it writes nothing of theirs; without a model, key or network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci_evals import process

MANIFEST = ".claude-plugin/plugin.json"
_TIMEOUT_S = 60.0
_OUTPUT_CAP = 4 * 1024 * 1024
_REASON_CHARS = 300
FIX_HINT = (
    "fix it as the reason says (claude plugin validate PLUGIN_DIR lists every problem); "
    "as it is, every stage would fail with that reason"
)


@dataclass(frozen=True)
class LoadVerdict:
    """What the CLI's loader said. `loaded` is None when it could not be asked."""

    loaded: bool | None
    errors: tuple[str, ...] = ()  # its reasons, as it words them (the refusal first)
    unasked: str = ""  # why it could not be asked

    @property
    def reason(self) -> str:
        """The refusal in a line: the CLI's words less its preamble and our paths."""
        return _short(self.errors[0]) if self.errors else ""


def refusal(verdict: LoadVerdict) -> str | None:
    """The one line saying Claude Code refuses the plugin; None when it loads it
    (or could not be asked)."""
    if verdict.loaded is False:
        return f"Claude Code does not load this plugin: {verdict.reason}"
    return None


def notes(verdict: LoadVerdict) -> list[str]:
    """What to say of a plugin it loads: each part it drops, or that it was not asked."""
    if verdict.loaded is None:
        return [
            "note: could not ask Claude Code whether it loads the plugin (load check "
            f"skipped): {verdict.unasked}"
        ]
    if verdict.loaded is False:
        return []
    return [f"note: Claude Code loads the plugin less a part: {error}" for error in verdict.errors]


def bundled_cli() -> Path | None:
    """The CLI claude-agent-sdk starts: its bundled binary, else `claude` on PATH
    (the SDK's own order), found without importing the SDK."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is not None and spec.origin is not None:
        path = Path(spec.origin).parent / "_bundled" / "claude"
        if path.is_file():
            return path
    found = shutil.which("claude")
    return Path(found) if found else None


def ask(plugin_dir: Path, manifest: Mapping[str, object] | None = None) -> LoadVerdict:
    """Whether Claude Code loads the plugin in `plugin_dir`; with `manifest`, as a run
    loads it: that manifest written into the plugin's copy in place of its own
    (`PluginSource.manifest_to_write`: a marketplace entry standing in for it)."""
    cli = bundled_cli()
    if cli is None:
        return LoadVerdict(None, unasked="no Claude Code CLI (pip install claude-agent-sdk)")
    with tempfile.TemporaryDirectory(prefix="ci-evals-load-") as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        target = plugin_dir.resolve()
        if manifest is not None:
            target = _with_manifest(target, manifest, Path(scratch) / "plugin")
        env = {
            "HOME": str(home),
            "PATH": os.environ.get("PATH", os.defpath),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        argv = [str(cli), "--plugin-dir", str(target), "plugin", "list", "--json"]
        try:
            result = process.run(
                argv, cwd=home, env=env, timeout=_TIMEOUT_S, output_cap=_OUTPUT_CAP
            )
        except OSError as exc:
            return LoadVerdict(None, unasked=f"{cli} did not start: {exc.strerror or exc}")
        return _verdict(result, target)


def _with_manifest(plugin_dir: Path, manifest: Mapping[str, object], into: Path) -> Path:
    """A folder that reads as the run's copy: the plugin's top-level entries linked,
    `.claude-plugin/plugin.json` holding `manifest`."""
    into.mkdir()
    for entry in plugin_dir.iterdir():
        if entry.name != ".claude-plugin":
            (into / entry.name).symlink_to(entry)
    (into / ".claude-plugin").mkdir()
    (into / MANIFEST).write_text(json.dumps(dict(manifest)), encoding="utf-8")
    return into


def _verdict(result: process.ExecResult, target: Path) -> LoadVerdict:
    if not result.ok:
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()
        why = "timed out" if result.timed_out else f"exit {result.returncode}"
        return LoadVerdict(None, unasked=f"plugin list {why}: {said[-1] if said else ''}")
    try:
        listed = json.loads(result.stdout)
    except ValueError:
        return LoadVerdict(None, unasked="plugin list --json printed no JSON")
    # The plugin of `--plugin-dir` is the one listed for this session at its path.
    found = [
        item
        for item in (listed if isinstance(listed, list) else [])
        if isinstance(item, dict)
        and item.get("scope") == "session"
        and _same(item.get("installPath"), target)
    ]
    if len(found) != 1:
        return LoadVerdict(None, unasked="plugin list --json did not list the plugin")
    item = found[0]
    # Its paths are the scratch copy's or the plugin's, absolute: shown from the plugin.
    errors = tuple(str(e).replace(f"{target}/", "") for e in item.get("errors") or () if e)
    return LoadVerdict(item.get("enabled") is True, errors)


def _same(path: object, target: Path) -> bool:
    return isinstance(path, str) and os.path.realpath(path) == str(target.resolve())


def _short(error: str) -> str:
    """`agents.0: Invalid string: must end with ".md"` out of the CLI's "Failed to
    load plugin: Plugin X has an invalid manifest file at PATH. Validation errors:
    ..." (the path is a scratch folder's or absolute: the caller names the file)."""
    _, marker, rest = error.partition("Validation errors: ")
    text = rest if marker else error
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."
