"""DockerSandbox on the real engine, with the image `ci-evals sandbox build` makes.

Every test starts real containers. Without an engine they fail with the one
line `available()` gives; they are not skipped (the engine is on every
machine that runs CI).
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import signal
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

from ci_evals.sandbox.base import SandboxConfig, SandboxSpec
from ci_evals.sandbox.docker import engine
from ci_evals.sandbox.docker.engine import DockerSandbox
from ci_evals.sandbox.docker.kind import DockerOptions
from ci_evals.sandbox.registry import open_sandbox
from tests.docker_helpers import containers
from tests.paths import REPO

pytestmark = pytest.mark.docker

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def spec(ws: Path) -> SandboxSpec:
    return SandboxSpec(writable=(ws,))


@pytest.fixture
def options(docker_image: str) -> DockerOptions:
    """The docker kind's options, as `prepare` gives them: the image built, the run id."""
    return DockerOptions(image_tag=docker_image, run_id=f"test-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def box(spec: SandboxSpec, docker_image: str) -> Iterator[DockerSandbox]:
    with DockerSandbox(spec, image=docker_image) as sandbox:
        yield sandbox


def run(box: DockerSandbox, argv: list[str], timeout: float = 30, **kwargs: object) -> object:
    return box.exec(argv, cwd=box.workspace, env=ENV, timeout=timeout, **kwargs)  # type: ignore[arg-type]


def sh(box: DockerSandbox, script: str, timeout: float = 30) -> str:
    done = box.exec(["sh", "-c", script], cwd=box.workspace, env=ENV, timeout=timeout)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout.decode()


def py(box: DockerSandbox, code: str, timeout: float = 30, **kwargs: object):  # type: ignore[no-untyped-def]
    return box.exec(
        ["python3", "-c", textwrap.dedent(code)],
        cwd=box.workspace,
        env=ENV,
        timeout=timeout,
        **kwargs,  # type: ignore[arg-type]
    )


# -- exec ----------------------------------------------------------------------------


def test_exit_code_stdout_and_stderr_even_on_failure(box: DockerSandbox) -> None:
    done = box.exec(
        ["sh", "-c", "echo out; echo 'error: x.c:3: expected ;' >&2; exit 7"],
        cwd=box.workspace,
        env=ENV,
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        7,
        b"out\n",
        b"error: x.c:3: expected ;\n",
    )
    assert not done.timed_out
    merged = box.exec(
        ["sh", "-c", "echo 1; echo 2 >&2; echo 3"],
        cwd=box.workspace,
        env=ENV,
        timeout=30,
        merge_stderr=True,
    )
    assert merged.stdout == b"1\n2\n3\n" and merged.stderr == b""


def test_argv_is_not_a_shell_string_and_env_and_cwd_are_given(box: DockerSandbox) -> None:
    (box.workspace / "sub").mkdir()
    done = box.exec(
        ["printf", "%s|", "$(id)", "a b", ";rm -rf /", "$HOME"],
        cwd=box.workspace / "sub",
        env={**ENV, "ONLY_HERE": "v=1 $x"},
        timeout=30,
    )
    assert done.stdout == b"$(id)|a b|;rm -rf /|$HOME|"
    assert sh(box, "pwd") == "/workspace\n"
    inside = box.exec(
        ["sh", "-c", 'pwd; echo "$ONLY_HERE"'],
        cwd=box.workspace / "sub",
        env={**ENV, "ONLY_HERE": "v=1 $x"},
        timeout=30,
    )
    assert inside.stdout == b"/workspace/sub\nv=1 $x\n"


def test_no_proxy_variable_reaches_a_container_without_network(box: DockerSandbox) -> None:
    """A proxy is unreachable from `network_mode: none`, and its URL may carry a password."""
    proxy = "http://ci:pw-docker-test@proxy.example:3128"
    env = {**ENV, "HTTPS_PROXY": proxy, "http_proxy": proxy, "All_Proxy": proxy, "KEEP": "1"}
    done = box.exec(["env"], cwd=box.workspace, env=env, timeout=30)
    names = {line.split("=", 1)[0] for line in done.stdout.decode().splitlines()}
    assert "KEEP" in names and not [n for n in names if n.upper().endswith("_PROXY")], names
    spawn = box.spawn(["env"], cwd=box.workspace, env=env)
    assert "pw-docker-test" not in " ".join(spawn.argv)
    assert not [n for n in spawn.env if n.upper().endswith("_PROXY")]


def test_stdin_is_fed_and_closed(box: DockerSandbox) -> None:
    data = os.urandom(300_000)
    done = box.exec(["sha256sum"], cwd=box.workspace, env=ENV, stdin=data, timeout=30)
    assert done.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_output_is_capped_keeping_the_tail(box: DockerSandbox) -> None:
    done = box.exec(
        [
            "sh",
            "-c",
            "head -c 1000000 /dev/zero | tr '\\0' x; echo END; head -c 50000 /dev/zero >&2",
        ],
        cwd=box.workspace,
        env=ENV,
        timeout=30,
        output_cap=1000,
    )
    assert done.returncode == 0
    assert len(done.stdout) == 1000 and done.stdout.endswith(b"xEND\n")
    assert done.stdout_dropped == 1_000_004 - 1000
    assert done.stderr == b"\0" * 1000  # the tail of 50,000


def test_a_command_ignoring_sigterm_is_killed_at_its_timeout(box: DockerSandbox) -> None:
    # The container's first process, by its start time: the same one after the
    # kill means the command was killed inside, not the container restarted.
    first = "cut -d' ' -f22 /proc/1/stat"
    init_started = sh(box, first)
    done = py(
        box,
        """
        import os, signal, subprocess, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen(["sleep", "300"])  # a child in its group, ignoring nothing
        print("started", flush=True)
        while True:
            time.sleep(1)
        """,
        timeout=8,  # room for `docker exec` and Python to start on a busy machine
    )
    assert done.timed_out and done.returncode is None
    assert done.stdout == b"started\n"  # output up to the kill is kept
    assert sh(box, first) == init_started
    left = py(
        box,
        """
        import os
        for pid in filter(str.isdigit, os.listdir("/proc")):
            if int(pid) != os.getpid():
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    print(cmdline.read().replace(b"\\0", b" ").decode().strip())
        """,
    )
    running = left.stdout.decode().splitlines()
    assert "sleep infinity" in running, running  # the listing sees the container's processes
    assert "sleep 300" not in running and not [c for c in running if "SIGTERM" in c], running
    # The sandbox still works after a timeout.
    assert sh(box, "echo alive") == "alive\n"


def test_a_background_process_holding_the_output_does_not_hang_exec(box: DockerSandbox) -> None:
    # The timeout, 30 s, is shorter than the sleep: waiting for it would time out.
    done = box.exec(["sh", "-c", "sleep 60 & echo started"], cwd=box.workspace, env=ENV, timeout=30)
    assert done.returncode == 0 and done.stdout == b"started\n"


# -- confinement ------------------------------------------------------------------------


def test_runs_as_a_non_root_user_without_capabilities(box: DockerSandbox) -> None:
    status = sh(box, "cat /proc/self/status")
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split()[0] != "0"
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    assert sh(box, "id -un") == "sandbox\n"


def test_the_root_file_system_is_read_only_and_workspace_and_tmp_are_writable(
    box: DockerSandbox,
) -> None:
    for path in ("/etc/passwd", "/usr/bin/x", "/x", "/root/x"):
        done = box.exec(["sh", "-c", f": > {path}"], cwd=box.workspace, env=ENV, timeout=30)
        assert done.returncode != 0, path
    sh(box, "echo a > /workspace/a && echo b > /tmp/b && cat /tmp/b")
    assert (box.workspace / "a").read_text() == "a\n"


def test_tmp_is_capped(ws: Path, docker_image: str) -> None:
    spec = SandboxSpec(writable=(ws,), tmp_bytes=8 << 20)
    with DockerSandbox(spec, image=docker_image) as box:
        done = box.exec(
            ["sh", "-c", "head -c 20000000 /dev/zero > /tmp/big"], cwd=ws, env=ENV, timeout=30
        )
        assert done.returncode != 0 and b"No space left" in done.stderr


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def host_server() -> Iterator[int]:
    """A real HTTP server on every interface of the host (so also on the Docker
    bridge's gateway address): its port."""
    server = ThreadingHTTPServer(("0.0.0.0", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


_PROBE = """
import socket, sys, urllib.request
for target in sys.argv[1:]:
    try:
        body = urllib.request.urlopen(target, timeout=3).read().decode()
        print(target, "reached", body)
    except Exception as exc:
        print(target, "refused", type(exc).__name__)
"""


def _gateway() -> str:
    """The host's address on the Docker bridge (the first of its subnet when the
    engine does not name it)."""
    config = engine.client().networks.get("bridge").attrs["IPAM"]["Config"][0]
    if config.get("Gateway"):
        return str(config["Gateway"])
    return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def test_no_network_neither_the_hosts_loopback_nor_the_bridge_nor_outside(
    box: DockerSandbox, host_server: int, ws: Path, docker_image: str
) -> None:
    # The server answers on the host, on both addresses (the probe works).
    for host in ("127.0.0.1", _gateway()):
        with contextlib.closing(
            __import__("urllib.request").request.urlopen(f"http://{host}:{host_server}/", timeout=5)
        ) as reply:
            assert reply.read() == b"hello"
    targets = [
        f"http://127.0.0.1:{host_server}/",
        f"http://localhost:{host_server}/",
        f"http://{_gateway()}:{host_server}/",
        "http://deb.debian.org/",  # the mirror the host reaches
        "http://1.1.1.1/",
    ]
    done = box.exec(["python3", "-c", _PROBE, *targets], cwd=ws, env=ENV, timeout=60)
    lines = done.stdout.decode().splitlines()
    assert len(lines) == len(targets), done
    assert not [line for line in lines if " reached " in line], lines
    interfaces = sh(box, "ls /sys/class/net").split()
    assert interfaces == ["lo"]
    # Opting in is explicit and changes exactly this: the bridge gateway answers.
    opened = SandboxSpec(writable=(ws,))
    with DockerSandbox(opened, image=docker_image, network=True) as online:
        probe = [f"http://{_gateway()}:{host_server}/"]
        reached = online.exec(["python3", "-c", _PROBE, *probe], cwd=ws, env=ENV, timeout=60)
        assert b"reached hello" in reached.stdout, reached


def test_memory_limit_is_enforced(ws: Path, docker_image: str) -> None:
    spec = SandboxSpec(writable=(ws,), memory_bytes=96 << 20)
    with DockerSandbox(spec, image=docker_image) as box:
        small = py(box, "b = bytearray(16 << 20); b[::4096] = b'x' * len(b[::4096]); print('ok')")
        assert small.stdout == b"ok\n"
        big = py(box, "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); print('ok')")
        assert big.returncode != 0 and b"ok" not in big.stdout  # killed by the OOM killer
        info = engine.client().api.inspect_container(box.container_id)
        assert info["HostConfig"]["Memory"] == 96 << 20
        assert info["HostConfig"]["MemorySwap"] == 96 << 20


def test_pids_limit_is_enforced(ws: Path, docker_image: str) -> None:
    spec = SandboxSpec(writable=(ws,), pids=40)
    with DockerSandbox(spec, image=docker_image) as box:
        done = py(
            box,
            """
            import subprocess
            started, refused = [], 0
            for _ in range(100):
                try:
                    started.append(subprocess.Popen(["sleep", "30"]))
                except OSError:
                    refused += 1
            print(len(started), refused)
            for p in started:
                p.kill()
            """,
        )
        started, refused = (int(n) for n in done.stdout.split())
        assert started < 40 and refused > 0, done


# -- files -------------------------------------------------------------------------------

NAMES = ["a b.txt", "$(touch pwned);'x'\".txt", "back\\slash `tick` & | > <.txt", "ünï cødé.txt"]


def test_put_and_get_keep_names_with_spaces_and_shell_metacharacters(box: DockerSandbox) -> None:
    for number, name in enumerate(NAMES):
        box.put(box.workspace / "dir with space" / name, f"content {number}\n".encode())
    listed = box.exec(
        ["ls", "-1", "/workspace/dir with space"], cwd=box.workspace, env=ENV, timeout=30
    )
    assert sorted(listed.stdout.decode().splitlines()) == sorted(NAMES)
    for number, name in enumerate(NAMES):
        assert box.get(box.workspace / "dir with space" / name) == f"content {number}\n".encode()
        assert box.get(Path("/workspace/dir with space") / name) == f"content {number}\n".encode()
        assert (
            box.workspace / "dir with space" / name
        ).read_bytes() == f"content {number}\n".encode()
    assert not (box.workspace / "pwned").exists()
    # Written inside, read back out; owned by the sandbox user, writable by it.
    sh(box, "printf 'made inside' > \"/workspace/dir with space/$(printf '%s' '$x y')\"")
    assert box.get(box.workspace / "dir with space" / "$x y") == b"made inside"
    sh(box, 'echo more >> "/workspace/dir with space/a b.txt"')
    with pytest.raises(FileNotFoundError):
        box.get(box.workspace / "missing")
    with pytest.raises(ValueError, match="shares with the host"):
        box.put(Path("/tmp/x"), b"")


def test_owners_handed_to_the_sandbox_user_are_given_back_and_no_link_is_followed(
    ws: Path, tmp_path: Path, docker_image: str
) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "f").write_text("mine")
    (ws / "a").write_text("mine")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("not the sandbox's")
    if os.getuid() == 0:
        os.chown(outside / "f", 4242, 4242)  # would become 0 if a link were followed
    before = {p: (p.lstat().st_uid, p.lstat().st_gid) for p in (ws, ws / "a", ws / "d/f")}
    outside_before = (outside / "f").stat().st_uid
    with DockerSandbox(SandboxSpec(writable=(ws,)), image=docker_image) as box:
        # Writable inside, whoever owned it; then `d` swapped for a link to a host folder.
        sh(box, f"echo more >> a && echo new > b && rm -r d && ln -s {outside} d")
    assert {p: (p.lstat().st_uid, p.lstat().st_gid) for p in (ws, ws / "a")} == {
        p: before[p] for p in (ws, ws / "a")
    }
    assert (ws / "a").read_text() == "minemore\n"
    assert (outside / "f").stat().st_uid == outside_before
    assert (ws / "d").is_symlink()


# -- clean-up ------------------------------------------------------------------------------


def test_no_container_left_after_success_failure_or_an_exception(
    spec: SandboxSpec, options: DockerOptions
) -> None:
    config = SandboxConfig("docker", options)
    volumes_before = {v.name for v in engine.client().volumes.list()}
    with open_sandbox(config, spec) as box:
        assert containers(**{engine.LABEL_RUN: options.run_id or ""}) == [box.container_id]
        run(box, ["true"])
    assert containers(**{engine.LABEL_RUN: options.run_id or ""}) == []
    with open_sandbox(config, spec) as box:
        run(box, ["false"])
    assert containers(**{engine.LABEL_RUN: options.run_id or ""}) == []
    with pytest.raises(RuntimeError, match="a grader broke"), open_sandbox(config, spec) as box:
        run(box, ["true"])
        raise RuntimeError("a grader broke")
    assert containers(**{engine.LABEL_RUN: options.run_id or ""}) == []
    assert {v.name for v in engine.client().volumes.list()} == volumes_before


_HOLDER = """
import sys
from pathlib import Path
from ci_evals.sandbox.base import SandboxConfig, SandboxSpec
from ci_evals.sandbox.docker.kind import DockerOptions
from ci_evals.sandbox.registry import open_sandbox
spec = SandboxSpec(writable=(Path(sys.argv[1]),))
config = SandboxConfig("docker", DockerOptions(image_tag=sys.argv[2], run_id=sys.argv[3]))
with open_sandbox(config, spec) as box:
    print("ready", flush=True)
    if sys.argv[4] == "crash":
        import os
        os._exit(9)  # no finally: what a SIGKILL or a power cut leaves
    box.exec(["sleep", "120"], cwd=box.workspace, env={"PATH": "/usr/bin:/bin"}, timeout=300)
"""


def _holder(ws: Path, image: str, run_id: str, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(ws), image, run_id, mode],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def _wait_gone(run_id: str, seconds: float = 20) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := containers(**{engine.LABEL_RUN: run_id})) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_sigint_to_a_process_using_the_sandbox_removes_its_container(
    ws: Path, docker_image: str
) -> None:
    run_id = f"sigint-{uuid.uuid4().hex[:8]}"
    proc = _holder(ws, docker_image, run_id, "hold")
    assert len(containers(**{engine.LABEL_RUN: run_id})) == 1
    time.sleep(0.5)  # inside exec now
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert proc.returncode != 0  # KeyboardInterrupt
    assert _wait_gone(run_id) == []


@pytest.mark.usefixtures("gc_alone")  # no other test's gc removes the crash's container first
def test_gc_removes_what_a_crash_left_and_nothing_that_is_in_use(
    ws: Path, docker_image: str, spec: SandboxSpec, options: DockerOptions
) -> None:
    config = SandboxConfig("docker", options)
    run_id = f"crash-{uuid.uuid4().hex[:8]}"
    proc = _holder(ws, docker_image, run_id, "crash")
    proc.wait(timeout=30)
    assert len(containers(**{engine.LABEL_RUN: run_id})) == 1  # the crash left it
    with open_sandbox(config, spec) as live:  # owned by this (live) process
        done = subprocess.run(
            [sys.executable, "-m", "ci_evals", "gc"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert f"(run {run_id}): owner gone" in done.stdout
        assert containers(**{engine.LABEL_RUN: run_id}) == []
        assert containers(**{engine.LABEL_RUN: options.run_id or ""}) == [live.container_id]
        run(live, ["true"])


@pytest.mark.usefixtures("gc_alone")
def test_gc_leaves_a_container_someone_else_started_from_our_image(docker_image: str) -> None:
    # `docker run` of a built image by a user or another tool is not ours: the image
    # must not hand its build container's labels (ci-evals=1, a dead owner) down.
    labels = engine.client().images.get(docker_image).labels or {}
    assert labels.get(engine.LABEL) != "1" and not labels.get(engine.LABEL_OWNER), labels
    theirs = engine.client().containers.create(docker_image, command=["sleep", "infinity"])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ci_evals", "gc"], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        theirs.reload()  # raises NotFound when gc removed it
    finally:
        with contextlib.suppress(Exception):
            theirs.remove(force=True)


def test_a_missing_engine_is_one_clear_line(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "gc"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker engine is not reachable" in lines[0], done.stderr
    assert "Traceback" not in done.stderr


# -- spawn ----------------------------------------------------------------------------------


def test_spawn_is_docker_exec_i_with_stdio_and_env_off_the_command_line(
    box: DockerSandbox,
) -> None:
    code = (
        "import os, sys\n"
        "for line in sys.stdin:\n"
        "    print(os.environ['TOKEN'], line.strip(), flush=True)\n"
    )
    spawn = box.spawn(["python3", "-c", code], cwd=box.workspace, env={**ENV, "TOKEN": "s3cret"})
    assert "s3cret" not in " ".join(spawn.argv)
    proc = subprocess.Popen(
        spawn.argv,
        env=spawn.env,
        cwd=spawn.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1}) + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == 's3cret {"jsonrpc": "2.0", "id": 1}\n'
    proc.stdin.close()  # EOF ends the server
    assert proc.wait(timeout=30) == 0
