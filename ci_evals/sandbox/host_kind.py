"""What the kinds that run processes on this host through the launcher (`local`,
`bwrap`) share: no options of their own, nothing to prepare, and the limits a
cgroup (where one can be made) and rlimits hold them to."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.sandbox.base import Enforced, Sandbox, SandboxOptions, SandboxSpec

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode


class HostKind:
    """A sandbox kind with no options, whose sandboxes `make(spec)` builds."""

    falls_back_to_host = True
    runs_images = False

    def __init__(
        self,
        name: str,
        *,
        isolated: bool,
        make: Callable[[SandboxSpec], Sandbox],
        available: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.name = name
        self.isolated = isolated
        self._make = make
        self._available = available

    def load(self, value: LocatedNode | None, suite_dir: Path) -> SandboxOptions:
        if value is not None:
            value.mapping(("kind",), what=f"mapping (sandbox {self.name} takes no options)")
        return SandboxOptions()

    def available(self) -> str | None:
        return self._available()

    def prepare(
        self, options: SandboxOptions, environ: Mapping[str, str], run_id: str | None
    ) -> SandboxOptions:
        return options

    def image_options(self, image: str) -> SandboxOptions:
        raise UserError(f"the {self.name} sandbox runs no images")

    def limits(self) -> Enforced:
        # cgroups, uuid: not for loading a suite, which only asks `load`.
        from ci_evals.sandbox.limits import create_cgroup, enforced  # noqa: PLC0415

        spec = SandboxSpec(writable=())
        cgroup = create_cgroup(pids=spec.pids, memory_bytes=spec.memory_bytes)
        if cgroup is not None:
            cgroup.remove()
        return enforced(spec, cgroup)

    def open(self, spec: SandboxSpec, options: SandboxOptions) -> Sandbox:
        return self._make(spec)
