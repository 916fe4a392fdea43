"""The `bwrap` kind as the registry knows it, without the sandbox's own imports.

Loading a suite asks the kind only to read its block (it takes no options):
the default kind stays light for the pre-commit hook that loads the suite.
`sandbox.bwrap` (sockets, the launcher, the relay) is imported to probe
bubblewrap or to open a sandbox.
"""

from __future__ import annotations

from ci_evals.sandbox.base import Sandbox, SandboxSpec
from ci_evals.sandbox.host_kind import HostKind


def _open(spec: SandboxSpec) -> Sandbox:
    from ci_evals.sandbox.bwrap import BwrapSandbox  # noqa: PLC0415 - see the module doc

    return BwrapSandbox(spec)


def _available() -> str | None:
    from ci_evals.sandbox.bwrap import available  # noqa: PLC0415 - see the module doc

    return available()


KIND = HostKind("bwrap", isolated=True, make=_open, available=_available)
