"""Sandbox backends by name. Adding one is a module and a line in `SANDBOXES`.

Backends are imported on first use; an unknown name lists the valid ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

from ci_evals.errors import UserError
from ci_evals.sandbox.base import Sandbox, SandboxSpec

# name -> (module, class). The class takes a SandboxSpec; a module-level
# `available() -> str | None` says why it cannot run here (None: it can).
SANDBOXES: dict[str, tuple[str, str]] = {
    "local": ("ci_evals.sandbox.local", "LocalSandbox"),
    "bwrap": ("ci_evals.sandbox.bwrap", "BwrapSandbox"),
}


def _module(name: str) -> object:
    if name not in SANDBOXES:
        valid = ", ".join(sorted(SANDBOXES))
        raise UserError(f"unknown sandbox {name!r}", hint=f"valid sandboxes: {valid}")
    return importlib.import_module(SANDBOXES[name][0])


def unavailable(name: str) -> str | None:
    """Why sandbox `name` cannot run on this machine, in one line; None when it can."""
    check = getattr(_module(name), "available", None)
    return None if check is None else cast("Callable[[], str | None]", check)()


@contextmanager
def open_sandbox(name: str, spec: SandboxSpec) -> Iterator[Sandbox]:
    """A sandbox of kind `name` for `spec`, closed (nothing left running) on exit."""
    cls = getattr(_module(name), SANDBOXES[name][1])
    sandbox: Sandbox = cls(spec)
    try:
        yield sandbox
    finally:
        sandbox.close()
