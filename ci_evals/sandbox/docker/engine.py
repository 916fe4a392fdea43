"""The `docker` sandbox: a fresh container per sandbox, from the task's image.

What the code inside gets (it may be hostile): the image's file system
read-only, a capped `/tmp` of its own, the workspace at `/workspace`; no network
unless the suite opts in (`kind.DockerOptions`); CPU, memory and pids limits; a
non-root user (`SANDBOX_UID` when ci-evals is root); no capabilities,
`no-new-privileges`, a seccomp profile without the calls that reach into another
process (`seccomp`); an init as PID 1. Labels (`LABEL`, the run id, the owning
process) let `ci-evals gc` find what a crash left; `close()` removes the container.

`exec` runs an argv, never a shell string, in a session whose process group a
timeout kills inside the container; files move as tar archives. Every engine
call has a deadline (`calls`): when the engine stops answering or the container
dies (`State.OOMKilled`), the sandbox is lost and every later call raises
`SandboxLost`, one line naming the engine and what became of the container.
`spawn` returns a `docker exec -i` argv (the CLI is the engine's own client for
the attach stream), its environment passed by name, off the command line.

Why each, and the details: docs/isolation.md#the-docker-sandbox.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import shutil
import socket
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, cast

from ci_evals.errors import UserError
from ci_evals.fs.abandoned import process_start
from ci_evals.process import ExecResult
from ci_evals.sandbox import grader_identity
from ci_evals.sandbox.base import (
    DEFAULT_OUTPUT_CAP,
    SandboxLost,
    SandboxSpec,
    Spawn,
    without_proxies,
)
from ci_evals.sandbox.docker import calls, seccomp
from ci_evals.sandbox.docker.calls import Unanswered
from ci_evals.sandbox.docker.stream import pump
from ci_evals.sandbox.owners import Owners, give_back, hand_over, strip_setid
from ci_evals.text import one_line

if TYPE_CHECKING:
    import docker

LABEL = "ci-evals"  # every container ci-evals starts carries it ("1")
LABEL_RUN = "ci-evals.run-id"
LABEL_OWNER = "ci-evals.owner"  # host:pid:start-ticks of the process that owns it
LABEL_CREATED = "ci-evals.created"  # unix seconds
WORKSPACE = "/workspace"
SANDBOX_UID = 10001  # the image's `sandbox` user (image_build writes it)
# Settings of the docker CLI (`spawn`) passed on from our environment.
CLI_SETTINGS = (
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
)

# Started by `setsid -w` (a session and process group of its own): notes its
# pid (= the group) where a timeout can find it, runs the command, removes the
# note. Constant text: the command and the pid file are arguments, never parsed.
_START = 'echo $$ >"$0" 2>/dev/null; "$@"; code=$?; rm -f "$0"; exit $code'
# `merge_stderr`: one pipe for both inside, as the engine copies two pipes
# independently and would lose their order.
_MERGED = "exec 2>&1; " + _START
_KILL = 'kill -9 "-$(cat "$0")"'  # dash's kill: a negative pid is a group, no `--`
_DRAIN_S = 2.0  # how long a finished command's output may stay open (see stream)
_KILL_WAIT_S = 5.0
_GET_CAP = 256 << 20  # `get` refuses larger files (the whole file is held in memory)
_KILLED = 137  # 128 + SIGKILL: the OOM killer's (or our timeout's) end of a command
_SETTLE_S = 1.0  # how long a SIGKILLed command's container may take to be seen stopped

# Set while a removal found the engine unanswering: the next sandboxes closing (all
# of them at Ctrl-C) try once, briefly, not `calls.REMOVE_S` each.
_removal_failed = threading.Event()


_client_lock = threading.Lock()
_client_cache: list[docker.DockerClient] = []


def client() -> docker.DockerClient:
    """One engine client for the process's long calls (image builds, `gc`; the SDK's
    pool is thread-safe); a sandbox's calls go through `calls.client`. Raises
    ImportError or docker's DockerException when there is no SDK or no engine."""
    with _client_lock:
        if not _client_cache:
            import docker  # noqa: PLC0415 - heavy (requests); only when a container is wanted

            _client_cache.append(docker.from_env(timeout=120))
        return _client_cache[0]


