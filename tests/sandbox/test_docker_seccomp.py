"""The docker sandbox's seccomp profile: moby's default, vendored, minus reaching into others.

Docker's own default (20.10) lets a process ptrace another of its uid in the
container — a hidden test it is judged by, a CLI beside it. The pure tests
check the vendored file is moby's, byte for byte, and that the derived
profile differs from it in exactly the four denied names. The docker tests
attach with PTRACE_ATTACH and PTRACE_SEIZE to a sibling (started by another
exec) and to a child, in a real sandbox (EPERM) and, as the control that
shows the probe can see the attack, in a container under moby's unreduced
profile (attached).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.docker import engine, seccomp
from ci_evals.sandbox.docker.engine import DockerSandbox
from ci_evals.sandbox.registry import KINDS

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
# `git rev-parse v20.10.24:profiles/seccomp/default.json` in moby (tag commit 5d6db842238e)
MOBY_BLOB = "dbf1fa86f15145be72bb61eab4743268cd518143"

# argv[1]: the pid of a sibling (same uid, started by another exec). Each
# attach targets a fresh process; an attach that succeeds is detached again.
PROBE = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE, PTRACE_DETACH = 16, 0x4206, 17
def outcome(ret):
    if ret == 0:
        return "attached"
    return "EPERM" if ctypes.get_errno() == 1 else f"errno {ctypes.get_errno()}"
def child():
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    return pid
sibling = int(sys.argv[1])
for name, request in (("attach", PTRACE_ATTACH), ("seize", PTRACE_SEIZE)):
    kid = child()
    print(name, "child", outcome(libc.syscall(101, request, kid, 0, 0)))
    os.kill(kid, signal.SIGKILL)
    os.waitpid(kid, 0)
    ret = libc.syscall(101, request, sibling, 0, 0)
    print(name, "sibling", outcome(ret))
    if ret == 0:
        if request == PTRACE_ATTACH:
            os.waitpid(sibling, 0x40000000)  # __WALL: its attach stop
        libc.syscall(101, PTRACE_DETACH, sibling, 0, 0)
kid = child()
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
iov = Iov(ctypes.cast(buf, ctypes.c_void_p), 8)
for name, nr in (("process_vm_readv", 310), ("process_vm_writev", 311)):
    ret = libc.syscall(nr, kid, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0)
    print(name, "read" if ret >= 0 else outcome(ret))
ret = libc.syscall(438, os.pidfd_open(kid), 1, 0)
print("pidfd_getfd", "taken" if ret >= 0 else outcome(ret))
print("getpid", "ok" if libc.syscall(39) == os.getpid() else "broken")
os.kill(kid, signal.SIGKILL)
"""
# argv[1]: a sibling's pid. ptrace(PTRACE_ATTACH) through the other x86_64 ABIs,
# from machine code in an executable page: i386 (`int 0x80`, call 26) and x32
# (`syscall`, 0x40000000 | 521). The filter sees each ABI under its own arch
# token; a profile that named ptrace for x86_64 only would let these through.
PROBE_ABIS = r"""
import ctypes, mmap, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
sibling = int(sys.argv[1])
pid = struct.pack("<I", sibling)
I386 = (b"\x53\xb8\x1a\x00\x00\x00\xbb\x10\x00\x00\x00\xb9" + pid
        + b"\x31\xd2\x31\xf6\xcd\x80\x5b\x48\x63\xc0\xc3")
X32 = (b"\xb8\x09\x02\x00\x40\xbf\x10\x00\x00\x00\xbe" + pid
       + b"\x31\xd2\x45\x31\xd2\x0f\x05\xc3")
pages = []
def run(code):
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    pages.append(page)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return ctypes.CFUNCTYPE(ctypes.c_long)(address)()
for name, code in (("i386", I386), ("x32", X32)):
    ret = run(code)
    if ret == 0:
        os.waitpid(sibling, 0x40000000)  # __WALL: its attach stop
        libc.syscall(101, 17, sibling, 0, 0)  # PTRACE_DETACH
    print(name, "attached" if ret == 0 else "EPERM" if ret == -1 else f"errno {-ret}")
"""
# Leaves a same-uid process behind (as a server a test started would be) and says its pid.
SIBLING = "sleep 120 </dev/null >/dev/null 2>&1 & echo $!"

REFUSED = [
    "attach child EPERM",
    "attach sibling EPERM",
    "seize child EPERM",
    "seize sibling EPERM",
    "process_vm_readv EPERM",
    "process_vm_writev EPERM",
    "pidfd_getfd EPERM",
    "getpid ok",
]


def vendored() -> bytes:
    path = (
        resources.files("ci_evals.sandbox.docker")
        .joinpath("moby_seccomp")
        .joinpath(seccomp.VENDORED)
    )
    return path.read_bytes()


def test_the_vendored_profile_is_mobys_file_byte_for_byte() -> None:
    data = vendored()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
    assert blob == MOBY_BLOB


def _rules(profile: dict[str, Any]) -> list[tuple[str, str]]:
    """Each (rule without its names, name) pair: what a profile allows or refuses, and when."""
    pairs = []
    for rule in profile["syscalls"]:
        rest = json.dumps({k: v for k, v in rule.items() if k != "names"}, sort_keys=True)
        pairs += [(rest, name) for name in rule["names"]]
    return pairs


