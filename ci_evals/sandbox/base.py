"""The Sandbox Protocol: where an agent's CLI, its tools and the graders that run
its code execute.

A sandbox is opened per stage (and per reviewer or command grader run) from a
`SandboxSpec` — the folders it may write, the extra paths it may read, the one
model endpoint it may reach — and closed when that stage ends; `close()` leaves
nothing running. Backends (`local`, `bwrap`, `docker`) differ in how much of the
host the agent can see (docs/isolation.md), never in how callers use them:
`spawn()` gives the host argv/env/cwd of a long-lived process the caller drives
(the CLI the SDK talks to), `exec()` runs an argv to its end with a timeout and an
output cap (`ci_evals.process.ExecResult`), `put()` / `get()` move files. Paths
are the host's (`docker` shows the workspace at `/workspace` and translates:
`DockerSandbox.inner_path`).

A backend is a `SandboxKind` (registered by name in `registry`, or by a package's
`ci_evals.sandboxes` entry point): it reads its own block of the suite
(`sandbox: {kind: K, ...}` -> its `SandboxOptions`), says whether it can run
here, prepares what a run needs once, and opens sandboxes. What a command chose,
a `SandboxConfig`, is passed to everything that opens one; nothing is set
process-wide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ci_evals.process import ExecResult

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

DEFAULT_OUTPUT_CAP = 64 * 1024


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandbox is made of."""

    writable: tuple[Path, ...]  # bound read-write: the workspace, the plugin copy, private HOME/TMP
    readonly: tuple[Path, ...] = ()  # extra read-only paths (e.g. the agent CLI's binary)
    # The one address the agent may reach (the model endpoint, on the loopback);
    # an isolating sandbox makes `http://HOST:PORT` work inside and nothing else.
    endpoint: tuple[str, int] | None = None
    # The sandbox's own /tmp (memory, in an isolating sandbox): a cap, so that
    # filling it cannot take the machine's memory.
    tmp_bytes: int = 1 << 30
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


class SandboxLost(Exception):
    """The sandbox can run nothing more: its engine stopped answering, or its
    container died (the kernel's OOM killer, at its memory limit). Not an
    `OSError`, which a tool reports to the model as its command's failure: every
    later call would fail the same way, so this ends the stage (or the grader) as
    an `error`. Its text is one line naming the cause and what became of the
    container."""


@runtime_checkable
class MemoryWatch(Protocol):
    """A sandbox that can tell when the kernel killed one of its processes at its
    memory limit (a cgroup's OOM kill; a container's `OOMKilled`)."""

    @property
    def memory_killed(self) -> int | None:
        """The memory limit in bytes, once a process was killed at it; else None."""


class Sandbox(Protocol):
    """One backend; see the module doc."""

    name: str
    isolated: bool  # False for `local`: the results and reports say so

    @property
    def over_quota(self) -> bool:
        """Its writable folders grew past `SandboxSpec.disk_bytes` while it ran, and it
        killed everything it ran (False for a kind that does not watch them)."""

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


@dataclass(frozen=True)
class Enforced:
    """What a sandbox of one kind enforces (recorded in results.json, `limits`)."""

    mechanism: str  # "cgroup v1" / "cgroup v2" + "rlimit", "rlimit", "docker"
    pids: int
    memory_bytes: int | None  # None: no cgroup (only the per-process address space)
    address_space_bytes: int | None
    disk_bytes: int | None  # what the writable folders may grow by while it runs
    seccomp: str | None = None  # the filter every process runs under (None: none)


@dataclass(frozen=True)
class SandboxOptions:
    """A kind's own settings (`sandbox: {kind: K, ...}`); kinds with more subclass it."""

    # Whether what runs inside may reach the network (results and reports say so).
    network: bool = False


@dataclass(frozen=True)
class SandboxConfig:
    """Where a command runs agents and graders' programs: a kind and its options,
    prepared (`SandboxKind.prepare`) before the first sandbox opens."""

    kind: str = "local"
    options: SandboxOptions = field(default_factory=SandboxOptions)


class SandboxKind(Protocol):
    """One sandbox backend, as the registry knows it."""

    @property
    def name(self) -> str: ...

    @property
    def isolated(self) -> bool:
        """It keeps the agent from the host (False for `local`: results say so)."""

    @property
    def falls_back_to_host(self) -> bool:
        """When it cannot run here, the command may fall back to running on the host
        (`local`) when no credential is at stake; False when what it runs on is part
        of the task (an image)."""

    @property
    def runs_images(self) -> bool:
        """It runs a ready image (`image_options`): `mcp-check --image` uses such a kind."""

    def load(self, value: LocatedNode | None, suite_dir: Path) -> SandboxOptions:
        """Its options from its block of the suite (None: the suite named it bare, or
        `--isolation` chose it); mistakes are `LocatedNode.error`s, at their file:line."""

    def available(self) -> str | None:
        """Why it cannot run on this machine, in one line; None when it can."""

    def prepare(
        self, options: SandboxOptions, environ: Mapping[str, str], run_id: str | None
    ) -> SandboxOptions:
        """`options` ready for `open` (e.g. an image built and tagged), once per command."""

    def image_options(self, image: str) -> SandboxOptions:
        """Options that run the ready image `image` (only when `runs_images`)."""

    def limits(self) -> Enforced:
        """What its sandboxes hold their processes to here."""

    def open(self, spec: SandboxSpec, options: SandboxOptions) -> Sandbox:
        """A new sandbox for `spec`; the caller closes it."""


# The default for callers that are not told where to run: on the host, unisolated.
ON_HOST = SandboxConfig()
