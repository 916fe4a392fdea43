"""`stub:PATH`: the stub model (`stub_model`) serving a script on 127.0.0.1.

No credential: the run needs no key and can run anywhere, offline. With
`--record` the stub writes every exchange as the forwarding proxy does, so a
stub run can be replayed (`replay:RUN_DIR`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.endpoints.base import EndpointOptions, OpenEndpoint
from ci_evals.errors import UserError

if TYPE_CHECKING:
    from ci_evals.endpoints.stub_model import Script

PREFIX = "stub:"


class StubEndpoint:
    def __init__(self, script: Path) -> None:
        self.script = script
        self.name = f"{PREFIX}{script}"
        self._loaded: Script | None = None

    def check(self, environ: Mapping[str, str], why: str, hint: str | None = None) -> None:
        self._load()  # a broken script fails now, with its file:line

    def _load(self) -> Script:
        from ci_evals.endpoints.stub_model import load_script  # noqa: PLC0415 - heavy

        if self._loaded is None:
            self._loaded = load_script(self.script)
        return self._loaded

    @contextmanager
    def open(self, environ: Mapping[str, str], options: EndpointOptions) -> Iterator[OpenEndpoint]:
        from ci_evals.endpoints.stub_model import StubServer  # noqa: PLC0415

        with StubServer(self._load(), record_path=options.record_path) as server:
            yield OpenEndpoint(
                name=self.name,
                env=server.cli_env(),
                model=options.default_model,
                watch=server.watch,
            )


class _StubKind:
    name = "stub"

    def load(self, value: str | None) -> Path:
        if not value:
            raise UserError("--model stub: needs a script path", field="--model", hint="stub:PATH")
        return Path(value)

    def available(self) -> str | None:
        return None  # it serves on the loopback, offline

    def create(self, options: object) -> StubEndpoint:
        assert isinstance(options, Path)  # what `load` gave
        return StubEndpoint(options)


KIND = _StubKind()
