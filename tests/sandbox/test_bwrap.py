"""BwrapSandbox with the real bubblewrap: processes, file system, network, environment.

Every test runs real `bwrap`. Where bubblewrap cannot run, the tests fail with
the one line `available()` gives (what to install or enable); they are not
skipped. The last test runs the real Claude Code CLI inside the sandbox
against the stub model, playing a hostile agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ci_evals.sandbox.base import SandboxSpec
from ci_evals.sandbox.bwrap import BwrapSandbox, available
from tests.paths import REPO
from tests.run_helpers import bundled_cli

PYTHON = os.path.realpath(sys.executable)  # what the sandbox binds for its relay
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


@pytest.fixture(autouse=True)
def _bwrap_works() -> None:
    reason = available()
    if reason is not None:
        pytest.fail(reason)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def sandbox(ws: Path) -> Iterator[BwrapSandbox]:
    with BwrapSandbox(SandboxSpec(writable=(ws,), readonly=())) as box:
        yield box


def sh(box: BwrapSandbox, script: str, cwd: Path, timeout: float = 20, **kwargs: object) -> str:
    """Run `sh -c script` in `box`; return stdout, failing the test on a non-zero exit."""
    result = box.exec(["sh", "-c", script], cwd=cwd, env=ENV, timeout=timeout, **kwargs)  # type: ignore[arg-type]
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout.decode()


def host_pids_with(marker: str, starting: bytes = b"") -> list[int]:
    """Host processes whose command line contains `marker` (and starts with `starting`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                if marker.encode() in cmdline and cmdline.startswith(starting):
                    found.append(int(entry.name))
    return found


def wait_until(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


# A host parent process holding a secret in its (real, /proc-visible) environment:
# it runs the sandbox's argv (given as JSON) with stdio inherited, and exits with its status.
PARENT = "import json, subprocess, sys; sys.exit(subprocess.call(json.loads(sys.argv[1])))"


def run_under_parent(
    argv: list[str], secret_env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", PARENT, json.dumps(argv)],
        env={**os.environ, **secret_env},
        capture_output=True,
        timeout=timeout,
        check=False,
    )


# -- availability and the argv ------------------------------------------------------------


def test_available_says_what_to_install_when_bwrap_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    reason = available.__wrapped__()
    assert reason is not None and "apt-get install bubblewrap" in reason


def test_wrap_is_an_argv_that_starts_bwrap_with_an_empty_environment(
    sandbox: BwrapSandbox, ws: Path
) -> None:
    argv = sandbox.wrap(["echo", "a; rm -rf /"], cwd=ws, env={"A": "$(id)"})
    assert argv[:3] == [sys.executable, "-I", "-S"] and argv[3].endswith("launch.py")
    assert "$(id)" not in argv  # the environment is not on any command line
    done = run_under_parent(argv, {"CI_EVALS_PARENT_SECRET": "x"}, timeout=20)
    assert (done.returncode, done.stdout) == (0, b"a; rm -rf /\n")  # data stays one argument
    # no signal ignored that a shell would not ignore (the launcher is Python: SIGPIPE)
    assert sh(sandbox, "grep SigIgn /proc/self/status", ws) == "SigIgn:\t0000000000000000\n"
    marker = f"ci-evals-flags-{uuid.uuid4().hex}"
    argv = sandbox.wrap(["sh", "-c", f"read x # {marker}"], cwd=ws, env=ENV)
    with subprocess.Popen(argv, env={}, stdin=subprocess.PIPE) as proc:
        assert wait_until(lambda: host_pids_with(marker, starting=b"sh\0"), 10)
        bwraps = [p for p in host_pids_with(marker) if b"bwrap" in _cmdline(p).split(b"\0")[0]]
        assert len(bwraps) == 2  # bwrap, and its init in the namespace
        for pid in bwraps:
            flag, fd = _cmdline(pid).split(b"\0")[1:3]
            assert flag == b"--args" and fd.isdigit()  # options: a memfd
            assert Path(f"/proc/{pid}/environ").read_bytes() == b""
            # Neither holds the command's stdin or stdout: its init is the agent's to
            # rewrite (/proc/1/mem), and would write frames into the CLI's stdout.
            held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1)]
            assert held == ["/dev/null", "/dev/null"]
        proc.communicate(b"\n", timeout=10)
    assert proc.returncode == 0


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def test_no_environment_value_on_bwraps_command_line_and_no_proxy_inside(
    sandbox: BwrapSandbox, ws: Path
) -> None:
    """`HTTPS_PROXY=http://ci:PW@proxy` and the per-run token used to be `--setenv`
    arguments of bwrap, readable by every host process in /proc/<bwrap>/cmdline, and
    the proxy (unreachable without network) was in the agent's environment."""
    token, password = f"tok-{uuid.uuid4().hex}", f"pw-{uuid.uuid4().hex}"
    proxy = f"http://ci:{password}@proxy.example:3128"
    env = {
        **ENV,
        "ANTHROPIC_API_KEY": token,
        "HTTPS_PROXY": proxy,
        "http_proxy": proxy,
        "All_Proxy": proxy,
        "NO_PROXY": "localhost",
    }
    marker = f"ci-evals-argv-{uuid.uuid4().hex}"
    argv = sandbox.wrap(["sh", "-c", f"env; read x # {marker}"], cwd=ws, env=env)
    assert not [arg for arg in argv if token in arg or password in arg]
    with subprocess.Popen(argv, env={}, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert wait_until(lambda: host_pids_with(marker, starting=b"sh\0"), 10)
        agent = host_pids_with(marker, starting=b"sh\0")
        for pid in [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]:
            seen = _cmdline(pid)  # world-readable: every host process's command line
            if pid not in (*agent, os.getpid()):  # and the environment of all but the agent
                with contextlib.suppress(OSError):
                    seen += Path(f"/proc/{pid}/environ").read_bytes()
            assert token.encode() not in seen and password.encode() not in seen, pid
        out, _ = proc.communicate(b"\n", timeout=10)
    inside = dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)
    assert inside["ANTHROPIC_API_KEY"] == token  # the agent still gets what it needs
    assert not [name for name in inside if name.upper().endswith("_PROXY")], inside


