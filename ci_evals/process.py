"""The one way ci-evals runs a program to completion: argv in, `ExecResult` out.

git, command graders and every sandbox backend start processes through
`run`: an argv list (never a shell string), its own session and process group
(so a timeout, Ctrl-C or a normal exit also ends the helpers it started),
stdin given or empty, stdout and stderr each kept up to a cap (the tail: a
compiler's last errors matter most), and the exit code, output and a
`timed_out` flag returned even when the program fails.

Streaming processes the caller drives itself (git's `diff-tree --stdin`, an
MCP server on stdio) are started with `ProcessGroup`: the same own session and
group, and `stop()` ending all of it — SIGTERM, a grace, SIGKILL, reaped. The
exceptions (tests/test_claims.py lists them): the agent CLI, which the
claude-agent-sdk transport starts (`anyio.open_process`, `agents.claude`), with
its own session likewise; and the two scripts that run as programs of their own,
`sandbox.launch` and `sandbox.relay`, which fork and exec what they were started
for.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

UNCAPPED = -1
# How long a group has between SIGTERM and SIGKILL when `stop()` finds it running.
GRACE_S = 2.0
# How long to wait for the output pipes after the process exited: a process
# that left the group (setsid) may keep them open; its output so far is kept.
_DRAIN_S = 2.0


@dataclass(frozen=True)
class ExecResult:
    """How a program ended. `returncode` is None when it was killed on timeout."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    stdout_dropped: int = 0  # bytes cut from the front of stdout by the cap
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    timeout: float | None = None,
    output_cap: int = UNCAPPED,
    merge_stderr: bool = False,
    groups: set[int] | None = None,
) -> ExecResult:
    """Run `argv` to its end (or `timeout`), then kill whatever is left of its group.

    `env` is the whole environment (None: this process's). `output_cap` keeps
    the last N bytes of each stream (`UNCAPPED`: all). `merge_stderr` sends
    stderr into stdout, in order. `groups`, when given, holds the process
    group while it runs, so another thread can end it early (`kill_group`).
    Raises OSError when the program cannot start.
    """
    start = time.monotonic()
    if output_cap == UNCAPPED and not merge_stderr and groups is None:
        return _run_whole(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout, start=start)
    group = ProcessGroup(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
    )
    proc = group.proc
    if groups is not None:
        groups.add(proc.pid)
    streams = [_Tail(proc.stdout, output_cap)]
    if not merge_stderr:
        streams.append(_Tail(proc.stderr, output_cap))
    feeder = None
    if stdin is not None:
        feeder = threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True)
        feeder.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # Also on a normal exit and on Ctrl-C: nothing it started may outlive it.
        group.stop(grace_s=0.0)  # run's contract: killed at the deadline, no grace
        if groups is not None:
            groups.discard(proc.pid)
        for stream in streams:
            stream.finish()
        if feeder is not None:
            feeder.join(timeout=_DRAIN_S)
    out = streams[0]
    err = streams[1] if len(streams) > 1 else None
    return ExecResult(
        argv=tuple(argv),
        returncode=None if timed_out else proc.returncode,
        stdout=out.data(),
        stderr=err.data() if err else b"",
        timed_out=timed_out,
        stdout_dropped=out.dropped,
        duration_s=time.monotonic() - start,
    )


def _run_whole(
    argv: Sequence[str],
    *,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    stdin: bytes | None,
    timeout: float | None,
    start: float,
) -> ExecResult:
    # Everything kept, read with one `selectors` loop (no threads: git's calls
    # on the compute-stage path take this branch). Unlike `communicate`, it
    # stops waiting `_DRAIN_S` after the program ended even when a process that
    # left the group (ssh's ControlPersist master) still holds a pipe open.
    stdin_mode = subprocess.PIPE if stdin is not None else subprocess.DEVNULL
    with ProcessGroup(argv, cwd=cwd, env=env, stdin=stdin_mode) as group:
        proc = group.proc
        try:
            stdout, stderr, timed_out = _collect(proc, stdin, timeout)
        finally:  # helpers it left behind; on Ctrl-C the group is not in the foreground
            group.stop(grace_s=0.0)
    took = time.monotonic() - start
    code = None if timed_out else proc.returncode
    return ExecResult(tuple(argv), code, stdout, stderr, timed_out, duration_s=took)


_POLL_S = 0.05  # how often to look whether the program ended while its pipes stay open


