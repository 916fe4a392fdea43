"""Bounds on what one sandbox may take of the host: pids, memory, file size, disk.

bubblewrap and the host (`local`) have no limits of their own, so a fork,
memory or disk bomb in a stage would take the CI machine down. Every process a
`bwrap` or `local` sandbox starts goes through `launch.py`, which applies a
cgroup of its own where one can be made (cgroup v1 `pids` and `memory`, or a
delegated v2 subtree; emptied and removed at `close()`), rlimits as the floor
everywhere (RLIMIT_NPROC, RLIMIT_FSIZE, and RLIMIT_AS only without a cgroup; soft
= hard), and a checked quota on disk (`Quota`: a thread measures the writable
folders and kills everything the sandbox runs once they grew by more than
`disk_bytes`).

RLIMIT_NPROC counts every process of the *uid*, host processes included, and is
checked only in the forking process: the sandbox gets the uid's count when it
opens plus its `pids`, so the host's own processes are never throttled. The
kernel does not enforce it for root, which CI often is: there only the cgroup
bounds the pids. Each limit, its default and where it holds: docs/isolation.md
(*Limits*).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from ci_evals.sandbox import launch
from ci_evals.sandbox.base import Enforced, SandboxSpec

_V1_MEMORY = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")
_REMOVE_WAIT_S = 5.0


class Cgroup:
    """One sandbox's cgroup: a folder per hierarchy (v1) or one folder (v2)."""

    def __init__(self, folders: Sequence[Path], version: int) -> None:
        self.folders = tuple(folders)
        self.version = version

    @property
    def procs(self) -> list[str]:
        """The `cgroup.procs` files a process writes its pid to, to join."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                found.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
        return found

    def oom_kills(self) -> int:
        """How many of its processes the kernel killed at its memory limit: v2's
        `memory.events`, v1's `memory.oom_control` (its `oom_kill` line, Linux 4.13+)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                for line in (folder / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        return 0

    def kill(self) -> None:
        """SIGKILL everything in it, again while forks keep adding to it."""
        for _ in range(1000):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def remove(self) -> None:
        """Kill what is left and remove the folders (a dying task holds one a moment)."""
        self.kill()
        deadline = time.monotonic() + _REMOVE_WAIT_S
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.01)


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _mounts() -> dict[str, Path]:
    """Controller (or "" for the v2 hierarchy) -> where its hierarchy is mounted."""
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            if fields[2] == "cgroup2":
                found.setdefault("", Path(fields[1]))
            elif fields[2] == "cgroup":
                for option in fields[3].split(","):
                    found.setdefault(option, Path(fields[1]))
    return found


def _write(path: Path, value: int | str) -> None:
    path.write_text(f"{value}\n")


def create_cgroup(*, pids: int, memory_bytes: int) -> Cgroup | None:
    """A new cgroup below ours with `pids` and `memory_bytes` set, or None where we
    may not make one (no writable v1 hierarchies, no delegated v2 subtree)."""
    name = f"ci-evals-{uuid.uuid4().hex[:16]}"
    own, mounts = _own_cgroups(), _mounts()
    if "pids" in mounts and "memory" in mounts and "pids" in own and "memory" in own:
        made: list[Path] = []
        try:
            for controller in ("pids", "memory"):
                folder = mounts[controller] / own[controller].lstrip("/") / name
                folder.mkdir()
                made.append(folder)
            _write(made[0] / "pids.max", pids)
            _write(made[1] / _V1_MEMORY[0], memory_bytes)
            if (made[1] / _V1_MEMORY[1]).exists():  # no swap beyond the memory limit
                _write(made[1] / _V1_MEMORY[1], memory_bytes)
            return Cgroup(made, 1)
        except OSError:
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
    if "" in mounts and "" in own:
        folder = mounts[""] / own[""].lstrip("/") / name
        try:
            folder.mkdir()
        except OSError:
            return None
        try:
            offered = (folder / "cgroup.controllers").read_text().split()
            if "pids" not in offered or "memory" not in offered:
                raise OSError("pids or memory not delegated")
            _write(folder / "pids.max", pids)
            _write(folder / "memory.max", memory_bytes)
            with contextlib.suppress(OSError):
                _write(folder / "memory.swap.max", 0)
            return Cgroup([folder], 2)
        except OSError:
            with contextlib.suppress(OSError):
                folder.rmdir()
    return None


def uid_tasks(uid: int | None = None) -> int:
    """Tasks (threads) the uid runs now: what RLIMIT_NPROC is counted against."""
    uid = os.getuid() if uid is None else uid
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"{entry.path}/task"))
    return count


def rlimits(spec: SandboxSpec, *, baseline_tasks: int, cgroup: bool) -> dict[str, int]:
    """The rlimits `launch.py` sets for `spec` (names of the `resource` module).
    RLIMIT_AS only without a cgroup: with one, memory is bounded already, and an
    address-space limit fails correct programs that reserve much and use little
    (gcc's -fsanitize=address reserves terabytes of shadow memory at start)."""
    limits = {"RLIMIT_NPROC": baseline_tasks + spec.pids}
    if spec.address_space_bytes is not None and not cgroup:
        limits["RLIMIT_AS"] = spec.address_space_bytes
    if spec.disk_bytes is not None:
        limits["RLIMIT_FSIZE"] = spec.disk_bytes
    return limits


def enforced(spec: SandboxSpec, cgroup: Cgroup | None) -> Enforced:
    return Enforced(
        mechanism="rlimit" if cgroup is None else f"cgroup v{cgroup.version} + rlimit",
        pids=spec.pids,
        memory_bytes=None if cgroup is None else spec.memory_bytes,
        address_space_bytes=spec.address_space_bytes if cgroup is None else None,
        disk_bytes=spec.disk_bytes,
        seccomp=launch.SUMMARY,
    )


def tree_bytes(folders: Sequence[Path]) -> int:
    """What the folders take on disk or would take copied: per file the larger of
    its size and its allocated blocks (links not followed, errors passed over)."""
    total = 0
    todo = [str(folder) for folder in folders]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += max(info.st_size, info.st_blocks * 512)
    return total


class Quota:
    """Watches `folders` while open; calls `on_over` once they grew by more than `limit`."""

    def __init__(self, folders: Sequence[Path], limit: int, on_over: Callable[[], None]) -> None:
        # The workspace's root and the stage's cwd inside it are both mounts: count once.
        self._folders = tuple(f for f in folders if not any(o in f.parents for o in folders))
        self._limit = limit
        self._on_over = on_over
        self._start = tree_bytes(self._folders)
        self._stop = threading.Event()
        self.exceeded = False
        self._thread = threading.Thread(target=self._watch, name="sandbox-quota", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        wait = 0.2
        while not self._stop.wait(wait):
            began = time.monotonic()
            if tree_bytes(self._folders) - self._start > self._limit:
                self.exceeded = True
                self._on_over()
                return
            # A big tree is walked less often: the watch never takes more than ~10%.
            wait = max(0.2, 10 * (time.monotonic() - began))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