# -- the environment ------------------------------------------------------------------------


def test_the_command_gets_exactly_its_environment(sandbox: BwrapSandbox, ws: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "SPACES": "a b\tc", "EMPTY": "", "QUOTE": "'\"$HOME"}
    result = sandbox.exec(["/usr/bin/env", "-0"], cwd=ws, env=env, timeout=10)
    assert result.returncode == 0, result.stderr
    got = dict(item.split("=", 1) for item in result.stdout.decode().split("\0") if item)
    assert got == {**env, "PWD": str(ws)}  # bwrap sets PWD after --chdir


def test_exact_environment_through_the_relay_too(ws: Path) -> None:
    with (
        _HostServer() as server,
        BwrapSandbox(SandboxSpec(writable=(ws,), readonly=()), endpoint=server.endpoint) as box,
    ):
        result = box.exec(["/usr/bin/env", "-0"], cwd=ws, env={"PATH": "/usr/bin"}, timeout=10)
    got = dict(item.split("=", 1) for item in result.stdout.decode().split("\0") if item)
    assert got == {"PATH": "/usr/bin", "PWD": str(ws)}  # no LC_CTYPE from the relay's python


# -- exec ----------------------------------------------------------------------------------


def test_exec_returns_status_and_output_of_a_failure(sandbox: BwrapSandbox, ws: Path) -> None:
    result = sandbox.exec(
        ["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=ws, env=ENV, timeout=10
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert not result.timed_out  # ended by itself, within its 10 s
    assert result.argv == ("sh", "-c", "echo out; echo err >&2; exit 3")


def test_exec_passes_stdin_and_keeps_the_tail_of_output(sandbox: BwrapSandbox, ws: Path) -> None:
    result = sandbox.exec(["cat"], cwd=ws, env=ENV, stdin=b"hello\n", timeout=10)
    assert result.stdout == b"hello\n"
    result = sandbox.exec(["seq", "1", "200000"], cwd=ws, env=ENV, timeout=10, output_cap=100)
    assert len(result.stdout) == 100 and result.stdout.endswith(b"\n199999\n200000\n")
    result = sandbox.exec(["seq", "1", "200000"], cwd=ws, env=ENV, timeout=10, output_cap=0)
    assert result.stdout == b"" and result.returncode == 0


def test_timeout_kills_the_whole_sandbox(sandbox: BwrapSandbox, ws: Path) -> None:
    marker = f"ci-evals-timeout-{uuid.uuid4().hex}"
    script = (
        f"setsid env -i sh -c ': {marker}; sleep 6; echo late > {ws}/late' >/dev/null 2>&1 & "
        f"echo started; sleep 60 # {marker}"
    )
    # 3 s leave a loaded machine room to start bwrap and print "started"; the
    # session leader's 6 s sleep would end after the kill if it survived it.
    began = time.monotonic()
    result = sandbox.exec(["sh", "-c", script], cwd=ws, env=ENV, timeout=3)
    assert result.timed_out and result.returncode is None
    assert result.stdout == b"started\n"  # output up to the kill is kept
    assert host_pids_with(marker) == []  # the 60 s sleep killed, not waited for
    time.sleep(max(0.0, began + 6.5 - time.monotonic()))
    assert not (ws / "late").exists()


# -- processes ----------------------------------------------------------------------------


def test_nothing_the_command_started_outlives_it(sandbox: BwrapSandbox, ws: Path) -> None:
    marker = f"ci-evals-escape-{uuid.uuid4().hex}"
    script = (
        f"setsid env -i sh -c ': {marker}; sleep 2; echo survived > {ws}/x' >/dev/null 2>&1 & "
        f"nohup sh -c ': {marker}; sleep 2; echo survived > {ws}/y' >/dev/null 2>&1 & "
        "sleep 0.2"
    )
    sh(sandbox, script, ws)
    assert host_pids_with(marker) == []  # gone when bwrap returns: pid 1 died, the kernel reaped
    time.sleep(2.5)
    assert not (ws / "x").exists() and not (ws / "y").exists()


def test_bwrap_init_is_pid_1_and_exits_with_the_command(sandbox: BwrapSandbox, ws: Path) -> None:
    out = sh(sandbox, "tr '\\0' ' ' < /proc/1/cmdline; echo; echo $$", ws)
    init, me = out.splitlines()
    assert "bwrap" in init and me == "2"
    killed = sandbox.exec(["sh", "-c", "kill -TERM $$"], cwd=ws, env=ENV, timeout=10)
    assert killed.returncode == 128 + signal.SIGTERM  # bwrap reports a signal as 128+N


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_sandbox_dies_with_its_parent(sandbox: BwrapSandbox, ws: Path, signum: int) -> None:
    marker = f"ci-evals-orphan-{uuid.uuid4().hex}"
    argv = sandbox.wrap(["sh", "-c", f"sleep 30 # {marker}"], cwd=ws, env=ENV)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(argv)])
    try:
        # the command runs: bwrap has set its parent-death signal long before
        assert wait_until(lambda: host_pids_with(marker, starting=b"sh\0"), 10)
        parent.send_signal(signum)
        parent.wait(10)
        assert wait_until(lambda: host_pids_with(marker) == [], 5), host_pids_with(marker)
    finally:
        parent.kill()
        parent.wait()


