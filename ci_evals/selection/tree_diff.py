"""`TreeDiffer`: the tree diffs of many folder pairs from one `git diff-tree --stdin`,
streamed as git finishes each pair (`PairSplitter` cuts its output per pair).

Selection's huge-diff path (`diff.diff_chunks`) uses it; the generic git
plumbing it builds on (`start`, `without_index`, `GitError`) stays in `ci_evals.git`,
which starts the process.
"""

from __future__ import annotations

import os
import select
import selectors
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from ci_evals import git

# Sent after each pair of trees; `diff-tree --stdin` echoes a line that is not
# an object id. No path starts with "/", so after a name's NUL it is a clear end.
_PAIR_END = b"/\n"


class TreeDiffer:
    """A `git diff-tree -r --stdin` process: the tree diffs of many pairs, streamed.

    `diffs` may be called once; `close` (or leaving the `with` block) stops
    git if it is still running. No threads: one `selectors` loop writes the
    pairs, reads the diffs and git's messages, and enforces the timeout (as
    `subprocess.communicate` does). Like `changed_entries`, it reads no index
    (`without_index`).
    """

    def __init__(self, repo: Path, *, timeout: float = git.DEFAULT_TIMEOUT) -> None:
        self.argv, self._group = git.start(
            repo, "diff-tree", "--stdin", "-r", "-z", "--name-only",
            "--no-renames", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none",
            env=git.without_index(),
        )  # fmt: skip
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self._proc = self._group.proc
        self._used = False

    def __enter__(self) -> TreeDiffer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def diffs(self, pairs: Sequence[tuple[str, str]]) -> Iterator[list[bytes]]:
        """`git diff-tree -r` of each (old tree id, new tree id) pair, in order, as git writes them.

        Yields lists of raw outputs, one per pair (its paths relative to the
        trees, each NUL-terminated), as soon as git has finished them, so a
        caller can work on the first folders of a huge diff while git computes
        the rest. The options are those of `changed_paths`. Raises `GitError`
        when git fails or times out.
        """
        assert not self._used, "diffs() runs once per process"
        self._used = True
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        request = memoryview(
            b"".join(f"{old} {new}\n".encode("ascii") + _PAIR_END for old, new in pairs)
        )
        splitter = PairSplitter([f"{old} {new}\n".encode("ascii") for old, new in pairs])
        errors: list[bytes] = []
        written = 0
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdin, selectors.EVENT_WRITE)
                selector.register(proc.stdout, selectors.EVENT_READ)
                selector.register(proc.stderr, selectors.EVENT_READ)
                while selector.get_map():  # until git's stdout and stderr close
                    remaining = self._deadline - time.monotonic()
                    if remaining <= 0:
                        raise git.GitError(
                            git.GitResult(self.argv, -1, b"", f"timed out after {self.timeout} s")
                        )
                    for key, _ in selector.select(remaining):
                        if key.fileobj is proc.stdin:
                            try:
                                written += os.write(key.fd, request[written : written + _CHUNK])
                            except BrokenPipeError:  # git stopped reading: its exit says why
                                written = len(request)
                            if written >= len(request):
                                selector.unregister(proc.stdin)
                                proc.stdin.close()
                            continue
                        data = os.read(key.fd, 1 << 16)
                        if not data:
                            selector.unregister(key.fileobj)
                        elif key.fileobj is proc.stdout:
                            done = splitter.feed(data)
                            if done:
                                yield done
                        else:
                            errors.append(data)
            proc.wait()
            if proc.returncode != 0 or not splitter.finished():
                message = b"".join(errors).decode("utf-8", "replace").strip()
                raise git.GitError(
                    git.GitResult(self.argv, proc.returncode, b"", message or "unexpected output")
                )
        finally:
            self.close()

    def close(self) -> None:
        # No grace: git holds no state worth a SIGTERM, and this is the hot path.
        self._group.close(grace_s=0.0)


# Bytes written to git's stdin at a time: a pipe that polls writable takes this
# many without blocking.
_CHUNK = select.PIPE_BUF


class PairSplitter:
    """Cuts `diff-tree --stdin` output into one piece per pair: `HEADER names... /\n`.

    Fed git's output as it arrives (in pieces cut anywhere); `feed` returns
    the pairs it completed. Each header must be the pair asked for, in order.
    """

    def __init__(self, headers: Sequence[bytes]) -> None:
        self.headers = headers
        self.index = 0  # the next pair
        self.buffer = bytearray()
        self.searched = 0  # where to resume looking for the current pair's end
        self.broken = False

    def feed(self, data: bytes) -> list[bytes]:
        buffer, headers = self.buffer, self.headers
        buffer += data
        done: list[bytes] = []
        pos = 0
        while self.index < len(headers) and not self.broken:
            header = headers[self.index]
            start = pos + len(header)
            if len(buffer) < start + len(_PAIR_END):
                break
            if buffer[pos:start] != header:
                self.broken = True
                break
            if buffer[start : start + len(_PAIR_END)] == _PAIR_END:
                end = start  # the trees differ in nothing git lists
            else:
                found = buffer.find(b"\0" + _PAIR_END, max(start, self.searched))
                if found == -1:
                    self.searched = max(len(buffer) - len(_PAIR_END), start)
                    break
                end = found + 1
            done.append(bytes(buffer[start:end]))
            pos = end + len(_PAIR_END)
            self.searched = 0
            self.index += 1
        if pos:
            del buffer[:pos]
            self.searched = max(self.searched - pos, 0)
        return done

    def finished(self) -> bool:
        """Every pair arrived, whole, and nothing else."""
        return not self.broken and self.index == len(self.headers) and not self.buffer
