"""The `bwrap` sandbox: each stage's processes in namespaces of their own, through bubblewrap.

The agent under test runs as our user (often root in CI), with permissions
bypassed, and may be hostile. Inside it has its own PID namespace (ci-evals'
`/proc/<pid>/environ` out of reach; bwrap's init, PID 1, is started with an
empty environment and, since the agent can rewrite its memory, with /dev/null
as stdin and stdout: `launch.py` moves the real ones to descriptors 3 and 4 and
`/bin/sh` takes them back, `TAKE_STDIO`), no capabilities, a file system of its
own (`ETC_FILES`, a fresh `/tmp`, the `Mounts`), no network but the model
endpoint (`relay.py` inside, `_Forwarder` on the host), exactly the environment
it is given (bwrap reads its options from a memfd, off its command line), and
the limits of `limits.py`.

Why each of these, and what the agent can still do: docs/isolation.md (the
sandbox kinds, Limits, and the known limits).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import socket
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci_evals import process
from ci_evals.process import ExecResult
from ci_evals.sandbox import grader_identity
from ci_evals.sandbox.base import DEFAULT_OUTPUT_CAP, SandboxSpec, Spawn, without_proxies
from ci_evals.sandbox.launcher import Launched, Launcher
from ci_evals.sandbox.owners import Owners, give_back, hand_over, strip_setid

# Where the private folder (relay.py, the model socket) appears inside.
RUNTIME_DIR = "/run/ci-evals"
MODEL_SOCKET = "model.sock"
RELAY_SCRIPT = "relay.py"

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

# /etc, read-only, when present. What a CLI, a shell and the tools they run need:
# user and group names (`id`, `whoami`, git's and ssh's look-ups), name
# resolution and its configuration (`localhost` above all), the dynamic
# linker's cache and configuration (libraries outside the default paths),
# certificates and OpenSSL's configuration (TLS, when the network is on), the
# time zone, Debian's alternatives (`/usr/bin/awk` and friends are links into
# /etc/alternatives) and os-release (tools that report the platform). Left
# out: shadow, sudoers, ssh keys, ssl/private, machine-id, the host's git,
# Docker and containerd configuration.
ETC_FILES = (
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "crypto-policies",
    "localtime",
    "timezone",
    "alternatives",
    "os-release",
)

# What the relay's interpreter adds to its environment on its own (PEP 538
# locale coercion), removed again before the command starts unless asked for.
PYTHON_ADDS = ("LC_CTYPE",)
# Run first inside (as `/bin/sh -c TAKE_STDIO sh ARGV...`): ARGV with the real stdin
# and stdout, which launch.py handed bwrap as descriptors 3 and 4 (see above).
TAKE_STDIO = 'exec "$@" <&3 >&4 3<&- 4>&-'
# Ports below this need a capability the sandbox does not have.
FIRST_UNPRIVILEGED_PORT = 1024
INNER_PORT_FALLBACK = 8080 + FIRST_UNPRIVILEGED_PORT

_PROBE_TIMEOUT_S = 10.0
_KILL_WAIT_S = 5.0


@functools.cache
def available() -> str | None:
    """None when bubblewrap works here, else one line saying what to install or enable."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed: apt-get install bubblewrap"
    probe = [
        bwrap,
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        shutil.which("true") or "/bin/true",
    ]
    try:
        done = process.run(probe, timeout=_PROBE_TIMEOUT_S, env={})
    except OSError as exc:
        return f"bubblewrap does not run here ({exc}): apt-get install bubblewrap"
    if done.timed_out:  # worded as Python's TimeoutExpired says it
        said = f"Command '{probe}' timed out after {_PROBE_TIMEOUT_S} seconds"
        return f"bubblewrap does not run here ({said}): apt-get install bubblewrap"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    said = lines[-1] if lines else f"exit {done.returncode}"
    return (
        f"bubblewrap cannot create namespaces here ({said}): user namespaces are restricted; "
        "on Ubuntu 24.04 (GitHub runners) run "
        "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, elsewhere "
        "`sysctl -w kernel.unprivileged_userns_clone=1`; in a container allow them "
        "(docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined)"
    )