def test_proc_shows_only_the_sandbox_and_no_secret(
    sandbox: BwrapSandbox, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-fake-{uuid.uuid4().hex}"
    monkeypatch.setenv("CI_EVALS_FAKE_SECRET", secret)
    script = (
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; tr '\\0' ' ' < $p/cmdline; done; "
        "echo; ls -d /proc/[0-9]*"
    )
    argv = sandbox.wrap(["sh", "-c", script], cwd=ws, env=ENV)
    done = run_under_parent(argv, {"CI_EVALS_PARENT_SECRET": secret}, timeout=20)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert secret not in out
    assert "CI_EVALS_PARENT_SECRET" not in out and "CI_EVALS_FAKE_SECRET" not in out
    pids = [line for line in out.splitlines() if line.startswith("/proc/")]
    assert len(pids) <= 4, pids  # bwrap's init, sh, ls (and its subshell)
    # nor through exec, from this process
    out = sh(sandbox, script, ws)
    assert secret not in out
    assert sh(sandbox, f"test -e /proc/{os.getpid()}/environ || echo hidden", ws) == "hidden\n"


# -- the file system --------------------------------------------------------------------------


def test_only_the_mounts_are_writable(tmp_path: Path, ws: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tool = tmp_path / "tool" / "bin" / "tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    (tool.parent / "neighbour").write_text("not bound")
    with BwrapSandbox(SandboxSpec(writable=(ws,), readonly=(tool,))) as box:
        assert sh(box, f"echo ok > {ws}/f && cat {ws}/f", ws) == "ok\n"
        assert sh(box, f"{tool}", ws) == "tool ran\n"
        for target in (REPO / "pwned", tool, Path("/pwned"), Path("/usr/pwned"), Path("/etc/x")):
            result = box.exec(["sh", "-c", f"echo x > {target}"], cwd=ws, env=ENV, timeout=10)
            assert result.returncode != 0, target
        # Under /tmp a write lands in the sandbox's own tmpfs, never in the host's folder.
        for target in (outside / "pwned", tool.parent / "pwned"):
            script = f"mkdir -p {target.parent}; echo x > {target}"
            box.exec(["sh", "-c", script], cwd=ws, env=ENV, timeout=10)
        missing = sh(box, f"cat {tool.parent}/neighbour 2>&1 || true", ws)
        assert missing.endswith("No such file or directory\n")  # the file is bound, not its folder
        assert sh(box, "echo t > /tmp/t && cat /tmp/t", ws) == "t\n"  # its own /tmp
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in tool.parent.iterdir()) == ["neighbour", "tool"]
    assert not (REPO / "pwned").exists()
    assert tool.read_text().endswith("echo tool ran\n")
    assert not Path("/tmp/t").exists() or Path("/tmp/t").read_text() != "t\n"


def test_the_host_is_not_visible(sandbox: BwrapSandbox, ws: Path, tmp_path: Path) -> None:
    hidden = [
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/root",
        "/home",
        "/work",
        "/var",
        "/etc/shadow",
        "/etc/ssl/private",
        "/sys",
        str(REPO),
        str(REPO / "pyproject.toml"),
        str(tmp_path / "outside-not-bound"),
    ]
    (tmp_path / "outside-not-bound").mkdir()
    script = 'for p in "$@"; do test -e "$p" && echo "VISIBLE $p"; done; exit 0'
    result = sandbox.exec(["sh", "-c", script, "sh", *hidden], cwd=ws, env=ENV, timeout=10)
    assert result.stdout == b"", result.stdout
    system = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "tmp"}
    assert set(sh(sandbox, "ls /", ws).split()) <= system | {ws.parts[1]}
    etc = set(sh(sandbox, "ls /etc", ws).split())
    assert {"passwd", "hosts", "resolv.conf", "nsswitch.conf"} <= etc
    assert not etc & {"shadow", "gshadow", "sudoers", "docker", "containerd", "machine-id"}


