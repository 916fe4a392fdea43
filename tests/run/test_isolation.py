"""`run/isolation.py`: which environment variables count as credentials, and the
commands run where bubblewrap cannot (refused with a credential in the
environment unless `--isolation none` is asked for; fine when nothing runs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


# -- in GitHub Actions the suite may not turn isolation off ------------------------

GRADER = "    graders: [{id: ok, command: [test, -f, research/company.md]}]\n"


def _suite_without_isolation(layout: ExampleLayout, sandbox: str) -> None:
    text = layout.suite.read_text()
    text = text.replace("stage_map: stage_map.yaml\n", f"stage_map: stage_map.yaml\n{sandbox}\n")
    layout.suite.write_text(
        text.replace(
            "    limits: { max_turns: 20 }\n", "    limits: { max_turns: 20 }\n" + GRADER, 1
        )
    )


def _ci_evals(cwd: Path, *args: str, actions: bool) -> subprocess.CompletedProcess[str]:
    """`ci-evals ARGS`, in a GitHub Actions job's environment or not (and no credential)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd.parent)}
    if actions:
        env["GITHUB_ACTIONS"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "ci_evals", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("sandbox", ["sandbox: none", "sandbox: {kind: local}"])
def test_a_suite_turning_isolation_off_is_refused_in_actions(
    labsmith: ExampleLayout, sandbox: str
) -> None:
    _suite_without_isolation(labsmith, sandbox)
    for args in (
        ("run", "--model", labsmith.model(), "--from-stage", "5"),
        ("check-fixtures", "--no-reviewer", "--stage", "research-company"),
    ):
        done = _ci_evals(labsmith.root, *args, actions=True)
        assert done.returncode == 2, done.stderr
        [line] = [x for x in done.stderr.splitlines() if "nothing was started" not in x]
        assert "ci-evals.yaml:9:" in line and "sandbox:" in line, line
        assert "refused in GitHub Actions" in line and "--isolation none" in line, line
        assert "Traceback" not in done.stderr
    assert not (labsmith.root / ".ci-evals").exists()


def test_the_workflow_may_still_ask_for_no_isolation(labsmith: ExampleLayout) -> None:
    _suite_without_isolation(labsmith, "sandbox: none")
    args = ("check-fixtures", "--no-reviewer", "--stage", "research-company")
    asked = _ci_evals(labsmith.root, *args, "--isolation", "none", actions=True)
    assert asked.returncode == 0, asked.stderr
    assert "unisolated" in asked.stderr
    # Outside Actions the suite's choice stands, with its warning.
    local = _ci_evals(labsmith.root, *args, "--out", ".ci-evals/two", actions=False)
    assert local.returncode == 0, local.stderr
    assert "unisolated" in local.stderr


def test_actions_never_fall_back_to_the_host(labsmith: ExampleLayout, tmp_path: Path) -> None:
    # bubblewrap missing and no credential: outside Actions the host stands in (a
    # warning); in a GitHub Actions job only --isolation none runs unisolated.
    text = labsmith.suite.read_text()
    labsmith.suite.write_text(
        text.replace(
            "    limits: { max_turns: 20 }\n", "    limits: { max_turns: 20 }\n" + GRADER, 1
        )
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git_path = shutil.which("git")
    assert git_path is not None
    (bin_dir / "git").symlink_to(git_path)
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "ci_evals", "check-fixtures", "--no-reviewer"]
    argv += ["--stage", "research-company"]
    outside = subprocess.run(
        argv, cwd=labsmith.root, env=env, capture_output=True, text=True, check=False
    )
    assert outside.returncode == 0, outside.stderr
    env["GITHUB_ACTIONS"] = "true"
    refused = subprocess.run(
        argv, cwd=labsmith.root, env=env, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2, refused.stderr
    assert "in GitHub Actions it runs unisolated only when the command line says so" in (
        refused.stderr
    )


# -- the shard key is a credential, held or not ------------------------------------

SHARD_KEY = "k" * 8 + "0123456789abcdef0123456789abcdef"


def _run_with_the_key(
    layout: ExampleLayout, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`ci-evals run ARGS` on the stub with `CI_EVALS_SHARD_KEY` the one secret, where
    bubblewrap cannot run (`bwrap` on PATH fails as a restricted user namespace does)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    (bin_dir / "bwrap").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "HOME": str(tmp_path),
        "CI_EVALS_SHARD_KEY": SHARD_KEY,
    }
    argv = [sys.executable, "-m", "ci_evals", "run", "--model", layout.model()]
    argv += ["--from-stage", "5", "--shard", "1/1", "--out", str(tmp_path / "out"), *args]
    return subprocess.run(
        argv, cwd=layout.root, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_shard_key_is_a_credential_where_bwrap_cannot_run(
    labsmith: ExampleLayout, tmp_path: Path
) -> None:
    # `run` takes the key out of its environment first; the host must still not stand
    # in for the sandbox ("no credential is at stake" was the key's to read).
    done = _run_with_the_key(labsmith, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "cannot isolate the agent" in done.stderr, done.stderr
    assert "CI_EVALS_SHARD_KEY would be readable" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and SHARD_KEY not in done.stderr
    assert not (tmp_path / "out").exists()


def test_no_isolation_is_refused_while_the_shard_key_is_set(
    labsmith: ExampleLayout, tmp_path: Path
) -> None:
    done = _run_with_the_key(labsmith, tmp_path, "--isolation", "none")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "CI_EVALS_SHARD_KEY is set" in line and "--isolation none" in line, line
    assert not (tmp_path / "out").exists()


def test_the_shard_key_counts_by_the_one_rule_for_credentials() -> None:
    assert secret_names({"CI_EVALS_SHARD_KEY": SHARD_KEY, "HOME": "/root"}) == [
        "CI_EVALS_SHARD_KEY"
    ]
