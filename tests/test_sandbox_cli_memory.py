"""Code of the agent's cannot write the Claude CLI's memory through `/proc/<cli>/mem`.

The CLI and its Bash tool share a uid inside the sandbox and a seccomp filter
cannot see paths, so only the kernel's dumpable check keeps a same-uid process
out of `/proc/<cli>/mem` (docs/isolation.md, known limits). The CLI is started
the way the agent stage starts it (the sandbox's `spawn`, stream-json mode,
waiting on stdin); a probe in the same sandbox finds it by scanning /proc and
tries to open its memory for writing.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import claude_agent_sdk
import pytest

from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import BwrapSandbox, available
from ci_evals.sandbox.local import LocalSandbox

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
PYTHON = "/usr/bin/python3"
CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"

PROBE = """
import errno, os, time
def scan():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"/claude") and b"stream-json" in argv:
            yield pid
for _ in range(200):  # the CLI was just started: give it up to 20 s to appear
    if found := list(scan()):
        break
    time.sleep(0.1)
print("cli found" if found else "cli not found")
for pid in found:
    try:
        os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR))
        print("mem opened")
    except OSError as error:
        print("mem", errno.errorcode[error.errno])
"""


@pytest.fixture(params=["bwrap", "local"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BwrapSandbox | LocalSandbox]:
    if request.param == "bwrap" and (reason := available()) is not None:
        pytest.fail(reason)
    spec = SandboxSpec(writable=(tmp_path,), readonly=(CLI.resolve().parent,))
    with BwrapSandbox(spec) if request.param == "bwrap" else LocalSandbox(spec) as sandbox:
        yield sandbox


# The agent's Bash tool is a descendant of the CLI, in its PID namespace: so is
# the probe (forked first; the parent then becomes the CLI by exec).
LAUNCH = """
import os, sys, time
probe, out, cli = sys.argv[1], sys.argv[2], sys.argv[3:]
if os.fork() == 0:
    time.sleep(1)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.execv(sys.executable, [sys.executable, "-c", probe])
os.execv(cli[0], cli)
"""


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True, reason="open route: the CLI is dumpable (docs/isolation.md known limits)"
)
def test_a_descendant_of_the_cli_cannot_open_its_memory_for_writing(
    box: BwrapSandbox | LocalSandbox, tmp_path: Path
) -> None:
    out = tmp_path / "probe.out"
    cli = [str(CLI), "--print", "--verbose", "--input-format", "stream-json"]
    argv = [PYTHON, "-c", LAUNCH, PROBE, str(out), *cli, "--output-format", "stream-json"]
    spawn = box.spawn(argv, cwd=tmp_path, env=ENV)
    started = subprocess.Popen(
        spawn.argv,
        cwd=spawn.cwd,
        env=spawn.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while "\n" not in (out.read_text() if out.exists() else ""):
            assert time.monotonic() < deadline, "the probe wrote nothing in 30 s"
            time.sleep(0.1)
        time.sleep(0.5)  # the probe prints its verdicts right after the first line
        lines = out.read_text().splitlines()
        assert lines[0] == "cli found", lines
        assert lines[1:] and set(lines[1:]) <= {"mem EACCES", "mem EPERM"}, lines
    finally:
        started.kill()
        started.wait()