def test_no_capabilities_and_kernel_knobs_read_only(sandbox: BwrapSandbox, ws: Path) -> None:
    out = sh(sandbox, "grep CapEff /proc/self/status", ws)
    assert out.split() == ["CapEff:", "0000000000000000"]
    for script in (
        "mount -o remount,rw /usr",
        "mount -t tmpfs none /tmp",
        ": >> /proc/sys/kernel/core_pattern",
        "test -e /proc/sysrq-trigger && : >> /proc/sysrq-trigger",  # absent, or read-only
        "mknod /tmp/disk b 8 0",
    ):
        result = sandbox.exec(["sh", "-c", script], cwd=ws, env=ENV, timeout=10)
        assert result.returncode != 0, script


# -- the network ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/sse":  # server-sent events, one at a time, 0.4 s apart
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(3):
                data = f"data: {n}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                time.sleep(0.4)
            self.wfile.write(b"0\r\n\r\n")
            return
        body = f"hello from {self.server.name}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # echo, reversed: bulk data both ways
        body = self.rfile.read(int(self.headers["Content-Length"]))[::-1]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _HostServer:
    """A real HTTP server on the host's 127.0.0.1."""

    def __init__(self, name: str = "endpoint") -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.connections = 0  # type: ignore[attr-defined]
        self.httpd.name = name  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> tuple[str, int]:
        return ("127.0.0.1", int(self.httpd.server_address[1]))

    def __enter__(self) -> _HostServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


CLIENT = textwrap.dedent(
    """
    import http.client, json, sys, time
    port = int(sys.argv[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    out = {}
    for i in range(2):
        conn.request("GET", "/hello")
        out[f"get{i}"] = conn.getresponse().read().decode()
    body = bytes(range(256)) * 800
    conn.request("POST", "/echo", body=body)
    out["echo_ok"] = conn.getresponse().read() == body[::-1]
    conn.request("GET", "/sse")
    response = conn.getresponse()
    times = []
    while line := response.readline():
        if line.startswith(b"data:"):
            times.append(time.monotonic())
    out["events"] = len(times)
    out["spread_s"] = times[-1] - times[0]
    print(json.dumps(out))
    """
)


