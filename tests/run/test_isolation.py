"""`run/isolation.py`: which environment variables count as credentials, and the
commands run where bubblewrap cannot (refused with a credential in the
environment unless `--isolation none` is asked for; fine when nothing runs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ci_evals.agents.environment import secret_names
from tests.conftest import ExampleLayout
from tests.paths import REPO


def test_common_harmless_names_are_not_credentials() -> None:
    environ = {
        "XAUTHORITY": "/run/user/1000/gdm/Xauthority",
        "KEYTIMEOUT": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GPG_KEY": "7169605F62C751356D054A26A821E680E5FA6305",  # python images: a fingerprint
    }
    assert secret_names(environ) == []
    # ... while the real ones still count.
    assert secret_names(
        {"GPG_KEY": "-----BEGIN PGP PRIVATE KEY BLOCK-----", "PGPASSWORD": "x"}
    ) == [
        "GPG_KEY",
        "PGPASSWORD",
    ]


def _without_bwrap(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ci-evals ARGS` where bubblewrap cannot be found (a PATH with git alone), with a
    credential in the environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    git_path = shutil.which("git")
    assert git_path is not None
    if not (bin_dir / "git").exists():
        (bin_dir / "git").symlink_to(git_path)
    env = {
        "PATH": str(bin_dir),
        "PYTHONPATH": str(REPO),
        "HOME": str(tmp_path),
        "ANTHROPIC_API_KEY": "sk-ant-not-used",
    }
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_check_fixtures_without_bwrap_runs_when_nothing_needs_a_sandbox(
    labsmith: ExampleLayout, tmp_path: Path
) -> None:
    # Checks only (--no-reviewer): nothing runs a program, nothing to isolate.
    suite = str(labsmith.suite)
    done = _without_bwrap(tmp_path, "check-fixtures", "--suite", suite, "--no-reviewer",
                          "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "isolation" not in done.stderr


def test_check_fixtures_without_bwrap_names_a_flag_it_has(
    labsmith: ExampleLayout, tmp_path: Path
) -> None:
    suite = str(labsmith.suite)
    stub = labsmith.model()
    args = ("check-fixtures", "--suite", suite, "--model", stub)
    refused = _without_bwrap(tmp_path, *args, "--out", str(tmp_path / "out"))
    assert refused.returncode == 2, refused.stderr
    assert "cannot isolate the agent" in refused.stderr and "--isolation none" in refused.stderr
    unisolated = _without_bwrap(
        tmp_path, *args, "--isolation", "none", "--out", str(tmp_path / "out2")
    )
    assert unisolated.returncode == 0, unisolated.stderr
    assert "unisolated" in unisolated.stderr
