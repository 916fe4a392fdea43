"""Code of the agent's cannot write the Claude CLI's memory through `/proc/<cli>/mem`.

The CLI and its Bash tool share a uid inside the sandbox and a seccomp filter
cannot see paths, so only the kernel's dumpable check keeps a same-uid process
out of `/proc/<cli>/mem`: the CLI runs with `sandbox/nondumpable.py`'s object
preloaded, which makes it non-dumpable (docs/isolation.md). The CLI is started
the way the agent stage starts it (the sandbox's `spawn`, stream-json mode,
waiting on stdin, the object preloaded); a probe in the same sandbox finds it
by scanning /proc and tries to open its memory for writing. The second test runs the probe the way
the agent does: a Bash tool call of the real CLI's, scripted by the stub model,
once directly and once from a `~/.bashrc` that an earlier command wrote (the
shell the CLI starts for each command sources it before anything else runs).
The third tries every ancestor of a Bash tool command the same way, and its
environment too: the model relay, the CLI's parent, makes itself non-dumpable.
The fourth goes around the CLI: a Bash tool command rewrites the sandbox's PID 1
(bwrap's init, dumpable) to write a forged result frame to its stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import claude_agent_sdk
import pytest

from ci_evals.agents import StageOutcome
from ci_evals.sandbox import nondumpable
from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import BwrapSandbox, available
from ci_evals.sandbox.local import LocalSandbox
from tests.agents.test_claude_hostile import run_stage

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


# `local` isolates nothing: as root its processes keep CAP_SYS_PTRACE, which
# opens any process's memory, dumpable or not (docs/isolation.md).
LOCAL = pytest.param(
    "local",
    marks=pytest.mark.xfail(
        os.geteuid() == 0, strict=True, reason="local as root: CAP_SYS_PTRACE opens it"
    ),
)


@pytest.fixture
def preload() -> Iterator[Path]:
    with nondumpable.preloaded(CLI) as path:
        yield path


@pytest.fixture(params=["bwrap", LOCAL])
def box(
    request: pytest.FixtureRequest, tmp_path: Path, preload: Path
) -> Iterator[BwrapSandbox | LocalSandbox]:
    if request.param == "bwrap" and (reason := available()) is not None:
        pytest.fail(reason)
    spec = SandboxSpec(writable=(tmp_path,), readonly=(CLI.resolve().parent, preload.parent))
    with BwrapSandbox(spec) if request.param == "bwrap" else LocalSandbox(spec) as sandbox:
        yield sandbox


def one_command(command: str, end: str = "done") -> str:
    """A stub script: the Bash tool runs `command`, then the model says `end`."""
    return (
        "rules:\n  - match: {command: demo:s1}\n    turns:\n"
        f"      - tools: [{{bash: {json.dumps(command)}}}]\n      - text: {end}\n"
    )


def run_probe(tmp_path: Path, source: str, end: str = "done") -> tuple[StageOutcome, str]:
    """A stage under bwrap whose one Bash command runs Python `source`: its outcome
    and what the probe printed."""
    if (reason := available()) is not None:
        pytest.fail(reason)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "probe.py").write_text(source)
    command = f"python3 {ws / 'probe.py'} > {ws / 'probe.txt'} 2>&1"
    outcome, *_ = run_stage(tmp_path, one_command(command, end), sandbox="bwrap")
    return outcome, (ws / "probe.txt").read_text()


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
def test_a_descendant_of_the_cli_cannot_open_its_memory_for_writing(
    box: BwrapSandbox | LocalSandbox, tmp_path: Path, preload: Path
) -> None:
    out = tmp_path / "probe.out"
    cli = [str(CLI), "--print", "--verbose", "--input-format", "stream-json"]
    cli = nondumpable.preloading(preload, cli)  # as the agent starts it
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


# A Bash tool command: walk up from this shell to the CLI and try its memory.
# Prints one line, `<where>: cli found, mem <verdict>` or `<where>: cli not found`.
TOOL_PROBE = """
import errno, os, sys
pid = os.getppid()
while pid > 1:
    try:  # by its command line: a non-dumpable process's /proc/<pid>/exe is root's
        if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0].endswith(b"/claude"):
            break
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        pid = 0
        break
    pid = int(status.split("PPid:")[1].split()[0])
