"""The onboarding fixture: an original test plugin in the layout of anthropics/claude-code's
`plugins/feature-dev` (tests/data/onboarding/README.md), laid into a temporary
folder the way a user evaluating someone else's plugin would keep it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.paths import DATA

ONBOARDING = DATA / "onboarding"
FEATURE_DEV = ONBOARDING / "feature-dev"
COMMIT_COMMANDS = ONBOARDING / "commit-commands"  # its command runs `!`git ...``
AGENTS = ("agents/code-architect.md", "agents/code-explorer.md", "agents/code-reviewer.md")


def copy_feature_dev(top: Path, folder: str = "plugin", source: Path = FEATURE_DEV) -> Path:
    """The plugin (feature-dev, or `source`) copied to `top/folder`; returns its path."""
    plugin = top / folder
    shutil.copytree(source, plugin)
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


def follow_printed_lines(here: Path, printed: str) -> Path:
    """Run, in `here`, exactly the commands of init's last line (`next: A && B ...`),
    each of which must succeed: `cd` as a shell would, `git` ones as git, the rest as
    `ci-evals`; the folder they ran in."""
    last = printed.splitlines()[-1]
    assert last.startswith("next: "), printed
    for command in last.removeprefix("next: ").split(" && "):
        words = shlex.split(command)
        if words[0] == "cd":  # into the suite's folder: the rest runs there
            (folder,) = words[1:]
            here = here / folder
            continue
        if words[0] == "git":
            done = subprocess.run(words, cwd=here, capture_output=True, text=True, check=False)
        else:
            assert words[0] == "ci-evals", command
            done = cli(here, *words[1:])
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return here
