"""Backends by name, one shape for every seam (sandbox, agent, grader, endpoint).

A `Registry` maps a name to a backend's `Kind` object (the seam's `base.py`
says what a Kind is). Built-in kinds are `"module:attribute"` strings,
imported on first use, so naming one backend never imports the others. A name
that is not built in is looked up in the seam's entry-point group
(`ci_evals.sandboxes`, `ci_evals.agents`, `ci_evals.graders`,
`ci_evals.endpoints`; a registry with no group, such as the kinds of check,
holds its built-ins alone): a package that declares

    [project.entry-points."ci_evals.sandboxes"]
    k8s = "my_package.k8s:KIND"

adds `sandbox: {kind: k8s, ...}` with no edit here. Entry points are read only
then (reading installed metadata costs milliseconds the hot paths do not pay),
and a name is only ever looked up in the group, never imported as a module.
What such a kind raises is that package's failure, not a bug of ours: a seam
calls into it inside `theirs(name)`, which says so in one line naming the
package and its entry point.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from ci_evals.errors import UserError, write_traceback

if TYPE_CHECKING:
    from importlib import metadata

T = TypeVar("T")


class Registry(Generic[T]):
    """The kinds of one seam: `noun` names it in messages, `group` is its entry-point
    group (None: built-ins only), `protocol` the seam's Kind Protocol, whose public
    members a package's kind must have (checked when it loads)."""

    def __init__(
        self,
        noun: str,
        group: str | None,
        builtins: Mapping[str, str],
        protocol: type | None = None,
    ) -> None:
        self.noun = noun
        self.group = group
        self._builtins = dict(builtins)  # name -> "module:attribute"
        # A package's kind written against another version of the seam (a member
        # renamed since) would fail mid-run with an AttributeError; it is refused
        # when it loads instead, in one line naming what it lacks.
        self._members = (
            () if protocol is None else tuple(n for n in vars(protocol) if not n.startswith("_"))
        )
        self._loaded: dict[str, T] = {}
        self._plugins: dict[str, metadata.EntryPoint] | None = None
        self._lock = threading.Lock()

    @property
    def builtin(self) -> tuple[str, ...]:
        """The names this package ships, without reading any metadata."""
        return tuple(self._builtins)

    def names(self) -> tuple[str, ...]:
        """Every name: the built-ins, then those installed packages declare."""
        plugins = [name for name in self._entry_points() if name not in self._builtins]
        return (*self._builtins, *sorted(plugins))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._builtins or name in self._entry_points())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def get(self, name: str) -> T:
        """The kind registered as `name`; an unknown name is a `UserError` listing the known."""
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
        if name in self._builtins:
            module_name, _, attribute = self._builtins[name].partition(":")
            kind = getattr(importlib.import_module(module_name), attribute)
        elif name in self._entry_points():
            with self.theirs(name, "failed to load"):
                kind = self._entry_points()[name].load()
                missing = [m for m in self._members if not hasattr(kind, m)]
            if missing:
                raise UserError(
                    f"{self.noun} {name!r} ({self.origin(name)}) lacks {', '.join(missing)}",
                    hint="it was written for another version of ci-evals' backends "
                    "(CHANGELOG.md names renamed members): update or uninstall that package",
                )
        else:
            raise self.unknown(name)
        with self._lock:
            self._loaded.setdefault(name, cast("T", kind))
            return self._loaded[name]

    def origin(self, name: str) -> str | None:
        """Which package and entry point provide kind `name`; None for a built-in one
        (or a name nobody registered)."""
        if name in self._builtins:
            return None
        entry = self._entry_points().get(name)
        if entry is None:
            return None
        dist = entry.dist
        package = f"package {dist.name} {dist.version}, " if dist is not None else ""
        return f"{package}entry point {entry.name} = {entry.value} in group {self.group}"

    @contextmanager
    def theirs(
        self, name: str, what: str = "failed", *, passing: BaseException | None = None
    ) -> Iterator[None]:
        """Around a call into kind `name`: when another package provides it, an
        exception it raises becomes one line naming that package and its entry point
        (its traceback logged), not "a bug in ci-evals". A `UserError` is its message
        to the user and passes as it is, and so does `passing` (the caller's own
        exception, which the kind's context manager may raise again on its way out)."""
        origin = self.origin(name)
        if origin is None:
            yield
            return
        try:
            yield
        except UserError:
            raise
        except Exception as exc:
            if exc is passing:
                raise
            log = write_traceback(exc)
            raise UserError(
                f"{self.noun} {name!r} ({origin}) {what}: {type(exc).__name__}: {exc}",
                hint=f"a bug in that package, not in ci-evals: fix, update or uninstall it; "
                f"traceback in {log}",
            ) from exc

    def unknown(self, name: str) -> UserError:
        """The error for a name nobody registered (callers add file:line with
        `LocatedNode.error`)."""
        hint = f"known: {', '.join(self.names())}"
        if self.group is not None:
            hint += f"; a package adds one with an entry point in group {self.group}"
        return UserError(f"unknown {self.noun} {name!r}", hint=hint)

    def _entry_points(self) -> dict[str, metadata.EntryPoint]:
        if self._plugins is None:
            if self.group is None:
                found = {}  # built-ins only: no metadata to read
            else:
                from importlib import metadata  # noqa: PLC0415 - only for a name not built in

                found = {ep.name: ep for ep in metadata.entry_points(group=self.group)}
            self._plugins = found
        return self._plugins
