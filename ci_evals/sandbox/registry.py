"""Sandbox kinds by name (`ci_evals.registry`), and the one way to open a sandbox.

Built in: `local`, `bwrap`, `docker`; a package adds one with an entry point in
group `ci_evals.sandboxes` naming its `SandboxKind` (sandbox.base). Kinds are
imported on first use; an unknown name lists the known ones.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ci_evals.errors import UserError
from ci_evals.registry import Registry
from ci_evals.sandbox.base import Sandbox, SandboxConfig, SandboxKind, SandboxSpec

# Namespaces (bubblewrap) by default: see docs/isolation.md for where they are
# unavailable, and `--isolation none`.
DEFAULT_SANDBOX = "bwrap"
# Where a command runs when it asks for no isolation (`--isolation none`), and
# what stands in for an isolating kind that cannot run here (`choose`).
HOST = "local"

KINDS: Registry[SandboxKind] = Registry(
    "sandbox",
    "ci_evals.sandboxes",
    {
        "local": "ci_evals.sandbox.local:KIND",
        "bwrap": "ci_evals.sandbox.bwrap_kind:KIND",
        "docker": "ci_evals.sandbox.docker.kind:KIND",
    },
    protocol=SandboxKind,
)


def kind_of(config: SandboxConfig) -> SandboxKind:
    return KINDS.get(config.kind)


def offline(config: SandboxConfig) -> bool:
    """What runs in such a sandbox reaches no network: an isolating kind without
    `network: true` (the host, `local`, reaches whatever the host does)."""
    return kind_of(config).isolated and not config.options.network


def choose(
    requested: SandboxConfig, *, secrets: Sequence[str], may_fall_back_to_host: bool = True
) -> SandboxConfig:
    """The sandbox a command uses; a one-line warning on stderr when it is `local`.

    `requested` is the suite's `sandbox:` or `--isolation` (`none` = `local`).
    When its kind cannot run here and the host may stand in for it
    (`SandboxKind.falls_back_to_host`; not for `docker`, whose image is part of
    the task): with `secrets` in our environment (names of credentials a
    hostile agent could read from this process's /proc entry) the command
    stops before anything starts; without any (the stub model, the user's own
    script) it goes on unisolated, saying so, unless `may_fall_back_to_host` is
    False (in GitHub Actions, where only `--isolation none` runs unisolated).
    """
    kind = kind_of(requested)
    if not kind.isolated:
        _warn(
            f"the agent runs unisolated (sandbox: {kind.name}, or --isolation none): it can "
            "read this machine's secrets and write anywhere you can"
        )
        return requested
    why = kind.available()
    if why is None:
        return requested
    if not kind.falls_back_to_host:
        raise UserError(f"cannot start the {kind.name} sandbox: {why}")
    if secrets:
        raise UserError(
            f"cannot isolate the agent: {why}; {', '.join(secrets)} would be readable by it",
            hint="install it (docs/isolation.md), or pass --isolation none to run unisolated",
        )
    if not may_fall_back_to_host:
        raise UserError(
            f"cannot isolate the agent: {why}; in GitHub Actions it runs unisolated only "
            "when the command line says so",
            hint="install it (docs/isolation.md), or pass --isolation none to run unisolated",
        )
    _warn(f"{why}; the agent runs unisolated (no credential is at stake)")
    return SandboxConfig(HOST)


def _warn(text: str) -> None:
    print(f"ci-evals: warning: {text}", file=sys.stderr, flush=True)


# Every sandbox open in this process, so `close_all` can end them from another
# thread: graders run in worker threads, which Ctrl-C does not interrupt.
_OPEN: set[Sandbox] = set()
_OPEN_LOCK = threading.Lock()


@contextmanager
def open_sandbox(config: SandboxConfig, spec: SandboxSpec) -> Iterator[Sandbox]:
    """A sandbox of `config`'s kind and options for `spec`, closed (nothing left
    running) on exit."""
    sandbox = kind_of(config).open(spec, config.options)
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