def _system_args() -> list[str]:
    """The read-only system: folders bound, merged-/usr links recreated, a minimal /etc."""
    args: list[str] = []
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for name in ETC_FILES:
        path = f"/etc/{name}"
        if os.path.lexists(path):
            args += ["--ro-bind-try", path, path]
    return args


def _python_binds() -> tuple[str, list[str]]:
    """The interpreter that runs relay.py inside, and the binds it needs.

    The real binary behind sys.executable (a venv's python lives in the
    repository), its shared libpython and the standard library of
    sys.base_prefix, read-only; that installation's site-packages is hidden.
    """
    python = os.path.realpath(sys.executable)
    stdlib = sysconfig.get_path("stdlib")
    args = ["--ro-bind", python, python, "--ro-bind", stdlib, stdlib]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR")
        soname = sysconfig.get_config_var("INSTSONAME")
        if libdir and soname and os.path.exists(os.path.join(libdir, soname)):
            lib = os.path.join(libdir, soname)
            args += ["--ro-bind", os.path.realpath(lib), lib]
    site = os.path.join(stdlib, "site-packages")
    if os.path.isdir(site):
        args += ["--tmpfs", site]
    return python, args


class BwrapSandbox(Launched):
    """Run commands of one stage inside bubblewrap namespaces (see the module docstring).

    `endpoint=(host, port)`: the model endpoint on the host, reachable inside
    as `http://127.0.0.1:PORT` (`inner_url`). `network=True` shares the host's
    network instead (no relay, no network isolation).
    """

    name = "bwrap"
    isolated = True

    def __init__(
        self,
        mounts: SandboxSpec,
        *,
        endpoint: tuple[str, int] | None = None,
        network: bool | None = None,
    ) -> None:
        endpoint = endpoint if endpoint is not None else mounts.endpoint
        network = bool(network)
        results = () if mounts.grader_results is None else (mounts.grader_results,)
        for path in (*mounts.writable, *mounts.readonly, *results):
            if not path.is_absolute() or not path.exists():
                raise ValueError(f"sandbox mount {path} must be an existing absolute path")
            if path == Path("/"):
                raise ValueError("the whole file system cannot be a sandbox mount")
            if os.path.realpath(path) != str(path):
                # bwrap follows links on both sides of a bind: a stage's cwd that an
                # earlier stage replaced with `lab -> ../../..(depth)/tmp` would bind
                # the host's /tmp (or /etc) read-write.
                raise ValueError(f"sandbox mount {path} is or passes through a symbolic link")
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise RuntimeError(available() or "bwrap not found")
        self.mounts = mounts
        self.endpoint = endpoint
        self.network = network
        self._bwrap = bwrap
        self._system = _system_args()
        self._launcher = Launcher(mounts)
        self._running: set[int] = set()  # process groups of the execs in progress
        self._private: Path | None = None
        self._forwarder: _Forwarder | None = None
        self._python: tuple[str, list[str]] | None = None
        self._grader: grader_identity.AsAgentLauncher | None = None  # a command grader's identities
        self._owners: Owners = {}
        if mounts.grader_results is not None:
            self._open_grader()
        if endpoint is not None and not network:
            self._private = _private_dir()
            shutil.copyfile(Path(__file__).with_name(RELAY_SCRIPT), self._private / RELAY_SCRIPT)
            self._forwarder = _Forwarder(self._private / MODEL_SOCKET, endpoint)
            self._python = _python_binds()

    def _open_grader(self) -> None:
        """A command grader's two identities (`grader_identity`): as root, the
        writable folders go to the code under test's uid (the grader keeps
        `GRADER_CAPS` to start it, stop it and still write them)."""
        root = grader_identity.as_root()
        self._grader = grader_identity.AsAgentLauncher(
            "setpriv" if root else "nested",
            writable=self.mounts.writable,
            readonly=self.mounts.readonly,
        )
        if root:
            uid = grader_identity.AGENT_UID
            try:
                for folder in self.mounts.writable:
                    hand_over(folder, uid, uid, self._owners)
            except BaseException:
                self.close()
                raise

    def _caps(self) -> list[str]:
        args = ["--cap-drop", "ALL"]
        if self._grader is not None and grader_identity.as_root():
            for cap in grader_identity.GRADER_CAPS:
                args += ["--cap-add", f"CAP_{cap}"]
        return args

    def _proc_sys(self) -> list[str]:
        # bwrap covers these only when it sees them writable, which with
        # capabilities dropped it does not: as uid 0, /proc/sys/kernel/core_pattern
        # (a program the host kernel runs as root) would stay writable. Under
        # another uid they are not writable anyway, and a nested bwrap (the
        # code under test of a grader) can mount its own /proc only where the
        # outer one is not partly covered.
        if self._grader is not None and not grader_identity.as_root():
            return []
        return [
            "--ro-bind",
            "/proc/sys",
            "/proc/sys",
            "--ro-bind-try",
            "/proc/sysrq-trigger",
            "/proc/sysrq-trigger",
        ]

    def _tmp_perms(self) -> list[str]:
        # Two uids share /tmp (the grader's and the code under test's): sticky and
        # open to both, as on any system (bwrap >= 0.5 has --perms).
        return ["--perms", "1777"] if self._grader and grader_identity.as_root() else []

    def _open_parents(self) -> list[str]:
        # bwrap makes the folders on the way to a bind 0700, root's: the code under
        # test's uid (root's grader) must pass through them to its folder. An
        # existing one keeps its mode.
        if self._grader is None or not grader_identity.as_root():
            return []
        args: list[str] = []
        for path in self.mounts.writable:
            for parent in reversed(path.parents[:-1]):
                args += ["--perms", "0755", "--dir", str(parent)]
        return args

    def _grader_binds(self) -> tuple[list[str], dict[str, str]]:
        if self._grader is None or self.mounts.grader_results is None:
            return [], {}
        inside = grader_identity.INSIDE
        results = f"{inside}/{grader_identity.RESULTS}"
        binds = ["--ro-bind", str(self._grader.folder), inside]
        binds += ["--bind", str(self.mounts.grader_results), results]
        return binds, grader_identity.environment(results, f"{inside}/{grader_identity.LAUNCHER}")

    @property
    def inner_port(self) -> int | None:
        """The port the model endpoint has inside: its own, unless that is privileged."""
        if self.endpoint is None:
            return None
        port = self.endpoint[1]
        if self.network or port >= FIRST_UNPRIVILEGED_PORT:
            return port
        return INNER_PORT_FALLBACK

    @property
    def inner_url(self) -> str | None:
        """The model endpoint's URL inside the sandbox (for ANTHROPIC_BASE_URL), if any."""
        if self.endpoint is None:
            return None
        host = self.endpoint[0] if self.network else "127.0.0.1"
        return f"http://{host}:{self.inner_port}"

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> list[str]:
        """The host argv that runs `argv` inside the sandbox with exactly `env` in `cwd`.

        Spawn it with any environment: bwrap starts with an empty one, its
        arguments in a memfd (`launch.py`).
        """
        if not argv:
            raise ValueError("nothing to run")
        if not self.network:
            env = without_proxies(env)
        args = [
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *([] if self.network else ["--unshare-net"]),
            "--hostname",
            "ci-evals-sandbox",
            "--new-session",
            "--die-with-parent",
            *self._caps(),
            *self._system,
            "--proc",
            "/proc",
            *self._proc_sys(),
            "--dev",
            "/dev",
            "--size",
            str(self.mounts.tmp_bytes),
            *self._tmp_perms(),
            "--tmpfs",
            "/tmp",  # noqa: S108 - a fresh tmpfs, the sandbox's own
        ]
        args += self._open_parents()
        binds = [(p, "--bind") for p in self.mounts.writable]
        binds += [(p, "--ro-bind") for p in self.mounts.readonly]
        for path, option in sorted(binds, key=lambda bind: len(bind[0].parts)):  # parents first
            args += [option, str(path), str(path)]
        grader_binds, grader_env = self._grader_binds()
        args += grader_binds
        env = {**env, **grader_env}
        command = list(argv)
        if self._private is not None and self._python is not None and self.endpoint is not None:
            python, python_binds = self._python
            args += python_binds
            args += ["--ro-bind", str(self._private), RUNTIME_DIR]
            command = [
                python,
                "-I",
                "-S",
                f"{RUNTIME_DIR}/{RELAY_SCRIPT}",
                "--listen",
                f"127.0.0.1:{self.inner_port}",
                "--to",
                f"{RUNTIME_DIR}/{MODEL_SOCKET}",
                *[arg for name in PYTHON_ADDS if name not in env for arg in ("--unset", name)],
                "--",
                *command,
            ]
        command = ["/bin/sh", "-c", TAKE_STDIO, "sh", *command]
        args += ["--remount-ro", "/", "--chdir", str(cwd), "--clearenv"]
        for key, value in env.items():
            if not key or "=" in key:
                raise ValueError(f"invalid environment variable name {key!r}")
            args += ["--setenv", key, value]
        # bwrap takes the command only from its real argv, after what --args gave.
        return self._launcher.argv([self._bwrap, "--", *command], {}, args=args, stdio_above=True)

    def spawn(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Spawn:
        return Spawn(argv=tuple(self.wrap(argv, cwd=cwd, env=env)), env={}, cwd=cwd)

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
        """Run `argv` in the sandbox to its end or `timeout`, when the whole sandbox is
        killed (bwrap's group; its init dies with it, and the namespace with that)."""
        wrapped = self.wrap(argv, cwd=cwd, env=env)
        done = process.run(
            wrapped,
            env={},
            stdin=stdin,
            timeout=timeout,
            output_cap=output_cap,
            merge_stderr=merge_stderr,
            groups=self._running,
        )
        self._launcher.wait(wrapped)  # the namespace is gone, not only bwrap
        return dataclasses.replace(done, argv=tuple(argv))  # what was asked, not bwrap's argv

    def put(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)  # the same path inside and out
        path.write_bytes(data)

    def get(self, path: Path) -> bytes:
        return path.read_bytes()

    def close(self) -> None:
        """Kill any `exec` still running, stop the relay, remove the private folder
        (idempotent). A spawned process's namespace dies with its init."""
        self._launcher.close()  # every bwrap it launched, the cgroup, the quota
        for group in list(self._running):  # an exec still running in another thread
            process.kill_group(group)
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None
        if self._grader is not None:
            self._grader.close()
        if grader_identity.as_root():  # uid 0 inside may chmod 4755 what it made
            for folder in self.mounts.writable:
                strip_setid(folder)
        give_back(self._owners)  # after: nothing inside runs any more

    def __enter__(self) -> BwrapSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# A Unix socket's path must fit in sun_path (108 bytes with its NUL).
_SOCKET_PATH_MAX = 107


def _private_dir() -> Path:
    """A fresh folder (mode 0700) for the relay's socket and script: in the temporary
    folder, or in /tmp when that one is too deep for a socket path (a long TMPDIR)."""
    folder = Path(tempfile.mkdtemp(prefix="ci-evals-bwrap-"))
    if len(os.fsencode(folder / MODEL_SOCKET)) <= _SOCKET_PATH_MAX:
        return folder
    os.rmdir(folder)
    return Path(tempfile.mkdtemp(prefix="ci-evals-bwrap-", dir="/tmp"))


class _Forwarder:
    """On the host: accept on a Unix socket, forward each connection to `endpoint` over TCP."""

    def __init__(self, path: Path, endpoint: tuple[str, int]) -> None:
        self._path = path
        self._endpoint = endpoint
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._thread = threading.Thread(target=self._serve, name=f"bwrap-relay:{path}")
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closing.is_set():
                client.close()
                return
            self._start(self._handle, client)

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args)  # type: ignore[arg-type]
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closing.is_set():
                return False
            self._sockets.add(sock)
            return True

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            if not self._track(client):
                return
            try:
                upstream = socket.create_connection(self._endpoint, timeout=10)
            except OSError:
                return
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self._track(upstream):
                return
            back = threading.Thread(target=_pump, args=(upstream, client))
            back.start()
            _pump(client, upstream)
            back.join()
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._sockets.discard(sock)
                    sock.close()
            with self._lock:
                self._threads.discard(threading.current_thread())

    def close(self) -> None:
        with self._lock:
            self._closing.set()
            sockets = list(self._sockets)
        waker = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with waker, contextlib.suppress(OSError):  # wake accept()
            waker.connect(str(self._path))
        self._thread.join()
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until `source` ends, then half-close `sink`."""
    try:
        while data := source.recv(64 * 1024):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