def _collect(
    proc: subprocess.Popen[bytes], stdin: bytes | None, timeout: float | None
) -> tuple[bytes, bytes, bool]:
    """Feed `stdin`, read both pipes to EOF (or `_DRAIN_S` after the program
    ended), kill the group at `timeout`. Returns stdout, stderr, timed out."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out: [], err: []}
    deadline = None if timeout is None else time.monotonic() + timeout
    drain_until: float | None = None
    timed_out = False
    feeder = _Feeder(proc.stdin, stdin)
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        feeder.register(selector)
        while selector.get_map():
            now = time.monotonic()
            if drain_until is None and proc.poll() is not None:
                drain_until = now + _DRAIN_S  # it ended: wait a little for what it wrote
            if drain_until is None and deadline is not None and now >= deadline:
                timed_out = True
                kill_group(proc.pid)
                drain_until = now + _DRAIN_S
            if drain_until is not None and now >= drain_until:
                break
            wait = _POLL_S if drain_until is None else drain_until - now
            if deadline is not None and drain_until is None:
                wait = min(wait, deadline - now)
            for key, _ in selector.select(max(0.0, wait)):
                if key.fd not in chunks:
                    feeder.write(selector)
                elif data := os.read(key.fd, 65536):
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
    proc.wait()
    return b"".join(chunks[out]), b"".join(chunks[err]), timed_out


class _Feeder:
    """Writes `data` to a child's stdin as the pipe takes it (no thread)."""

    def __init__(self, pipe: IO[bytes] | None, data: bytes | None) -> None:
        self._pipe = pipe
        self._left = memoryview(data or b"")

    def register(self, selector: selectors.BaseSelector) -> None:
        if self._pipe is None:
            return
        if not self._left:
            self._pipe.close()
            return
        os.set_blocking(self._pipe.fileno(), False)
        selector.register(self._pipe.fileno(), selectors.EVENT_WRITE)

    def write(self, selector: selectors.BaseSelector) -> None:
        assert self._pipe is not None
        try:
            self._left = self._left[os.write(self._pipe.fileno(), self._left[:65536]) :]
        except BlockingIOError:
            return
        except OSError:  # the program exited before reading it all
            self._left = self._left[:0]
        if not self._left:
            selector.unregister(self._pipe.fileno())
            with contextlib.suppress(OSError):
                self._pipe.close()


class ProcessGroup:
    """A program started as the leader of its own session and process group.

    Everything it starts stays in the group unless it calls setsid itself (the
    sandboxes find those). `stop()` ends the whole group and reaps the leader,
    waiting for nothing when the program has already exited (git's case);
    `close()` — also on leaving the `with` block: an error, Ctrl-C — closes
    the pipes too.
    `env` is the whole environment (None: this process's).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int = subprocess.PIPE,
        stdout: int = subprocess.PIPE,
        stderr: int = subprocess.PIPE,
    ) -> None:
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # its own group: stop() can end all of it
        )
        self.pid = self.proc.pid  # also the group's id

    def signal(self, signum: int) -> None:
        """Send `signum` to the whole group; nothing happens when it is gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def wait(self, timeout: float) -> int | None:
        """The leader's exit code once it exits within `timeout` s; None while it runs."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = GRACE_S) -> int:
        """SIGTERM the group while its leader runs, give the leader `grace_s` to
        exit, then SIGKILL the whole group and reap the leader. Returns its exit
        code. Its pipes stay open: what it wrote can still be read."""
        # The leader's exit is what is waited for: the group cannot be polled, as a
        # member that already died stays in it (a zombie) until init reaps it.
        if grace_s > 0 and self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        self.signal(signal.SIGKILL)  # what is left, also after a normal exit
        return self.proc.wait()

    def close(self, grace_s: float = GRACE_S) -> None:
        """`stop()`, then close our ends of its pipes."""
        self.stop(grace_s)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def kill_group(pgid: int) -> None:
    """SIGKILL a process group; nothing happens when it is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    if pipe is None:
        return
    with contextlib.suppress(OSError, ValueError):  # the program exited before reading it all
        pipe.write(data)
    with contextlib.suppress(OSError, ValueError):
        pipe.close()


class _Tail:
    """Reads a pipe on a thread, keeping at most `cap` bytes (the last ones)."""

    def __init__(self, pipe: IO[bytes] | None, cap: int) -> None:
        assert pipe is not None
        self._pipe = pipe
        self._cap = cap
        self._buffer = bytearray()
        self.dropped = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed under us
            while chunk := self._pipe.read1(65536):  # type: ignore[attr-defined]
                self._buffer.extend(chunk)
                if self._cap >= 0 and len(self._buffer) > self._cap:
                    cut = len(self._buffer) - self._cap
                    self.dropped += cut
                    del self._buffer[:cut]

    def finish(self) -> None:
        self._thread.join(timeout=_DRAIN_S)
        # A process that left the group may still hold the pipe: then the reader
        # is blocked in read and closing would block on its lock. Leave both to
        # end when that process does.
        if not self._thread.is_alive():
            self._pipe.close()

    def data(self) -> bytes:
        return bytes(self._buffer)
