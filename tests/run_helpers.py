"""Helpers for the runner tests: a tiny real plugin and suite, processes left behind.

The suite `demo` has five stages `s1`..`s5`; stage k's command is
`/demo:sK`, and the default stub script makes it write `outK.md` in its
working folder, then end. Fixtures 1..4 hold `outK.md` as stage k's output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

STAGES = 5


def default_rules(stages: int = STAGES) -> str:
    """Stub rules: stage k writes outK.md (`stage K for {args}`), then says done."""
    rules = []
    for k in range(1, stages + 1):
        rules.append(
            f"""  - name: s{k}
    match: {{command: demo:s{k}}}
    turns:
      - tools: [{{write: {{path: out{k}.md, content: "stage {k} for {{args}}\\n"}}}}]
      - text: "stage {k} done"
"""
        )
    return "".join(rules)


def make_suite(
    root: Path,
    *,
    scenarios: tuple[str, ...] = ("acme",),
    rules: str | None = None,
    limits: str = "{max_turns: 10, timeout_s: 120}",
    budget_usd: float | None = None,
    fixtures: bool = True,
    own_fixtures: tuple[str, ...] = (),
) -> tuple[Path, Path]:
    """Write plugin, fixtures, ci-evals.yaml and stub.yaml under `root`; return (suite, stub).

    Scenarios named in `own_fixtures` get their own (`fixtures/<id>/`, saying
    `<id> fixture <k>`) instead of the suite's (`fixture <k>`)."""
    plugin = root / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "demo", "version": "0.1.0"})
    )
    (plugin / "commands").mkdir()
    for k in range(1, STAGES + 1):
        (plugin / "commands" / f"s{k}.md").write_text(
            f"---\ndescription: stage {k}\n---\nDo stage {k} for $ARGUMENTS.\n"
        )
    if fixtures:
        for k in range(1, STAGES):
            folder = root / "fixtures" / f"{k}-s{k}-output"
            folder.mkdir(parents=True)
            (folder / f"out{k}.md").write_text(f"fixture {k}\n")
    for sid in own_fixtures:
        for k in range(1, STAGES):
            folder = root / "fixtures" / sid / f"{k}-s{k}-output"
            folder.mkdir(parents=True)
            (folder / f"out{k}.md").write_text(f"{sid} fixture {k}\n")
    stages = "".join(f'  - name: s{k}\n    prompt: "/demo:s{k} {{company}}"\n' for k in range(1, 6))
    scenario_text = "".join(
        f'  - id: {sid}\n    inputs: {{company: "{sid.title()} Corp"}}\n'
        + (f"    fixtures: {sid}\n" if sid in own_fixtures else "")
        for sid in scenarios
    )
    budget = f"budget_usd: {budget_usd}\n" if budget_usd is not None else ""
    suite = root / "ci-evals.yaml"
    suite.write_text(
        f"version: 1\nplugin: plugin\nfixtures: fixtures\nstage_map: null\n{budget}"
        f"limits: {limits}\nstages:\n{stages}scenarios:\n{scenario_text}"
    )
    stub = root / "stub.yaml"
    stub.write_text("rules:\n" + (rules if rules is not None else default_rules()))
    return suite, stub


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose environment or command line contains `text`."""
    needle = text.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = (entry / "stat").read_text()
            if status.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue  # gone meanwhile (ProcessLookupError is an OSError) or not ours to read
        if needle in environ or needle in cmdline:
            # Read once above: a second read could race with the process exiting.
            found.append((int(entry.name), cmdline[:200].decode(errors="replace")))
    return found


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    """Write each relative path's text under `root` (folders made); return `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def plugin_eval(
    plugin: Path, home: Path, base_url: str, *flags: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`claude plugin eval PLUGIN` of the bundled CLI, offline against `base_url`
    (shared/notes/claude-plugin-eval.md: a scratch HOME, a fake key, no other
    traffic; trusted, unpublished, one arm), with `flags` after those."""
    home.mkdir(parents=True, exist_ok=True)
    argv = [str(bundled_cli()), "plugin", "eval", str(plugin), "--trust-plugin"]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return subprocess.run(
        [*argv, "--no-publish", "--ablation", "none", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def bundled_cli() -> Path:
    """The Claude Code CLI that claude-agent-sdk bundles, wherever the virtualenv is
    (a clone under /tmp may use one elsewhere: never assume `REPO/.venv`)."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    assert spec is not None and spec.origin is not None, "pip install -e '.[dev]'"
    path = Path(spec.origin).parent / "_bundled" / "claude"
    assert path.exists(), f"no bundled CLI at {path}"
    return path


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """Each `relative path: text` of `files` written under `root` (folders made); `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run_ci_evals(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`python -m ci_evals ARGS` in `cwd` (this interpreter, wherever its venv is),
    with `env` instead of ours when given; its output as text, whatever it exits."""
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=None if env is None else dict(env),
    )
