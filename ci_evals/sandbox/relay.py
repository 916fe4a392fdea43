"""Inside a sandbox: run a command, and relay a loopback TCP port to a Unix socket meanwhile.

    python3 -I -S relay.py --listen 127.0.0.1:PORT --to /run/ci-evals/model.sock \
        [--unset NAME]... -- ARGV...

The sandbox has a network namespace of its own, so its 127.0.0.1 is not the
host's. This script listens on 127.0.0.1:PORT inside it, starts ARGV (stdin,
stdout and stderr passed through untouched: the SDK speaks JSON lines over
them), copies the bytes of every TCP connection to and from a new connection
to the Unix socket (which the host side forwards to the model endpoint), and
exits with ARGV's exit status, or 128+N when a signal N ended it. Signals sent
to the relay (SIGTERM, SIGINT, SIGHUP) are passed on to ARGV.

The relay makes itself non-dumpable before anything else (`_nondumpable`; it
shares the agent's uid and carries the model's traffic: docs/isolation.md); a
relay that cannot clear the flag runs nothing and exits 127. Standard library
only, no ci_evals imports: the package is not visible inside the sandbox. The
listening socket is bound before ARGV starts, so ARGV never sees a refused
connection.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from types import FrameType

_CHUNK = 64 * 1024
_FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


def _nondumpable() -> None:
    """Clear this process's dumpable flag and read it back: its /proc files become
    root's, which no process of the sandbox (no CAP_SYS_PTRACE) can open."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, ctypes.c_ulong(0), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    flag = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    if flag != 0:
        raise OSError(ctypes.get_errno(), f"still dumpable ({flag}) after PR_SET_DUMPABLE 0")


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until `source` ends, then half-close `sink` (keep-alive and SSE stay intact)."""
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _relay(client: socket.socket, target: str) -> None:
    """Join one accepted TCP connection to a new connection to the Unix socket `target`."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError as exc:
        print(f"relay: cannot reach {target}: {exc}", file=sys.stderr)
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, target: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_relay, args=(client, target), daemon=True).start()


def _listen(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(64)
    return listener  # not inheritable (PEP 446): ARGV does not get it


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


USAGE = "usage: relay.py --listen HOST:PORT --to SOCKET [--unset NAME]... -- ARGV..."


def _parse(argv: list[str]) -> tuple[str, str, list[str], list[str]]:
    """(listen, to, unset, command) from the command line (argparse costs ~15 ms to import)."""
    options: dict[str, list[str]] = {"--listen": [], "--to": [], "--unset": []}
    rest = list(argv)
    while rest and rest[0] != "--":
        if rest[0] not in options or len(rest) < 2:
            raise ValueError(f"unexpected {rest[0]!r}")
        options[rest[0]].append(rest[1])
        del rest[:2]
    if len(options["--listen"]) != 1 or len(options["--to"]) != 1:
        raise ValueError("--listen and --to are needed, once each")
    if len(rest) < 2:
        raise ValueError("no command after --")
    return options["--listen"][0], options["--to"][0], options["--unset"], rest[1:]


def main(argv: list[str] | None = None) -> int:
    try:  # first: nothing of ours is readable while the flag is still set
        _nondumpable()
    except OSError as exc:
        print(f"relay: cannot make itself non-dumpable: {exc}", file=sys.stderr)
        return 127
    try:
        listen, target, unset, command = _parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"relay: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    for name in unset:
        os.environ.pop(name, None)
    listener = _listen(listen)  # bound before ARGV starts; accepted once we serve
    child = os.fork()  # before any thread is started
    if child == 0:  # pragma: no cover - replaced by exec
        for signum in _FORWARDED_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)  # noqa: S606 - an argv, no shell
        except OSError as exc:
            print(f"relay: cannot run {command[0]}: {exc}", file=sys.stderr)
        os._exit(127)

    # ARGV alone holds its stdin and stdout (the Claude CLI's sockets to the SDK),
    # should a process of the sandbox ever reach the relay's memory after all.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)

    def forward(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in _FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    threading.Thread(target=_serve, args=(listener, target), daemon=True).start()
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return _exit_code(status)


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: the relay threads need none, and it costs ~50 ms
