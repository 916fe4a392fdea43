"""The seccomp filter of `launch.py`, in the real `bwrap` and `local` sandboxes.

Code of the agent's shares a uid with the Claude CLI; without the filter it
takes the CLI's stdout with `pidfd_getfd` (and forges its final result),
ptraces it, or reads and writes its memory. Each call is made against a
sleeping child of the probe's own (same uid, same namespace): under the filter
every one fails with EPERM, and another ABI (x32) is refused too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import BwrapSandbox, available
from ci_evals.sandbox.launch import SeccompUnsupported, seccomp_program
from ci_evals.sandbox.local import LocalSandbox

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
PYTHON = "/usr/bin/python3"  # the system's, inside bwrap too (/usr is bound)

PROBE = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
iov = Iov(ctypes.cast(buf, ctypes.c_void_p), 8)
pidfd = os.pidfd_open(child)
calls = {
    "pidfd_getfd": (438, pidfd, 1, 0),
    "ptrace": (101, 16, child, 0, 0),  # PTRACE_ATTACH
    "process_vm_readv": (310, child, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0),
    "process_vm_writev": (311, child, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0),
    "x32 getpid": (39 | 0x40000000,),
}
for name, args in calls.items():
    ret = libc.syscall(*args)
    print(name, "EPERM" if ret == -1 and ctypes.get_errno() == 1 else f"returned {ret}")
print("getpid", "ok" if libc.syscall(39) == os.getpid() else "broken")
os.kill(child, signal.SIGKILL)
"""


@pytest.fixture(params=["bwrap", "local"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BwrapSandbox | LocalSandbox]:
    if request.param == "bwrap" and (reason := available()) is not None:
        pytest.fail(reason)
    spec = SandboxSpec(writable=(tmp_path,))
    with BwrapSandbox(spec) if request.param == "bwrap" else LocalSandbox(spec) as sandbox:
        yield sandbox


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe's numbers are x86_64's")
def test_reaching_into_another_process_is_refused(
    box: BwrapSandbox | LocalSandbox, tmp_path: Path
) -> None:
    result = box.exec([PYTHON, "-c", PROBE], cwd=tmp_path, env=ENV, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines() == [
        "pidfd_getfd EPERM",
        "ptrace EPERM",
        "process_vm_readv EPERM",
        "process_vm_writev EPERM",
        "x32 getpid EPERM",
        "getpid ok",
    ]


def test_an_unknown_machine_has_no_filter_and_no_sandbox() -> None:
    with pytest.raises(SeccompUnsupported, match="no seccomp filter for this machine"):
        seccomp_program("riscv64")
    assert seccomp_program("aarch64")  # known, with its own numbers
