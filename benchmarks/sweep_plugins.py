"""Onboard every plugin of fetched marketplaces as a new user would, and count.

    python benchmarks/sweep_plugins.py /tmp/pub/cc /tmp/pub/superpowers [--jobs 2]

Each argument is a fetched copy of a marketplace (a folder holding
`.claude-plugin/marketplace.json`, whose local entries are swept) or of one
plugin. Per plugin: a fresh git repository in a temporary folder with the
plugin copied to `plugin/`, then exactly the lines `ci-evals init plugin`
prints (`git add -A && ci-evals check-coverage && ci-evals check --model
stub:... && ci-evals run --model stub:...`). Prints one line per plugin
(its outcome, the step that failed and its last line) and the counts, as
docs/onboarding.md quotes them. Never commit the copies it reads.

With `--format cases`, init drafts `claude plugin eval` cases, and after the
printed lines the bundled CLI's own runner runs them against the drafted stub
script, offline, with and without the plugin (step `claude plugin eval`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

CI_EVALS = Path(sys.executable).with_name("ci-evals")


@dataclass(frozen=True)
class Outcome:
    plugin: str
    step: str  # "green", or the step that failed: init, check-coverage, check, run
    seconds: float
    said: str  # init's first line, or the failing step's last line


def plugins(folder: Path) -> list[tuple[str, Path]]:
    market = folder / ".claude-plugin" / "marketplace.json"
    if not market.is_file():
        return [(folder.name, folder)]
    found = []
    for entry in json.loads(market.read_text(encoding="utf-8")).get("plugins", []):
        source = entry.get("source")
        if isinstance(source, str) and (folder / source).is_dir():
            found.append((entry["name"], (folder / source).resolve()))
    return found


def onboard(name: str, plugin: Path, draft: str = "stages") -> Outcome:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"sweep-{name}-") as tmp:
        repo = Path(tmp)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        shutil.copytree(plugin, repo / "plugin", symlinks=True)
        init = _run(repo, [str(CI_EVALS), "init", "plugin", "--format", draft])
        if init.returncode != 0:
            return Outcome(name, "init", time.monotonic() - started, _last(init))
        first = init.stdout.splitlines()[0]
        line = next(x for x in init.stdout.splitlines() if x.startswith("next: "))
        for step in line.removeprefix("next: ").split(" && "):
            words = step.split()
            if words[0] == "ci-evals":
                words[0] = str(CI_EVALS)
            proc = _run(repo, words)
            if proc.returncode != 0:
                label = words[1] if words[0] == str(CI_EVALS) else " ".join(words)
                return Outcome(name, label, time.monotonic() - started, _last(proc))
        if draft == "cases":
            said = _claude_plugin_eval(repo)
            if said:
                return Outcome(name, "claude plugin eval", time.monotonic() - started, said)
        return Outcome(name, "green", time.monotonic() - started, first)


def _claude_plugin_eval(repo: Path) -> str:
    """The drafted cases run by the bundled CLI against the drafted stub script
    (shared/notes/claude-plugin-eval.md: scratch HOME, fake key, no other
    traffic); "" when every case passed, else what failed."""
    from ci_evals.agents.plugin_load import bundled_cli  # noqa: PLC0415 - only for cases
    from ci_evals.endpoints.stub_model import StubServer, load_script  # noqa: PLC0415

    cli = bundled_cli()
    if cli is None:
        return "no Claude Code CLI (pip install claude-agent-sdk)"
    (stub,) = (repo / "stub").glob("*.yaml")
    out = repo / "cli-out.json"
    (repo / "cli-home").mkdir()
    argv = [str(cli), "plugin", "eval", str(repo / "plugin"), "--trust-plugin", "--no-publish"]
    argv += ["--ablation", "with-without", "--json", str(out)]
    argv += ["--output-dir", str(repo / "cli-results")]
    with StubServer(load_script(stub)) as server:
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(repo / "cli-home"),
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        proc = subprocess.run(
            argv, cwd=repo, env=env, capture_output=True, text=True, timeout=1800, check=False
        )
    if not out.is_file():
        return _last(proc)
    cases = json.loads(out.read_text(encoding="utf-8"))["cases"]
    failed = [c["name"] for c in cases if c["aggregates"]["score"] < 1]
    if proc.returncode != 0 or failed:
        return f"exit {proc.returncode}; failed: {', '.join(failed) or 'none'}"
    return ""


def _run(repo: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=1800, check=False)


def _last(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in (proc.stderr + proc.stdout).splitlines() if x.strip()]
    errors = [x for x in lines if "stub:" in x or "error" in x.lower()]
    return (errors or lines or [""])[-1][:300]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--format", choices=("stages", "cases"), default="stages")
    args = parser.parse_args()
    todo = [item for folder in args.folders for item in plugins(folder)]
    outcomes = []
    with ThreadPoolExecutor(args.jobs) as pool:
        # Each line as its plugin ends: a sweep cut short still says what it saw.
        for done in as_completed([pool.submit(onboard, *item, args.format) for item in todo]):
            outcome = done.result()
            outcomes.append(outcome)
            print(
                f"{outcome.plugin:34} {outcome.step:15} {outcome.seconds:6.1f}s  {outcome.said}",
                flush=True,
            )
    green = sum(o.step == "green" for o in outcomes)
    print(f"{green} of {len(outcomes)} green on the stub following only the printed lines")
    return 0 if green == len(outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