def test_the_derived_profile_differs_only_in_the_denied_names() -> None:
    moby = json.loads(vendored())
    ours = json.loads(seccomp.profile_json())
    assert {k: v for k, v in ours.items() if k != "syscalls"} == {
        k: v for k, v in moby.items() if k != "syscalls"
    }
    removed = [pair for pair in _rules(moby) if pair not in _rules(ours)]
    # ptrace twice (kernel >= 4.8; with CAP_SYS_PTRACE), the other three with CAP_SYS_PTRACE.
    assert sorted(name for _, name in removed) == sorted(
        ["ptrace", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"]
    )
    assert [pair for pair in _rules(ours) if pair not in _rules(moby)] == []
    allowing = [r for r in ours["syscalls"] if r["action"] == "SCMP_ACT_ALLOW"]
    assert not {name for r in allowing for name in r["names"]} & set(seccomp.DENIED)


def test_a_profile_that_allows_by_default_or_names_one_call_is_handled() -> None:
    with pytest.raises(seccomp.ProfileError, match="defaultAction is 'SCMP_ACT_ALLOW'"):
        seccomp.without_denied({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []})
    older = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "syscalls": [
            {"name": "ptrace", "action": "SCMP_ACT_ALLOW"},
            {"names": ["ptrace"], "action": "SCMP_ACT_LOG"},
            {"names": ["read", "pidfd_getfd"], "action": "SCMP_ACT_ALLOW"},
            {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO"},
        ],
    }
    assert seccomp.without_denied(older)["syscalls"] == [
        {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO"},  # refusing rules stay
    ]


def test_results_record_the_filter_of_each_sandbox_kind() -> None:
    assert KINDS.get("docker").limits().seccomp == seccomp.SUMMARY
    assert "ptrace" in (KINDS.get("bwrap").limits().seccomp or "")


@pytest.fixture
def box(tmp_path: Path, docker_image: str) -> Iterator[DockerSandbox]:
    spec = SandboxSpec(writable=(tmp_path,))
    with DockerSandbox(spec, image=docker_image, run_id="test-seccomp") as sandbox:
        yield sandbox


def _probe(box: DockerSandbox, probe: str = PROBE) -> list[str]:
    left = box.exec(["sh", "-c", SIBLING], cwd=box.workspace, env=ENV, timeout=30)
    assert left.returncode == 0, left.stderr
    sibling = left.stdout.decode().strip()
    done = box.exec(["python3", "-c", probe, sibling], cwd=box.workspace, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().splitlines()


@pytest.mark.docker
def test_no_process_in_the_sandbox_can_ptrace_another_of_its_uid(box: DockerSandbox) -> None:
    assert _probe(box) == REFUSED


@pytest.mark.docker
def test_the_i386_and_x32_abis_cannot_ptrace_either(box: DockerSandbox) -> None:
    assert _probe(box, PROBE_ABIS) == ["i386 EPERM", "x32 EPERM"]


@pytest.mark.docker
def test_a_command_graders_container_refuses_it_too(tmp_path: Path, docker_image: str) -> None:
    """Root inside with GRADER_CAPS: the code under test is another uid, the grader
    itself may trace nothing either (no CAP_SYS_PTRACE rule applies)."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "results").mkdir()
    spec = SandboxSpec(writable=(tmp_path / "ws",), grader_results=tmp_path / "results")
    with DockerSandbox(spec, image=docker_image) as sandbox:
        assert _probe(sandbox) == REFUSED


@pytest.mark.docker
def test_control_mobys_own_default_lets_the_probe_attach(docker_image: str) -> None:
    """The same probe under the unreduced vendored profile (what the engine applies
    without ours): ptrace attaches, so the refusals above are the profile's doing."""
    container = engine.client().containers.create(
        docker_image,
        command=["sleep", "infinity"],
        init=True,
        user="10001:10001",
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true", f"seccomp={vendored().decode()}"],
        labels={engine.LABEL: "1", engine.LABEL_OWNER: engine.owner_label()},
    )
    try:
        container.start()
        left = container.exec_run(["sh", "-c", SIBLING], user="10001:10001")
        sibling = left.output.decode().strip()
        done = container.exec_run(["python3", "-c", PROBE, sibling], user="10001:10001")
        assert done.exit_code == 0, done.output
        lines = done.output.decode().splitlines()
        abis = container.exec_run(["python3", "-c", PROBE_ABIS, sibling], user="10001:10001")
        assert abis.exit_code == 0, abis.output
        i386, x32 = abis.output.decode().splitlines()
    finally:
        container.remove(force=True, v=True)
    assert lines[:4] == [
        "attach child attached",
        "attach sibling attached",
        "seize child attached",
        "seize sibling attached",
    ]
    assert lines[4:] == REFUSED[4:]  # moby refuses these without CAP_SYS_PTRACE
    assert i386 == "i386 attached"
    # Let through by the filter: attached where the kernel has x32, else ENOSYS.
    assert x32 in ("x32 attached", "x32 errno 38")