def test_the_model_endpoint_is_reachable_streaming_and_kept_alive(ws: Path) -> None:
    with _HostServer() as server:
        endpoint = server.endpoint
        with BwrapSandbox(SandboxSpec(writable=(ws,), readonly=()), endpoint=endpoint) as box:
            assert box.inner_url == f"http://127.0.0.1:{endpoint[1]}"
            result = box.exec(
                [PYTHON, "-I", "-c", CLIENT, str(endpoint[1])], cwd=ws, env=ENV, timeout=20
            )
            assert result.returncode == 0, result.stderr
            out = json.loads(result.stdout)
            assert out["get0"] == out["get1"] == "hello from endpoint"
            assert out["echo_ok"] is True
            assert out["events"] == 3 and out["spread_s"] > 0.6  # streamed, not buffered
            assert server.httpd.connections == 1  # type: ignore[attr-defined] # kept alive
            urllib_get = (
                "import urllib.request, sys; "
                "print(urllib.request.urlopen(sys.argv[1] + '/hello', timeout=5).read().decode())"
            )
            out2 = box.exec(
                [PYTHON, "-I", "-c", urllib_get, box.inner_url], cwd=ws, env=ENV, timeout=20
            )
            assert out2.stdout == b"hello from endpoint\n", out2.stderr


PROBE = textwrap.dedent(
    """
    import socket, sys
    for target in sys.argv[1:]:
        if target.startswith("@"):
            s = socket.socket(socket.AF_UNIX)
            address = "\\0" + target[1:]
        else:
            s = socket.socket()
            host, port = target.rsplit(":", 1)
            address = (host, int(port))
        s.settimeout(2)
        try:
            s.connect(address)
            print("REACHED", target)
        except OSError as exc:
            print("refused", target, exc)
    """
)


def test_nothing_else_on_the_host_network_is_reachable(ws: Path) -> None:
    abstract = f"ci-evals-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\0" + abstract)
    listener.listen()
    with _HostServer() as endpoint, _HostServer("other") as other, listener:
        other_port = other.endpoint[1]
        with BwrapSandbox(
            SandboxSpec(writable=(ws,), readonly=()), endpoint=endpoint.endpoint
        ) as box:
            targets = [f"127.0.0.1:{other_port}", f"localhost:{other_port}", f"@{abstract}"]
            result = box.exec([PYTHON, "-I", "-c", PROBE, *targets], cwd=ws, env=ENV, timeout=20)
            assert result.returncode == 0, result.stderr
            assert b"REACHED" not in result.stdout, result.stdout
            assert result.stdout.count(b"\nrefused ") == 2  # three lines, all refused
        # (from the host, the same three are reachable)
        host = subprocess.run(
            [sys.executable, "-I", "-c", PROBE, *targets], capture_output=True, check=True
        )
        assert host.stdout.count(b"REACHED") == 3, host.stdout
        # and with no endpoint at all, not even the endpoint's port
        with BwrapSandbox(SandboxSpec(writable=(ws,), readonly=())) as box:
            port = endpoint.endpoint[1]
            result = box.exec(
                ["bash", "-c", f"echo > /dev/tcp/127.0.0.1/{port} && echo REACHED"],
                cwd=ws,
                env=ENV,
                timeout=10,
            )
            assert result.returncode != 0 and b"REACHED" not in result.stdout


def test_relay_passes_stdio_and_exit_status_through(ws: Path) -> None:
    with (
        _HostServer() as server,
        BwrapSandbox(SandboxSpec(writable=(ws,), readonly=()), endpoint=server.endpoint) as box,
    ):
        result = box.exec(["cat"], cwd=ws, env=ENV, stdin=b'{"type": "user"}\n', timeout=10)
        assert (result.returncode, result.stdout) == (0, b'{"type": "user"}\n')
        result = box.exec(["sh", "-c", "echo e >&2; exit 7"], cwd=ws, env=ENV, timeout=10)
        assert (result.returncode, result.stderr) == (7, b"e\n")
        result = box.exec(["sh", "-c", "kill -TERM $$"], cwd=ws, env=ENV, timeout=10)
        assert result.returncode == 128 + signal.SIGTERM


