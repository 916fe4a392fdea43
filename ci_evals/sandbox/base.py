"""The Sandbox Protocol: where an agent's CLI, its tools and the graders that run
its code execute.

A sandbox is opened per stage (and per reviewer or command grader run) from a
`SandboxSpec` — the folders it may write, the extra paths it may read, the one
model endpoint it may reach — and closed when that stage ends; `close()` leaves
nothing running. Backends (`local`, `bwrap`, `docker`) differ in how much
of the host the agent can see, never in how callers use them:

- `spawn()` turns an argv into the host argv/env/cwd of a long-lived process
  the caller drives itself (the CLI the SDK talks to over stdin/stdout);
- `exec()` runs an argv to its end with a timeout and an output cap
  (`ci_evals.process.ExecResult`; `merge_stderr` keeps both streams in order);
- `put()` / `get()` move files in and out by their path inside the sandbox.

Paths (`cwd`, `put`, `get`) are the host's: `local` and `bwrap` show every
folder at its own path, `docker` shows the first writable folder (the
workspace) at `/workspace` and translates (`DockerSandbox.inner_path`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ci_evals.process import ExecResult

DEFAULT_OUTPUT_CAP = 64 * 1024


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandbox is made of."""

    writable: tuple[Path, ...]  # bound read-write: the workspace, the plugin copy, private HOME/TMP
    readonly: tuple[Path, ...] = ()  # extra read-only paths (e.g. the agent CLI's binary)
    # The one address the agent may reach (the model endpoint, on the loopback);
    # an isolating sandbox makes `http://HOST:PORT` work inside and nothing else.
    endpoint: tuple[str, int] | None = None
    network: bool = False  # full network, only when a suite asks for it
    # The sandbox's own /tmp (memory, in an isolating sandbox): a cap, so that
    # filling it cannot take the machine's memory.
    tmp_bytes: int = 1 << 30
    # What a container backend (`docker`) also needs.
    image: str | None = None  # the image tag (`ci-evals/<name>:<hash>`, sandbox.images)
    run_id: str | None = None  # labels what it starts, so `ci-evals gc` knows the run
    # Limits (sandbox/limits.py): docker enforces cpus, memory and pids; bwrap
    # and local the pids and memory through a cgroup where one can be made,
    # and always the rlimits (address space per process, size per file) and a
    # checked quota on what the writable folders may grow by while open.
    cpus: float = 1.0
    memory_bytes: int = 1 << 30
    pids: int = 256
    # A command grader's results folder (host, empty, the caller's): the command
    # runs as the grader's identity, which alone can write it, and starts the
    # code under test as another (`grader_identity`).
    grader_results: Path | None = None
    address_space_bytes: int | None = 8 << 30  # the CLI's runtime reserves address space
    disk_bytes: int | None = 1 << 30  # the runner sets a stage's limits.max_output_mb


def without_proxies(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less every `*_PROXY` variable, in any case: for a sandbox with no network,
    where a proxy is unreachable and its URL may carry a password."""
    return {name: value for name, value in env.items() if not name.upper().endswith("_PROXY")}


@dataclass(frozen=True)
class Spawn:
    """How to start a process on the host so that it runs inside the sandbox."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(repr=False)  # may hold the endpoint's per-run token
    cwd: Path


class Sandbox(Protocol):
    """One backend; see the module doc."""

    name: str
    isolated: bool  # False for `local`: the results and reports say so

    def spawn(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Spawn: ...

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
    ) -> ExecResult: ...

    def put(self, path: Path, data: bytes) -> None: ...

    def get(self, path: Path) -> bytes: ...

    def close(self) -> None: ...
