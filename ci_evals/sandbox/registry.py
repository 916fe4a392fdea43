"""Sandbox backends by name. Adding one is a module and a line in `SANDBOXES`.

Backends are imported on first use; an unknown name lists the valid ones.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from ci_evals.errors import UserError
from ci_evals.sandbox import docker_seccomp
from ci_evals.sandbox.base import Sandbox, SandboxSpec
from ci_evals.sandbox.limits import Enforced, create_cgroup, enforced

# Namespaces (bubblewrap) by default: see docs/isolation.md for where they are
# unavailable, and `--isolation none`.
DEFAULT_SANDBOX = "bwrap"

# name -> (module, class). The class takes a SandboxSpec; a module-level
# `available() -> str | None` says why it cannot run here (None: it can).
SANDBOXES: dict[str, tuple[str, str]] = {
    "local": ("ci_evals.sandbox.local", "LocalSandbox"),
    "bwrap": ("ci_evals.sandbox.bwrap", "BwrapSandbox"),
    "docker": ("ci_evals.sandbox.docker", "DockerSandbox"),
}


def _module(name: str) -> object:
    if name not in SANDBOXES:
        valid = ", ".join(sorted(SANDBOXES))
        raise UserError(f"unknown sandbox {name!r}", hint=f"valid sandboxes: {valid}")
    return importlib.import_module(SANDBOXES[name][0])


def isolates(name: str) -> bool:
    """Whether sandbox `name` keeps the agent from the host (`local` does not)."""
    return bool(getattr(getattr(_module(name), SANDBOXES[name][1]), "isolated", False))


def unavailable(name: str) -> str | None:
    """Why sandbox `name` cannot run on this machine, in one line; None when it can."""
    check = getattr(_module(name), "available", None)
    return None if check is None else cast("Callable[[], str | None]", check)()


def limits_of(name: str) -> Enforced:
    """What a sandbox of kind `name` holds its processes to here (probing for a cgroup)."""
    spec = SandboxSpec(writable=())
    if name == "docker":
        seccomp = docker_seccomp.SUMMARY
        return Enforced("docker", spec.pids, spec.memory_bytes, None, None, None, seccomp)
    cgroup = create_cgroup(pids=spec.pids, memory_bytes=spec.memory_bytes)
    if cgroup is not None:
        cgroup.remove()
    return enforced(spec, cgroup)


def choose(requested: str, *, secrets: Sequence[str]) -> str:
    """The sandbox a command uses; a one-line warning on stderr when it is `local`.

    `requested` is the suite's `sandbox:` or `--isolation` (`none` = `local`).
    When it cannot run here and the host may stand in for it (not for
    `docker`, whose image is part of the task): with `secrets` in our environment (names of
    credentials a hostile agent could read from this process's /proc entry)
    the command stops before anything starts; without any (the stub model, the
    user's own script) it goes on unisolated, saying so.
    """
    kind = "local" if requested == "none" else requested
    if kind == "local":
        _warn(
            "the agent runs unisolated (sandbox: local, or --isolation none): it can "
            "read this machine's secrets and write anywhere you can"
        )
        return kind
    why = unavailable(kind)
    if why is None:
        return kind
    if not getattr(getattr(_module(kind), SANDBOXES[kind][1]), "host_stands_in", True):
        raise UserError(f"cannot start the {kind} sandbox: {why}")
    if secrets:
        raise UserError(
            f"cannot isolate the agent: {why}; {', '.join(secrets)} would be readable by it",
            hint="install it (docs/isolation.md), or pass --isolation none to run unisolated",
        )
    _warn(f"{why}; the agent runs unisolated (no credential is at stake)")
    return "local"


def _warn(text: str) -> None:
    print(f"ci-evals: warning: {text}", file=sys.stderr, flush=True)


# What a command fixed for every sandbox of one kind it opens (`configure`): the
# suite's `image:` (built to a tag) and `network:`, and the run id. The runner,
# the agents and the graders pass only the kind along, so the command line (the
# edge that built the image) says it once here; a spec's own values win.
_SETTINGS: dict[str, dict[str, object]] = {}


def configure(
    name: str, *, image: str | None = None, network: bool = False, run_id: str | None = None
) -> None:
    """Fill `image`, `network` and `run_id` into every spec of kind `name` opened
    from now on in this process (where the spec leaves them unset)."""
    _SETTINGS[name] = {"image": image, "network": network, "run_id": run_id}


def configured(name: str, spec: SandboxSpec) -> SandboxSpec:
    """`spec` with what `configure` fixed for kind `name` where it has nothing."""
    settings = _SETTINGS.get(name, {})
    unset = {key: value for key, value in settings.items() if not getattr(spec, key)}
    return dataclasses.replace(spec, **unset) if unset else spec  # type: ignore[arg-type]


# Every sandbox open in this process, so `close_all` can end them from another
# thread: graders run in worker threads, which Ctrl-C does not interrupt.
_OPEN: set[Sandbox] = set()
_OPEN_LOCK = threading.Lock()


@contextmanager
def open_sandbox(name: str, spec: SandboxSpec) -> Iterator[Sandbox]:
    """A sandbox of kind `name` for `spec`, closed (nothing left running) on exit."""
    cls = getattr(_module(name), SANDBOXES[name][1])
    sandbox: Sandbox = cls(configured(name, spec))
    with _OPEN_LOCK:
        _OPEN.add(sandbox)
    try:
        yield sandbox
    finally:
        with _OPEN_LOCK:
            _OPEN.discard(sandbox)
        sandbox.close()


def close_all() -> None:
    """Close every sandbox still open (idempotent for each): on the way out of an
    interrupted command, whose worker threads may still be inside `exec`."""
    with _OPEN_LOCK:
        still_open = list(_OPEN)
    for sandbox in still_open:
        sandbox.close()
