"""A variable wiped from what `/proc/<our pid>/environ` shows, not only from `os.environ`.

`/proc/<pid>/environ` is read from the process's own memory: the block the
kernel copied onto the new stack at `execve`, between `mm->env_start` and
`mm->env_end` (fields 50 and 51 of `/proc/<pid>/stat`). `os.environ.pop`
calls `unsetenv`, which only drops the C library's pointer to the entry;
the bytes stay where they were and any process of our uid reads them there.
So `hide` overwrites every `NAME=value` entry of that block in place with
NULs, then reads `/proc/self/environ` back and raises unless no entry of the
name is left (fail closed: the caller refuses to go on holding the secret).

Why not a re-exec without the variable (the value passed on an inherited
pipe): the block of the process that started us (the CI step's shell) would
still show it, as ours would until the exec; a write into our own stack is
one call and is verified where it matters, in `/proc`. The value may still be
in our heap (Python's copy, freed, not cleared): that memory is readable only
through `/proc/<pid>/mem` or ptrace, which need ptrace rights over us.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from pathlib import Path

_PROC = Path("/proc/self")
# Fields 50 and 51 of /proc/<pid>/stat, counted from the one after the ")" that
# ends the command name (field 3), which may itself hold spaces and ")".
_ENV_START = 50 - 3
_ENV_END = 51 - 3


def hide(name: str) -> None:
    """Overwrite each `name=...` entry of this process's initial environment block with
    NULs (take it out of `os.environ` first); OSError unless `/proc/self/environ`
    then shows none. Does nothing where there is no `/proc` environ (not Linux)."""
    if not sys.platform.startswith("linux"):
        return
    prefix = name.encode() + b"="
    start, end = _block()
    block = ctypes.string_at(start, end - start)
    offset = 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefix):
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1
    shown = (_PROC / "environ").read_bytes()
    if any(entry.startswith(prefix) for entry in shown.split(b"\0")):
        raise OSError(f"/proc/self/environ still shows {name}")


def _block() -> tuple[int, int]:
    """The addresses of the initial environment block (`env_start`, `env_end`)."""
    fields = (_PROC / "stat").read_bytes().rpartition(b")")[2].split()
    start, end = int(fields[_ENV_START]), int(fields[_ENV_END])
    if not 0 < start <= end:
        raise OSError("/proc/self/stat gives no environment block")
    return start, end


def hide_kept(names: Iterable[str]) -> None:
    """`hide` each of `names` that `os.environ` holds, yet keep it there: the value is
    set again (`putenv` copies it to the heap, which `/proc/<pid>/environ` does not
    show), so what reads `os.environ` in this process (the model proxy, the judge)
    and the children we start with it still get it; OSError as `hide`."""
    for name in sorted(set(names)):
        value = os.environ.get(name)
        if value is None:
            continue
        hide(name)
        os.environ[name] = value
