"""`run/environ_block.py` through `shard_mac.take_key`, in a real process: once the key is
taken, another process of the same user reading `/proc/<pid>/environ` sees none of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO

KEY = "k" * 8 + "0123456789abcdef0123456789abcdef"

# Takes the key as `run` does, says so, then waits to be read (and starts a child).
HOLDER = """
import os, subprocess, sys
from ci_evals.run import shard_mac
held = shard_mac.take_key(os.environ)
assert held is not None
child = subprocess.Popen(["sleep", "60"])
print(child.pid, flush=True)
sys.stdin.readline()
child.kill()
"""


def test_a_taken_key_is_not_in_proc_environ_of_the_process_or_its_child(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "CI_EVALS_SHARD_KEY": KEY}
    env["BEFORE"] = "kept"  # a variable on either side of it stays readable
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], env={**env, "AFTER": "kept too"}, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        child = int(holder.stdout.readline())
        for pid in (holder.pid, child):
            shown = Path(f"/proc/{pid}/environ").read_bytes()
            assert KEY.encode() not in shown, pid
            assert b"CI_EVALS_SHARD_KEY" not in shown, pid
        entries = Path(f"/proc/{holder.pid}/environ").read_bytes().split(b"\0")
        assert b"BEFORE=kept" in entries and b"AFTER=kept too" in entries
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()


# Takes the environment as `run` does, checks the credentials are still in os.environ
# (the proxy reads the key there) and in what the run reads, then waits to be read.
KEEPER = """
import os, sys
from ci_evals.run import process_environment
started = process_environment.take(os.environ)
assert started.shard_key is None  # none given
assert started.variables["ANTHROPIC_API_KEY"] == "sk-ant-kept-0001"
assert os.environ["ANTHROPIC_API_KEY"] == "sk-ant-kept-0001"
assert os.environ["ANTHROPIC_AUTH_TOKEN"] == "token-kept-0002"
assert os.environ["GITHUB_TOKEN"] == "ghp_kept0003"
print("ready", flush=True)
sys.stdin.readline()
"""


def test_the_model_key_and_other_credentials_leave_proc_environ_but_stay_usable(
    tmp_path: Path,
) -> None:
    secrets = {
        "ANTHROPIC_API_KEY": "sk-ant-kept-0001",
        "ANTHROPIC_AUTH_TOKEN": "token-kept-0002",
        "GITHUB_TOKEN": "ghp_kept0003",
    }
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "BEFORE": "kept", **secrets}
    holder = subprocess.Popen(
        [sys.executable, "-c", KEEPER], env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == "ready\n"
        shown = Path(f"/proc/{holder.pid}/environ").read_bytes()
        for name, value in secrets.items():
            assert value.encode() not in shown and name.encode() not in shown, name
        assert b"BEFORE=kept" in shown.split(b"\0")
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