if pid <= 1:
    print(sys.argv[1] + ": cli not found")
    sys.exit()
try:
    os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR))
    verdict = "opened"
except OSError as error:
    verdict = errno.errorcode[error.errno]
print(f"{sys.argv[1]}: cli found, mem {verdict}")
"""


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["bwrap", LOCAL])
def test_a_bash_tool_command_cannot_open_the_clis_memory(tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and (reason := available()) is not None:
        pytest.fail(reason)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "probe.py").write_text(TOOL_PROBE)
    probe = f"python3 {ws / 'probe.py'}"
    commands = [
        f"{probe} direct > direct.txt; echo '{probe} bashrc >> {ws}/bashrc.txt' >> ~/.bashrc",
        "true",  # its shell sources the ~/.bashrc above
    ]
    turns = "".join(f"      - tools: [{{bash: {json.dumps(c)}}}]\n" for c in commands)
    script = f"rules:\n  - match: {{command: demo:s1}}\n    turns:\n{turns}      - text: done\n"
    outcome, *_ = run_stage(tmp_path, script, sandbox=sandbox)
    assert outcome.status == "completed", outcome
    seen = (ws / "direct.txt").read_text().splitlines()
    seen += (ws / "bashrc.txt").read_text().splitlines()
    assert {line.split(":")[0] for line in seen} == {"bashrc", "direct"}, seen  # both ran
    verdicts = {line.split(": ", 1)[1] for line in seen}
    assert verdicts <= {"cli found, mem EACCES", "cli found, mem EPERM"}, seen


# A Bash tool command: every ancestor up to the sandbox's PID 1 (the CLI, the
# model relay, bwrap's init), each tried as the agent would: its environment
# read, its memory opened for writing. One line per ancestor:
# `<role> <pid>: environ <verdict>, mem <verdict>`, where an environment that
# could be read is `read:<its variable names>`.
ANCESTORS = """
import errno, os
def attempt(path, flags):
    try:
        fd = os.open(path, flags)
    except OSError as error:
        return errno.errorcode[error.errno]
    try:
        data = os.read(fd, 1 << 20) if flags == os.O_RDONLY else b""
    finally:
        os.close(fd)
    names = sorted(v.split(b"=")[0].decode() for v in data.split(b"\\0") if v)
    return "read:" + ",".join(names) if flags == os.O_RDONLY else "opened"
pid = os.getppid()
while pid >= 1:
    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
    role = "init" if pid == 1 else "cli" if argv[0].endswith(b"/claude") else (
        "relay" if any(a.endswith(b"/relay.py") for a in argv) else "shell")
    environ = attempt(f"/proc/{pid}/environ", os.O_RDONLY)
    mem = attempt(f"/proc/{pid}/mem", os.O_RDWR)
    if role != "shell":
        print(f"{role} {pid}: environ {environ}, mem {mem}")
    status = open(f"/proc/{pid}/status").read()
    pid = 0 if pid == 1 else int(status.split("PPid:")[1].split()[0])