def available() -> str | None:
    """None when the engine answers, else one line saying what to install or start."""
    try:
        import docker  # noqa: PLC0415
    except ImportError:
        return "the docker package is not installed: pip install 'ci-evals[docker]'"
    try:
        calls.call("a ping", lambda: calls.client().ping())
    except (docker.errors.DockerException, Unanswered) as exc:
        return (
            f"the Docker engine is not reachable ({one_line(str(exc), 200)}): start it "
            "(`systemctl start docker`) or point DOCKER_HOST at it"
        )
    return None


def owner_label(pid: int | None = None) -> str:
    """`host:pid:start` naming a process; the start time (clock ticks since boot,
    from /proc) tells a live owner from a later process that got its pid."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{process_start(pid)}"


class DockerSandbox:
    """One container for one `SandboxSpec` (see the module docstring)."""

    name = "docker"
    isolated = True
    over_quota = False  # the engine caps memory and pids; the disk quota is bwrap's and local's
    _lost: str | None = None  # why it can run nothing more (`SandboxLost`'s line)
    _oom = False  # the engine said `OOMKilled`

    def __init__(
        self, spec: SandboxSpec, *, image: str, network: bool = False, run_id: str | None = None
    ) -> None:
        """`image`: the tag of a built image; `network`: the containers may reach the
        network; `run_id`: labels them for `ci-evals gc` (kind.DockerOptions)."""
        if not image:
            raise ValueError("the docker sandbox needs a built image (DockerKind.prepare)")
        if spec.endpoint is not None and not network:
            raise ValueError(
                "the docker sandbox does not relay a model endpoint into a container without "
                "network: run the agent on the host (agent: loop) or use sandbox: bwrap"
            )
        if not spec.writable:
            raise ValueError("the docker sandbox needs a workspace (one writable folder)")
        results = () if spec.grader_results is None else (spec.grader_results,)
        for path in (*spec.writable, *spec.readonly, *results):
            if not path.is_absolute() or not path.exists():
                raise ValueError(f"sandbox mount {path} must be an existing absolute path")
            if path == Path("/"):
                raise ValueError("the whole file system cannot be a sandbox mount")
            if os.path.realpath(path) != str(path):
                raise ValueError(f"sandbox mount {path} is or passes through a symbolic link")
        self.spec = spec
        self.image, self.network, self.run_id = image, network, run_id
        self.uid = os.getuid() if os.getuid() != 0 else SANDBOX_UID
        self.gid = os.getgid() if os.getuid() != 0 else SANDBOX_UID
        self.user = f"{self.uid}:{self.gid}"
        # A command grader runs as root inside (with `GRADER_CAPS` only) and starts
        # the code under test as `self.user` through the launcher (grader_identity).
        self._launcher: grader_identity.AsAgentLauncher | None = None
        self._grader_env: dict[str, str] = {}
        self.exec_user = self.user
        if spec.grader_results is not None:
            self._launcher = grader_identity.AsAgentLauncher("setpriv")
            self.exec_user = "0:0"
            inside = grader_identity.INSIDE
            self._grader_env = grader_identity.environment(
                f"{inside}/{grader_identity.RESULTS}", f"{inside}/{grader_identity.LAUNCHER}"
            )
        self.workspace = spec.writable[0]
        self._mounts = {WORKSPACE: self.workspace} | {str(p): p for p in spec.writable[1:]}
        # Owners changed for the sandbox user, given back at `close()`.
        self._owners: Owners = {}
        self._container: Any = None
        self._id = ""
        try:
            self._api, self._poll = _apis()
            if os.getuid() == 0:
                for folder in spec.writable:  # the sandbox user must be able to write them
                    hand_over(folder, self.uid, self.gid, self._owners)
            self._container = self._create()
        except BaseException:
            give_back(self._owners)
            if self._launcher is not None:
                self._launcher.close()
            raise

    # -- the container ---------------------------------------------------------------

    def _create(self) -> Any:
        from docker.types import Mount  # noqa: PLC0415

        spec = self.spec
        mounts = [Mount(WORKSPACE, str(self.workspace), type="bind", read_only=False)]
        mounts += [Mount(str(p), str(p), type="bind", read_only=False) for p in spec.writable[1:]]
        mounts += [Mount(str(p), str(p), type="bind", read_only=True) for p in spec.readonly]
        cap_add = None
        if self._launcher is not None and spec.grader_results is not None:
            inside = grader_identity.INSIDE
            results = f"{inside}/{grader_identity.RESULTS}"
            mounts += [Mount(inside, str(self._launcher.folder), type="bind", read_only=True)]
            mounts += [Mount(results, str(spec.grader_results), type="bind", read_only=False)]
            cap_add = list(grader_identity.GRADER_CAPS)
        labels = {
            LABEL: "1",
            LABEL_RUN: self.run_id or "",
            LABEL_OWNER: owner_label(),
            LABEL_CREATED: str(int(time.time())),
        }
        image = self.image
        try:
            known = calls.call("an image inspect", lambda: image_known(image, calls.client()))
        except Unanswered as exc:
            raise SandboxLost(str(exc)) from None
        if not known:
            raise UserError(
                f"the Docker engine has no image {image!r}",
                hint="build it from its recipe: ci-evals sandbox build RECIPE",
            )
        create = calls.client().containers.create
        made = lambda: create(  # noqa: E731 - one call, tried again on a lost connection
            image,
            command=["sleep", "infinity"],
            init=True,
            # The exec API gives an exec the capabilities the container's own user
            # got: a grader's container is root's (with GRADER_CAPS only) for that.
            user=self.exec_user,
            working_dir=WORKSPACE,
            hostname="ci-evals-sandbox",
            network_mode="bridge" if self.network else "none",
            nano_cpus=int(spec.cpus * 1e9),
            mem_limit=spec.memory_bytes,
            memswap_limit=spec.memory_bytes,  # no swap beyond the memory limit
            pids_limit=spec.pids,
            cap_drop=["ALL"],
            cap_add=cap_add,
            security_opt=["no-new-privileges:true", f"seccomp={seccomp.profile_json()}"],
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={spec.tmp_bytes},mode=1777"},  # noqa: S108
            mounts=mounts,
            labels=labels,
            detach=True,
        )
        try:
            container = calls.call("a container create", made)
        except Unanswered as exc:
            # It may have made one before its answer was lost: labelled, so `gc` finds it.
            raise SandboxLost(
                f"{exc}; a container it may have made is left to `ci-evals gc`"
            ) from None
        self._id = str(container.id)
        try:
            calls.call("a container start", container.start)
        except Unanswered as exc:
            raise self._lose(str(exc)) from None
        except BaseException:
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
            raise
        return container

    @property
    def container_id(self) -> str:
        return self._id if self._container is not None else ""

    @property
    def memory_killed(self) -> int | None:
        """Its memory limit, once the engine said the OOM killer acted in it (`MemoryWatch`)."""
        return self.spec.memory_bytes if self._oom else None

    # -- losing it -----------------------------------------------------------------------

    def _lose(self, why: str) -> SandboxLost:
        """The sandbox is lost (`why`: one line): its container removed, trying while
        the engine may answer again, else left to `gc`; the error every later call
        raises, naming both."""
        if self._lost is None:
            self._lost = f"{why}; its {self._remove()[1]}"
        return SandboxLost(self._lost)

    def _alive(self) -> None:
        if self._lost is not None:
            raise SandboxLost(self._lost)

    def _remove(self, *, brief: bool = False) -> tuple[bool, str]:
        """Remove the container, trying for `calls.REMOVE_S` (`brief`, or once a removal
        failed: `calls.POLL_S`): whether it is gone, and what became of it ("container
        ID was removed", "container ID is left: ...")."""
        from docker.errors import APIError, NotFound  # noqa: PLC0415

        short = self._id[:12]

        def remove() -> None:
            try:
                self._poll.remove_container(self._id, force=True, v=True)
            except NotFound:
                return  # gone already (its init ended it, or a removal that timed out)
            except APIError as exc:
                if exc.status_code != 409:  # 409: a removal under way; asked again
                    raise
                time.sleep(0.2)
                raise ConnectionError("removal in progress") from exc

        deadline = calls.POLL_S if brief or _removal_failed.is_set() else calls.REMOVE_S
        try:
            calls.call("a container removal", remove, deadline_s=deadline, keep_trying=True)
        except (Unanswered, APIError) as exc:
            if isinstance(exc, Unanswered):
                _removal_failed.set()
            said = f" ({one_line(str(exc), 200)})" if isinstance(exc, APIError) else ""
            return (
                False,
                f"container {short} is left{said}: `ci-evals gc` removes it once "
                f"the engine at {calls.address()} answers",
            )
        _removal_failed.clear()
        return True, f"container {short} was removed"

    def _dead(self, settle_s: float = 0.0) -> str | None:
        """Why the container can run nothing more (it stopped: the OOM killer at its
        memory limit, or anything else), or None while it still runs `settle_s`
        later (a command SIGKILLed with its container is seen before the container's end)."""
        from docker.errors import NotFound  # noqa: PLC0415

        if self._container is None:  # closed by us (from another thread, at Ctrl-C)
            return None
        settled = time.monotonic() + settle_s
        while True:
            try:
                info = calls.call(
                    "a container inspect", lambda: self._api.inspect_container(self._id)
                )
            except Unanswered as exc:
                raise self._lose(str(exc)) from None
            except NotFound:
                return "the docker sandbox's container was removed by someone else"
            state = info.get("State") or {}
            self._oom = self._oom or bool(state.get("OOMKilled"))
            if not state.get("Running"):
                break
            if time.monotonic() >= settled:
                return None
            time.sleep(0.1)
        if state.get("OOMKilled"):
            mib = self.spec.memory_bytes / (1 << 20)
            return (
                f"the docker sandbox's memory limit ({mib:,.0f} MiB) was reached: the "
                "kernel's OOM killer ended its container (State.OOMKilled), nothing more "
                "can run in it"
            )
        error = f": {one_line(str(state['Error']), 200)}" if state.get("Error") else ""
        return (
            f"the docker sandbox's container stopped (exit code {state.get('ExitCode')}"
            f"{error}), nothing more can run in it"
        )

    def inner_path(self, path: Path | str) -> PurePosixPath:
        """Where host path `path` is inside: the workspace under /workspace, any
        other path unchanged (mounted at its own path, or the container's own)."""
        normal = PurePosixPath(posixpath.normpath(str(path)))
        workspace = PurePosixPath(self.workspace)
        if normal == workspace or workspace in normal.parents:
            return PurePosixPath(WORKSPACE, normal.relative_to(self.workspace))
        return normal

    # -- running -----------------------------------------------------------------------

    def spawn(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Spawn:
        cli = shutil.which("docker")
        if cli is None:
            raise OSError("the docker CLI is not installed (spawn runs `docker exec -i`)")
        if not argv:
            raise ValueError("nothing to run")
        env = env if self.network else without_proxies(env)
        names = _checked_names(env)
        settings = {k: os.environ[k] for k in CLI_SETTINGS if k in os.environ}
        host = [cli, "exec", "-i", "--user", self.user, "--workdir", str(self.inner_path(cwd))]
        for name in names:
            host += ["--env", name]  # the value comes from the CLI's environment
        return Spawn(argv=(*host, self.container_id, *argv), env={**settings, **env}, cwd=Path("/"))

    def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: bytes | None = None,
        timeout: float,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        merge_stderr: bool = False,
    ) -> ExecResult:
        """Run `argv` inside to its end or `timeout`, when its process group is killed."""
        if not argv:
            raise ValueError("nothing to run")
        env = env if self.network else without_proxies(env)
        _checked_names(env)
        start = time.monotonic()
        pidfile = f"/tmp/.ci-evals-exec-{uuid.uuid4().hex}"  # noqa: S108 - the container's own /tmp
        script = _MERGED if merge_stderr else _START
        command = ["setsid", "-w", "/bin/sh", "-c", script, pidfile, *argv]
        self._alive()
        try:
            exec_id = self._call_exec(
                "an exec create",
                lambda: self._api.exec_create(
                    self._id,
                    command,
                    stdin=stdin is not None,
                    stdout=True,
                    stderr=True,
                    tty=False,
                    environment=[f"{k}={v}" for k, v in {**env, **self._grader_env}.items()],
                    workdir=str(self.inner_path(cwd)),
                    user=self.exec_user,
                ),
            )["Id"]
            raw = self._call_exec(
                "an exec start", lambda: self._api.exec_start(exec_id, socket=True)
            )
        except SandboxLost:
            raise
        except Exception as exc:  # the engine refused: as when a program cannot start
            raise OSError(f"docker exec failed: {one_line(str(exc), 300)}") from exc
        # The SDK hands the hijacked connection over as a SocketIO around the socket.
        sock = cast("socket.socket", getattr(raw, "_sock", raw))
        ended = False
        try:
            pumped = pump(
                sock,
                stdin=stdin,
                deadline=start + timeout,
                cap=output_cap,
                merge=merge_stderr,
                ended=lambda: not self._running(exec_id),
                drain_s=_DRAIN_S,
            )
            code: int | None = None
            running = True
            if not pumped.timed_out:
                code, running = self._exit_code(exec_id)
            settle = _SETTLE_S if code == _KILLED else 0.0
            closed = self._container is None  # from another thread (Ctrl-C): nothing to ask
            if code in (None, _KILLED) and not closed and (dead := self._dead(settle)) is not None:
                raise self._lose(dead)  # not the command's failure: the container's end
            # A command still running `_KILL_WAIT_S` after closing its output goes
            # too. What it started in the background outlives it, as in a shell
            # session, until `close()` (the pids limit bounds it).
            if pumped.timed_out or running:
                self._kill_group(exec_id, pidfile)
            ended = True
        finally:
            if not ended:  # Ctrl-C while it ran: the group goes, the container with close()
                with contextlib.suppress(Exception):
                    self._kill_group(exec_id, pidfile)
            with contextlib.suppress(OSError):
                raw.close()
                sock.close()
        return ExecResult(
            argv=tuple(argv),
            returncode=None if pumped.timed_out or running else code,
            timed_out=pumped.timed_out,
            stdout=bytes(pumped.stdout.data),
            stderr=b"" if merge_stderr else bytes(pumped.stderr.data),
            stdout_dropped=pumped.stdout.dropped,
            duration_s=time.monotonic() - start,
        )

    def _call_exec(self, what: str, fn: Any) -> Any:
        """An engine call starting an exec: the sandbox lost when the engine does not
        answer, or when the engine refuses because the container has died."""
        from docker.errors import APIError  # noqa: PLC0415

        try:
            return calls.call(what, fn)
        except Unanswered as exc:
            raise self._lose(str(exc)) from None
        except APIError:
            if (dead := self._dead()) is not None:
                raise self._lose(dead) from None
            raise

    def _inspect(self, exec_id: str) -> dict[str, Any]:
        """The exec's state; once `close()` removed the container (from another
        thread: an interrupted command), it is over, with no exit code."""
        over = {"Running": False, "ExitCode": None}
        if self._container is None:
            return over
        self._alive()
        try:
            return dict(
                calls.call(
                    "an exec inspect",
                    lambda: self._poll.exec_inspect(exec_id),
                    retry_stalls=True,
                    given_up=lambda: self._container is None,
                )
            )
        except Unanswered as exc:
            if self._container is None:
                return over
            raise self._lose(str(exc)) from None
        except Exception:
            if self._container is None:
                return over
            raise

    def _running(self, exec_id: str) -> bool:
        return bool(self._inspect(exec_id).get("Running"))

    def _exit_code(self, exec_id: str) -> tuple[int | None, bool]:
        """The exec's exit code once it is not running (at most `_KILL_WAIT_S`
        later), and whether it still runs."""
        deadline = time.monotonic() + _KILL_WAIT_S
        while True:
            info = self._inspect(exec_id)
            running = bool(info.get("Running"))
            if not running or time.monotonic() > deadline:
                code = info.get("ExitCode")
                return (None if code is None else int(code)), running
            time.sleep(0.01)

    def _kill_group(self, exec_id: str, pidfile: str) -> None:
        """SIGKILL the exec's process group inside; if it still runs after
        `_KILL_WAIT_S`, kill the container and start it again (the workspace is
        on the host; what ran in it and its /tmp are gone)."""
        if self._container is None or self._lost is not None:  # nothing runs any more
            return
        killer = self._call_exec(
            "an exec create",
            lambda: self._api.exec_create(
                self._id, ["/bin/sh", "-c", _KILL, pidfile], user=self.exec_user
            ),
        )["Id"]
        self._call_exec("an exec start", lambda: self._api.exec_start(killer))
        deadline = time.monotonic() + _KILL_WAIT_S
        while self._running(exec_id):
            if time.monotonic() > deadline:
                self._call_exec("a container kill", self._container.kill)
                self._call_exec("a container start", self._container.start)
                return
            time.sleep(0.02)

    # -- files ---------------------------------------------------------------------------

    def _mount_of(self, inner: PurePosixPath) -> PurePosixPath:
        for mount in sorted(self._mounts, key=len, reverse=True):
            root = PurePosixPath(mount)
            if inner == root or root in inner.parents:
                return root
        raise ValueError(
            f"{inner} is not inside a folder the sandbox shares with the host "
            f"({', '.join(sorted(self._mounts))}); the engine cannot reach the container's /tmp"
        )

    def put(self, path: Path, data: bytes) -> None:
        """Write `data` to `path` (host or inside path, in a shared folder), parents made."""
        inner = self.inner_path(path)
        root = self._mount_of(inner)
        if inner == root:
            raise IsADirectoryError(str(path))
        buffer = io.BytesIO()
        relative = inner.relative_to(root)
        now = time.time()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for parent in reversed(relative.parents[:-1]):  # folders first, outermost first
                folder = tarfile.TarInfo(str(parent))
                folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, now
                folder.uid, folder.gid = self.uid, self.gid
                tar.addfile(folder)
            entry = tarfile.TarInfo(str(relative))
            entry.size, entry.mode, entry.mtime = len(data), 0o644, now
            entry.uid, entry.gid = self.uid, self.gid
            tar.addfile(entry, io.BytesIO(data))
        self._alive()
        try:
            archive = buffer.getvalue()
            written = calls.call(
                "an archive upload", lambda: self._container.put_archive(str(root), archive)
            )
        except Unanswered as exc:
            raise self._lose(str(exc)) from None
        if not written:
            raise OSError(f"the engine refused to write {inner}")

    def get(self, path: Path) -> bytes:
        """The bytes of the regular file at `path` (host or inside path)."""
        from docker.errors import NotFound  # noqa: PLC0415

        inner = self.inner_path(path)
        self._alive()

        def fetch() -> tuple[bytes, dict[str, Any]]:
            stream, stat = self._container.get_archive(str(inner))
            if int(stat.get("size", 0)) > _GET_CAP:
                raise ValueError(f"{inner} is larger than {_GET_CAP >> 20} MiB")
            return b"".join(stream), stat

        try:
            data, _ = calls.call("an archive download", fetch)
        except NotFound as exc:
            raise FileNotFoundError(str(inner)) from exc
        except Unanswered as exc:
            raise self._lose(str(exc)) from None
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise (
                    IsADirectoryError(str(inner))
                    if member and member.isdir()
                    else OSError(f"{inner} is not a regular file")
                )
            extracted = tar.extractfile(member)
            assert extracted is not None
            return extracted.read()

    def close(self) -> None:
        """Remove the container and all that runs in it (idempotent)."""
        container, self._container = self._container, None
        if container is None:
            return
        if self._lost is None:
            # The engine not answering right now (a stall under Ctrl-C): a brief try.
            removed, fate = self._remove(brief=calls.failing.is_set())
            if not removed:  # the engine stopped answering at the end: one line says so
                self._lost = f"the docker sandbox's {fate}"
                print(f"ci-evals: {self._lost}", file=sys.stderr)
        if os.getuid() == 0:  # root inside is root on the host: no setuid file stays
            for folder in self.spec.writable:
                strip_setid(folder)
        give_back(self._owners)  # after: nothing inside can change them any more
        if self._launcher is not None:
            self._launcher.close()

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _apis() -> tuple[Any, Any]:
    """The API of calls answered within `calls.CALL_S`, and of polls tried for
    `calls.POLL_S` at a time (until `CALL_S`)."""
    try:
        calls.check()
        return calls.client().api, calls.client(calls.POLL_S).api
    except Unanswered as exc:
        raise SandboxLost(str(exc)) from None


def image_known(tag: str, engine: docker.DockerClient | None = None) -> bool:
    """Whether the engine has an image of that tag (or id)."""
    from docker.errors import ImageNotFound  # noqa: PLC0415

    try:
        (engine or client()).images.get(tag)
    except ImageNotFound:
        return False
    return True


def _checked_names(env: Mapping[str, str]) -> list[str]:
    for key in env:
        if not key or "=" in key or "\0" in key:
            raise ValueError(f"invalid environment variable name {key!r}")
    return list(env)
