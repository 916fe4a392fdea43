"""The host side of `launch.py`: one sandbox's launch specs, pid files, cgroup, rlimits, quota.

`bwrap` and `local` start every process through `launch.py` (`argv()`): the
spec — argv, environment, the arguments bubblewrap reads from a memfd, the
limits — goes into a file in a private folder (0700), never onto a command
line; it runs under launch.py's seccomp filter (no ptrace, process_vm_*,
pidfd_getfd), on a machine the filter knows or not at all. `close()` (and
the quota, when the writable folders grew too much) ends
everything launched: SIGTERM to each launched process still alive (a reaper
then kills its whole tree; bubblewrap's namespace dies with it), SIGKILL to
what is left, then the cgroup's members.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci_evals.sandbox.base import Enforced, SandboxSpec
from ci_evals.sandbox.launch import seccomp_program, start_time
from ci_evals.sandbox.limits import Quota, create_cgroup, enforced, rlimits, uid_tasks

LAUNCH_SCRIPT = Path(__file__).with_name("launch.py")
_STOP_WAIT_S = 5.0


class Launcher:
    """Launch specs and the limits of one sandbox; `close()` ends what it launched."""

    def __init__(self, spec: SandboxSpec) -> None:
        # Fail closed, before anything is made: no sandbox runs without the filter
        # (SeccompUnsupported, one line naming the machine).
        seccomp_program(os.uname().machine)
        self.folder = Path(tempfile.mkdtemp(prefix="ci-evals-launch-"))  # mode 0700
        self.cgroup = create_cgroup(pids=spec.pids, memory_bytes=spec.memory_bytes)
        self.rlimits = rlimits(spec, baseline_tasks=uid_tasks(), cgroup=self.cgroup is not None)
        self.enforced: Enforced = enforced(spec, self.cgroup)
        self.quota: Quota | None = None
        self._oom_kills = 0  # read before the cgroup is removed (`close`)
        if spec.disk_bytes is not None:
            self.quota = Quota(spec.writable, spec.disk_bytes, self.stop_all)

    @property
    def over_quota(self) -> bool:
        """The writable folders grew by more than `disk_bytes`: everything was killed."""
        return self.quota is not None and self.quota.exceeded

    @property
    def memory_killed(self) -> int | None:
        """The memory limit (bytes) if the kernel killed a process of ours at it."""
        if self.cgroup is not None and not self._oom_kills:
            self._oom_kills = self.cgroup.oom_kills()
        return self.enforced.memory_bytes if self._oom_kills else None

    def argv(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        args: Sequence[str] | None = None,
        stdio_above: bool = False,
    ) -> list[str]:
        """The host argv that runs `argv` with exactly `env` (see launch.py); start it with
        any environment. `args` reach `argv[0]` through `--args FD`; `stdio_above`
        hands it /dev/null as stdin and stdout, the real ones as descriptors 3 and 4.
        Refused (OSError) once the quota was exceeded: nothing more runs in this sandbox."""
        if self.over_quota:
            raise OSError("the sandbox's folders grew past its disk quota: nothing more runs")
        token = uuid.uuid4().hex
        spec = {
            "argv": list(argv),
            "env": dict(env),
            "args": None if args is None else list(args),
            "stdio_above": stdio_above,
            "rlimits": self.rlimits,
            "cgroup_procs": [] if self.cgroup is None else self.cgroup.procs,
            "pid_file": str(self.folder / f"{token}.pid"),
        }
        path = self.folder / f"{token}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(spec, file)
        return [sys.executable, "-I", "-S", str(LAUNCH_SCRIPT), str(path)]

    def wait(self, argv: Sequence[str]) -> None:
        """Wait until what `argv` (from `argv()`) launched is gone: after its caller's
        process ended, its reaper may still be killing what it left."""
        pid_file = Path(argv[-1]).with_suffix(".pid")
        deadline = time.monotonic() + _STOP_WAIT_S
        while (left := self.launched([pid_file])) and time.monotonic() < deadline:
            time.sleep(0.005)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def launched(self, pid_files: Sequence[Path] | None = None) -> list[int]:
        """Reapers still alive (a pid file whose start time still matches)."""
        alive: list[int] = []
        if pid_files is None:
            try:  # a list now: the folder may go while we look (close() from another thread)
                pid_files = list(self.folder.glob("*.pid"))
            except FileNotFoundError:
                return alive
        for pid_file in pid_files:
            with contextlib.suppress(OSError, ValueError):
                pid_text, started = pid_file.read_text().split()
                pid = int(pid_text)
                if start_time(pid) == started and not _is_zombie(pid):
                    alive.append(pid)
                    continue
                pid_file.unlink()
        return alive

    def stop_all(self) -> None:
        """End everything launched: SIGTERM (a reaper kills its tree), then SIGKILL."""
        for pid in self.launched():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_WAIT_S
        while (left := self.launched()) and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    def close(self) -> None:
        """Stop the quota, end everything launched, remove the cgroup and the folder."""
        if self.quota is not None:
            self.quota.close()
        self.stop_all()
        if self.cgroup is not None:
            self._oom_kills = self._oom_kills or self.cgroup.oom_kills()  # while it is there
            self.cgroup.remove()
        shutil.rmtree(self.folder, ignore_errors=True)


class Launched:
    """What a sandbox that starts its processes through a `Launcher` tells its callers."""

    _launcher: Launcher

    @property
    def enforced(self) -> Enforced:
        """The limits this sandbox holds its processes to."""
        return self._launcher.enforced

    @property
    def over_quota(self) -> bool:
        """The writable folders grew past `disk_bytes`: everything it ran was killed."""
        return self._launcher.over_quota

    @property
    def memory_killed(self) -> int | None:
        """Its memory limit in bytes, once the kernel killed a process at it (`MemoryWatch`)."""
        return self._launcher.memory_killed


def _is_zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    return True