def test_close_leaves_no_thread_socket_or_process(ws: Path) -> None:
    threads_before = set(threading.enumerate())
    marker = f"ci-evals-close-{uuid.uuid4().hex}"
    with _HostServer() as server:
        box = BwrapSandbox(SandboxSpec(writable=(ws,), readonly=()), endpoint=server.endpoint)
        client = socket.socket(socket.AF_UNIX)
        try:
            private = box._private
            assert private is not None and private.name.startswith("ci-evals-bwrap-")
            assert (private / "model.sock").exists()
            assert private.stat().st_mode & 0o777 == 0o700
            # a connection still open (keep-alive) when close() is called
            client.connect(str(private / "model.sock"))
            client.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            client.settimeout(10)
            answer = b""
            while b"hello from endpoint" not in answer and (chunk := client.recv(4096)):
                answer += chunk
            assert answer.endswith(b"hello from endpoint"), answer
            # and a sandbox still running
            results = []
            running = threading.Thread(
                target=lambda: results.append(
                    box.exec(["sh", "-c", f"sleep 30 # {marker}"], cwd=ws, env=ENV, timeout=60)
                )
            )
            running.start()
            assert wait_until(lambda: host_pids_with(marker, starting=b"sh\0"), 10)
        finally:
            box.close()
            client.close()
        running.join(10)
        assert results and results[0].returncode == -signal.SIGKILL
        assert not results[0].timed_out
        box.close()  # twice is fine
    assert not private.exists()
    assert host_pids_with(marker) == []
    leftover = [t for t in set(threading.enumerate()) - threads_before if t.is_alive()]
    assert leftover == [], leftover


# -- the real Claude Code CLI, playing a hostile agent ------------------------------------------


