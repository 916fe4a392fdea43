"""On the host, between ci-evals and a sandboxed program: its cgroup, its limits, its reaper,
and the arguments that must stay off every command line.

    python3 -I -S launch.py SPEC

SPEC names a JSON file in the sandbox's private folder (mode 0700), removed once
read: `cgroup_procs` to join first, `rlimits` (set soft = hard), `pid_file` (where
the reaper writes `PID STARTTIME`, so a reused pid is never mistaken for it),
`argv` and `env` (exactly that environment), `args` (more arguments for `argv[0]`
through a memfd, `--args FD`, off every command line) and `stdio_above` (the real
stdin and stdout as descriptors 3 and 4, `STDIN_AT`/`STDOUT_AT`, for bubblewrap
to take back: its init keeps descriptors 0-2 for the sandbox's life).

The program runs under a seccomp filter (`_deny_reach_into_others`); this process
stays its grandparent, dies with ci-evals, and its reaper (a child subreaper in a
session of its own) SIGKILLs every descendant when the program ends. Why each of
these: docs/isolation.md (the sandbox kinds, Limits, and what the agent can still do).

Standard library only, no ci_evals imports (run by the host's interpreter with
`-I -S`, nothing of the environment or site-packages).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Where the program finds its real stdin and stdout with `stdio_above`.
STDIN_AT, STDOUT_AT = 3, 4
_KILL_ROUNDS = 2000  # a fork loop re-parented to us converges in a few rounds


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


# struct sock_filter opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_X32_SYSCALL_BIT = 0x40000000
# machine: (AUDIT_ARCH_*, ptrace, process_vm_readv, process_vm_writev, pidfd_getfd)
_ARCHES = {
    "x86_64": (0xC000003E, (101, 310, 311, 438)),
    "aarch64": (0xC00000B7, (117, 270, 271, 438)),
}


# What results.json records as the filter a bwrap or local sandbox's processes ran under.
SUMMARY = (
    "ci-evals launch.py: ptrace, process_vm_readv, process_vm_writev, pidfd_getfd "
    "and any x32 call EPERM, another ABI killed"
)


class SeccompUnsupported(RuntimeError):
    """No filter for this machine: nothing may start without one."""


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program (code, jt, jf, k) that denies reaching into another process."""
    if machine not in _ARCHES:
        raise SeccompUnsupported(
            f"no seccomp filter for this machine ({machine!r}; known: {', '.join(_ARCHES)}): "
            "ci-evals does not start a sandbox without one"
        )
    arch, denied = _ARCHES[machine]
    checks: list[tuple[int, int, int, int]] = []
    if machine == "x86_64":
        checks.append((_JSET_K, 0, 0, _X32_SYSCALL_BIT))  # jt patched below
    checks += [(_JEQ_K, 0, 0, nr) for nr in denied]
    program = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI: its numbers mean other calls
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    for index, (code, _, _, k) in enumerate(checks):
        # to the EPERM return, after the remaining checks and the ALLOW return
        program.append((code, len(checks) - index, 0, k))
    program += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]
    return program


def _deny_reach_into_others() -> None:
    """Apply `seccomp_program` to this process and all it will start (no undo)."""
    program = seccomp_program(os.uname().machine)

    class SockFilter(ctypes.Structure):
        _fields_ = (
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint),
        )

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter)))

    filters = (SockFilter * len(program))(*(SockFilter(*row) for row in program))
    fprog = SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    mode = ctypes.c_ulong(_SECCOMP_MODE_FILTER)
    if libc.prctl(_PR_SET_SECCOMP, mode, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _write_pid(path: str | None) -> None:
    if path:
        pid = os.getpid()
        Path(path).write_text(f"{pid} {start_time(pid)}\n")


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _reap_all() -> bool:
    """Reap every exited child; False when there are none left at all."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _kill_descendants() -> None:
    """SIGKILL everything below us until nothing is left (orphans come back to us)."""
    me = os.getpid()
    for _ in range(_KILL_ROUNDS):
        for pid in _descendants(me):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not _reap_all():
            return
        time.sleep(0.001)


class _Signalled(Exception):
    pass


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Signalled


def _exit_like(status: int) -> None:
    """Leave the way a child with wait status `status` did."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _detach_stdio() -> None:
    """Let go of stdin/stdout/stderr: only the program may hold them (EOF when it ends)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _exec(spec: dict[str, Any]) -> None:
    # Python ignores SIGPIPE and SIGXFSZ; the program gets the defaults, as from
    # subprocess (`yes | head` ends quietly, a write past RLIMIT_FSIZE kills).
    for signum in (*_STOP_SIGNALS, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    argv: list[str] = spec["argv"]
    env: dict[str, str] = spec["env"]
    if spec.get("stdio_above"):  # before anything else takes descriptor 3 or 4
        os.dup2(0, STDIN_AT)
        os.dup2(1, STDOUT_AT)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
    if spec.get("args") is not None:
        fd = os.memfd_create("ci-evals-args", 0)  # not close-on-exec: bwrap reads it
        os.write(fd, b"".join(arg.encode() + b"\0" for arg in spec["args"]))
        os.lseek(fd, 0, os.SEEK_SET)
        argv = [argv[0], "--args", str(fd), *argv[1:]]
    try:
        _deny_reach_into_others()
    except (OSError, SeccompUnsupported) as exc:
        print(
            f"ci-evals: cannot apply the sandbox's seccomp filter: {exc}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(127)
    try:
        os.execvpe(argv[0], argv, env)  # noqa: S606 - an argv, never a shell
    except OSError as exc:
        print(f"ci-evals: cannot run {argv[0]}: {exc}", file=sys.stderr, flush=True)
        os._exit(127)


def _reaper(spec: dict[str, Any], parent: int) -> None:
    os.setsid()  # out of the caller's process group: its group SIGKILL ends only our parent
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _stop)
    _write_pid(spec.get("pid_file"))
    status = 1 << 8  # exit 1, unless the program's own status arrives
    try:
        if os.getppid() != parent:  # it died before PDEATHSIG was armed
            raise _Signalled
        program = os.fork()
        if program == 0:
            _exec(spec)
        _detach_stdio()
        while True:
            pid, got = os.waitpid(-1, 0)
            if pid == program:
                status = got
                break
    except (_Signalled, ChildProcessError):
        status = signal.SIGKILL  # as if killed: what a stopped program's caller sees
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    _kill_descendants()
    _exit_like(status)


def main(argv: list[str]) -> None:
    spec_path = Path(argv[1])
    spec: dict[str, Any] = json.loads(spec_path.read_text())
    spec_path.unlink()
    for procs in spec.get("cgroup_procs", ()):
        Path(procs).write_text(f"{os.getpid()}\n")
    for name, value in spec.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (value, value))
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a stop signal simply ends us: the reaper acts
    caller = os.getppid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # as bwrap's --die-with-parent
    if os.getppid() != caller:
        os._exit(1)
    parent = os.getpid()
    reaper = os.fork()
    if reaper == 0:
        try:
            _reaper(spec, parent)
        finally:
            os._exit(1)
    _detach_stdio()
    _, status = os.waitpid(reaper, 0)
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
