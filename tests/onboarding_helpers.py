"""The onboarding fixture: an original test plugin in the layout of anthropics/claude-code's
`plugins/feature-dev` (tests/data/onboarding/README.md), laid into a temporary
folder the way a user evaluating someone else's plugin would keep it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

FEATURE_DEV = Path(__file__).parent / "data" / "onboarding" / "feature-dev"
AGENTS = ("agents/code-architect.md", "agents/code-explorer.md", "agents/code-reviewer.md")


def copy_feature_dev(top: Path, folder: str = "plugin") -> Path:
    """The plugin copied to `top/folder`; returns its path."""
    plugin = top / folder
    shutil.copytree(FEATURE_DEV, plugin)
    return plugin


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `ci-evals` command line in `cwd`: no API key (the stub serves), its
    temporary folders beside `cwd`, and ci-evals itself on PATH (a drafted hook runs it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(TMPDIR=str(cwd.parent), CLAUDE_CODE_MAX_RETRIES="0")
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