@pytest.mark.slow
def test_the_real_cli_in_the_sandbox_cannot_leak_write_or_linger(tmp_path: Path) -> None:
    from ci_evals.endpoints.stub_model import StubServer, loads_script  # noqa: PLC0415

    ws = tmp_path / "ws"
    base = tmp_path / "agent"  # its private HOME, TMPDIR, XDG_RUNTIME_DIR
    for folder in (ws, base / "home", base / "tmp", base / "run"):
        folder.mkdir(parents=True)
    secret = f"sk-ant-fake-{uuid.uuid4().hex}"
    pwned = [REPO / "pwned-by-sandbox-test", tmp_path / "pwned"]
    command = (
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done > out.txt; "
        f"setsid env -i sh -c 'sleep 3; echo survived > {ws}/survived.txt' >/dev/null 2>&1 & "
        + "".join(f"echo x > {path}; " for path in pwned)
        + "ls /var/run/docker.sock >> out.txt 2>&1; echo done"
    )
    bash = json.dumps(command)
    script = f"rules:\n  - turns:\n      - tools: [{{bash: {bash}}}]\n      - text: finished\n"
    cli = bundled_cli()
    with StubServer(loads_script(script, "stub.yaml", base_dir=tmp_path)) as server:
        endpoint = ("127.0.0.1", server.port)
        with BwrapSandbox(
            SandboxSpec(writable=(ws, base), readonly=(cli,)), endpoint=endpoint
        ) as box:
            env = {
                "PATH": "/usr/bin:/bin",
                "SHELL": "/bin/bash",
                "HOME": str(base / "home"),
                "TMPDIR": str(base / "tmp"),
                "CLAUDE_CODE_TMPDIR": str(base / "tmp"),
                "XDG_RUNTIME_DIR": str(base / "run"),
                "IS_SANDBOX": "1",
                "ANTHROPIC_BASE_URL": str(box.inner_url),
                "ANTHROPIC_API_KEY": "stub-key",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
            argv = box.wrap(
                [
                    str(cli),
                    "-p",
                    "go",
                    "--output-format",
                    "stream-json",
                    "--verbose",
                    "--dangerously-skip-permissions",
                ],
                cwd=ws,
                env=env,
            )
            done = run_under_parent(argv, {"ANTHROPIC_API_KEY": secret}, timeout=30)
            finished = time.monotonic()
        records = server.requests
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    assert done.returncode == 0, (done.stderr.decode()[-2000:], lines[-3:])
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == "finished", lines[-1]
    assert len(records) == 2, [r.describe() for r in records]  # both turns came through the relay
    out = (ws / "out.txt").read_text()
    assert "IS_SANDBOX=1" in out  # the loop ran and read the sandbox's own environments
    assert secret not in out and secret not in done.stdout.decode()
    assert "No such file" in out  # no docker socket
    for path in pwned:
        assert not path.exists(), path
    time.sleep(max(0.0, finished + 4 - time.monotonic()))
    assert not (ws / "survived.txt").exists()


@pytest.mark.slow
def test_the_sdk_drives_the_cli_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """claude_agent_sdk.query() over a transport whose argv is `wrap()`ped: stdin/stdout
    (the SDK's JSON-lines control protocol) pass through bwrap and the relay untouched,
    and the SDK's merging of our os.environ into the CLI's environment is undone by env -i."""
    import asyncio  # noqa: PLC0415

    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query  # noqa: PLC0415
    from claude_agent_sdk._internal.transport.subprocess_cli import (  # noqa: PLC0415
        SubprocessCLITransport,
    )
    from claude_agent_sdk._version import __version__ as sdk_version  # noqa: PLC0415

    from ci_evals.endpoints.stub_model import StubServer, loads_script  # noqa: PLC0415

    secret = f"sk-ant-fake-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)  # what the SDK would hand the CLI
    ws = tmp_path / "ws"
    base = tmp_path / "agent"
    for folder in (ws, base / "home", base / "tmp", base / "run"):
        folder.mkdir(parents=True)
    script = textwrap.dedent(
        """
        rules:
          - turns:
              - tools:
                  - write: {path: hello.txt, content: "written in the sandbox\\n"}
                  - bash: "env > env.txt; find REPO > repo.txt 2> repo-errors.txt; true"
              - text: finished
        """
    )
    script = script.replace("REPO", str(REPO))
    cli = bundled_cli()

    class SandboxedTransport(SubprocessCLITransport):
        def __init__(self, options: ClaudeAgentOptions, box: BwrapSandbox, env: dict[str, str]):
            super().__init__("go", options)
            self.box = box
            self.sandbox_env = env

        def _build_command(self) -> list[str]:
            env = {
                **self.sandbox_env,
                "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
                "CLAUDE_AGENT_SDK_VERSION": sdk_version,
                "CLAUDE_CODE_SDK_READS_SESSION_STATE": "1",
            }
            return self.box.wrap(super()._build_command(), cwd=ws, env=env)

    stderr: list[str] = []
    with StubServer(loads_script(script, "stub.yaml", base_dir=tmp_path)) as server:
        mounts = SandboxSpec(writable=(ws, base), readonly=(cli,))
        with BwrapSandbox(mounts, endpoint=("127.0.0.1", server.port)) as box:
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": str(base / "home"),
                "TMPDIR": str(base / "tmp"),
                "CLAUDE_CODE_TMPDIR": str(base / "tmp"),
                "XDG_RUNTIME_DIR": str(base / "run"),
                "IS_SANDBOX": "1",
                "ANTHROPIC_BASE_URL": str(box.inner_url),
                "ANTHROPIC_API_KEY": "stub-key",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
            options = ClaudeAgentOptions(
                cwd=str(ws),
                cli_path=str(cli),
                permission_mode="bypassPermissions",
                setting_sources=[],
                max_turns=5,
                stderr=stderr.append,
            )

            async def run() -> list[object]:
                transport = SandboxedTransport(options, box, env)
                return [m async for m in query(prompt="go", options=options, transport=transport)]

            messages = asyncio.run(asyncio.wait_for(run(), 60))
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert results and results[-1].result == "finished", (messages[-3:], stderr[-10:])
    assert (ws / "hello.txt").read_text() == "written in the sandbox\n"
    sandbox_env = (ws / "env.txt").read_text()
    assert "ANTHROPIC_API_KEY=stub-key" in sandbox_env and secret not in sandbox_env
    # Of the repository, only the folders on the way to the CLI binary (bound alone);
    # none of it when the virtualenv lives elsewhere (a clone under /tmp, say).
    seen = (ws / "repo.txt").read_text().split()
    if cli.is_relative_to(REPO):
        assert str(cli) in seen, seen
        assert all(cli == Path(p) or cli.is_relative_to(p) for p in seen), seen
    else:
        assert seen == [], seen


def test_the_sandboxs_tmp_is_capped(ws: Path) -> None:
    # Its /tmp is memory: filling it must not take the machine's.
    with BwrapSandbox(SandboxSpec(writable=(ws,), readonly=(), tmp_bytes=1 << 20)) as box:
        script = "dd if=/dev/zero of=/tmp/fill bs=64k count=64 2>/dev/null; wc -c < /tmp/fill"
        fill = sh(box, script, ws)
    assert int(fill) <= 1 << 20  # 4 MiB asked for
