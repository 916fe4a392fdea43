"""`replay:PATH`: a recorded run's model exchanges served back (docs/replay.md).

PATH is a run folder made with `run --record` (the real API or the stub), a
recording promoted into the repository (`recordings/NAME/`), or the
`model-exchanges.jsonl` itself. Each request is matched by its normalised key
(`key`); one the recording has no answer for makes its stage an `error`
naming the request. No credential and no network: a replay is free and, for
a recorded run, deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.endpoints.base import EndpointOptions, OpenEndpoint
from ci_evals.errors import UserError

if TYPE_CHECKING:
    from ci_evals.endpoints.replay.recording import RecordedRun, Recording

PREFIX = "replay:"


class ReplayEndpoint:
    def __init__(self, source: Path) -> None:
        self.source = source
        self.name = f"{PREFIX}{source}"
        self._loaded: tuple[Recording, RecordedRun] | None = None

    def check(self, environ: Mapping[str, str], why: str, hint: str | None = None) -> None:
        self._load()  # a missing or broken recording fails now, with its file:line

    def _load(self) -> tuple[Recording, RecordedRun]:
        """The recording and what its run's results say of it: the model it asked for
        and what answered (both read, and checked, before anything runs)."""
        from ci_evals.endpoints.replay.recording import load_recording, recorded_run  # noqa: PLC0415

        if self._loaded is None:
            recording = load_recording(self.source)
            self._loaded = recording, recorded_run(recording.path.parent)
        return self._loaded

    @contextmanager
    def open(self, environ: Mapping[str, str], options: EndpointOptions) -> Iterator[OpenEndpoint]:
        from ci_evals.endpoints.replay.server import ReplayServer  # noqa: PLC0415
        from ci_evals.results.model import ReplayedFrom  # noqa: PLC0415

        recording, recorded = self._load()
        with ReplayServer(recording) as server:
            yield OpenEndpoint(
                name=self.name,
                env=server.cli_env(),
                model=recorded.model or options.default_model,
                new_caller=server.new_caller,
                replayed_from=ReplayedFrom(
                    origin=recorded.origin or "unknown",
                    model=recorded.model,
                    recorded_on=recorded.recorded_on,
                ),
            )


class _ReplayKind:
    name = "replay"

    def load(self, value: str | None) -> Path:
        if not value:
            raise UserError(
                "--model replay: needs a recorded run", field="--model", hint="replay:RUN_DIR"
            )
        return Path(value)

    def available(self) -> str | None:
        return None  # it serves on the loopback, offline

    def create(self, options: object) -> ReplayEndpoint:
        assert isinstance(options, Path)  # what `load` gave
        return ReplayEndpoint(options)


KIND = _ReplayKind()