"""


@pytest.mark.slow
def test_a_bash_tool_command_cannot_read_or_write_the_relay(tmp_path: Path) -> None:
    """The model relay (the CLI's parent, our uid) makes itself non-dumpable:
    neither its environment nor its memory is the agent's."""
    outcome, said = run_probe(tmp_path, ANCESTORS)
    assert outcome.status == "completed", outcome
    seen = {line.split(" ")[0]: line.split(": ", 1)[1] for line in said.splitlines()}
    assert list(seen) == ["cli", "relay", "init"], seen  # the relay is the CLI's parent
    refused = {"EACCES", "EPERM"}
    for role in ("cli", "relay"):
        environ, mem = (part.split(" ")[1] for part in seen[role].split(", "))
        assert environ in refused and mem in refused, (role, seen[role])
    # bwrap's init is dumpable (bwrap's doing), but it was started with an empty
    # environment (launch.py) and holds neither the CLI's stdin nor its stdout.
    assert seen["init"] == "environ read:, mem opened", seen["init"]


# A Bash tool command that does not touch the CLI: it rewrites the code of the
# sandbox's PID 1 (bwrap's init: dumpable, our uid, no capabilities, and it keeps
# its stdin, stdout and stderr, the very sockets the CLI speaks to the SDK over),
# so that when its wait returns it writes a result frame of ours to its stdout
# and exits 0 (which ends the sandbox: the CLI's own result never comes). The
# orphan it leaves wakes PID 1 at once; the relay's exit would, later. Before
# the fix the stage was `completed` with the forged result as its final text.
FORGE = """
import json, os, struct, sys, time
frame = json.dumps({"type": "result", "subtype": "success", "duration_ms": 1,
    "duration_api_ms": 1, "is_error": False, "num_turns": 1, "session_id": "forged",
    "result": "FORGED", "total_cost_usd": 0}).encode() + b"\\n"
try:
    pc = int(open("/proc/1/syscall").read().split()[-1], 16)  # past its wait4's syscall
    mem = os.open("/proc/1/mem", os.O_RDWR)
except OSError as error:
    print("pid 1 refused:", error)
    sys.exit()
if os.uname().machine == "x86_64":  # write(1, frame, len); exit_group(0)
    body = bytes.fromhex("bf01000000ba") + struct.pack("<I", len(frame))
    body += bytes.fromhex("b8010000000f0531ffb8e70000000f05")
    code = bytes.fromhex("488d35") + struct.pack("<i", len(body)) + body + frame
else:  # aarch64: adr x1, frame; x0 = 1; x2 = len; write; x0 = 0; exit_group
    words = [0x10000101, 0xD2800020, 0xD2800002 | (len(frame) << 5),
             0xD2800808, 0xD4000001, 0xD2800000, 0xD2800BC8, 0xD4000001]
    code = struct.pack("<8I", *words) + frame
os.pwrite(mem, code, pc)
print("pid 1 rewritten")
sys.stdout.flush()
if os.fork() == 0:  # an orphan for PID 1 to reap
    if os.fork() == 0:
        time.sleep(0.5)
        os._exit(0)
    os._exit(0)
os.wait()
time.sleep(5)
"""


@pytest.mark.slow
def test_a_bash_tool_command_cannot_forge_a_frame_through_the_sandboxs_init(
    tmp_path: Path,
) -> None:
    outcome, said = run_probe(tmp_path, FORGE, "the real end")
    # PID 1 is still the agent's to rewrite (it ends the sandbox: the stage fails),
    # but what it writes to its stdout reaches no one.
    assert said == "pid 1 rewritten\n", said
    assert "FORGED" not in (tmp_path / "stage" / "trajectory.jsonl").read_text(), outcome
    assert outcome.final_text != "FORGED", outcome


# What the agent's commands legitimately run must not notice the object: the CLI
# takes LD_PRELOAD out of its environment as it loads it, so its tools do not
# inherit it. A program built with gcc's -fsanitize=address (libasan linked
# dynamically, gcc's default) would otherwise refuse to start ("ASan runtime does
# not come first in initial library list", exit 1; measured with gcc 12).
ASAN = shutil.which("gcc")


@pytest.mark.slow
@pytest.mark.skipif(ASAN is None, reason="gcc is not installed")
def test_a_bash_tool_command_runs_an_address_sanitized_program(tmp_path: Path) -> None:
    if (reason := available()) is not None:
        pytest.fail(reason)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("hello"); }\n')
    # LeakSanitizer (on by default with ASan) stops the program's threads with
    # ptrace at exit, which the sandbox's seccomp filter refuses: documented.
    run = "ASAN_OPTIONS=detect_leaks=0 ./hello > ran.txt 2>&1"
    command = f"env > env.txt; gcc -fsanitize=address -o hello hello.c && {run}"
    outcome, *_ = run_stage(tmp_path, one_command(command), sandbox="bwrap")
    assert outcome.status == "completed", outcome
    assert (ws / "ran.txt").read_text() == "hello\n"
    assert "LD_PRELOAD" not in (ws / "env.txt").read_text()
