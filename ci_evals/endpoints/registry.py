"""Where reviewers (and agents) get their model: the real API, or the stub.

`--model stub:PATH` starts the stub model serving that script for as long as
the command runs; any other `--model NAME` (or none) uses the real API, which
needs `ANTHROPIC_API_KEY` (or another endpoint variable `agent_env` passes
through). Used by `ci-evals grade` and `ci-evals check-fixtures`, which run
reviewer agents but no stage.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ci_evals.errors import UserError

STUB_PREFIX = "stub:"

# The model endpoint: from the user's environment, or from the stub server.
ENDPOINT_NAMES: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
)


def has_endpoint(source: Mapping[str, str]) -> bool:
    """Whether `source` names a way to reach the real model (a key or a token)."""
    return bool(source.get("ANTHROPIC_API_KEY") or source.get("ANTHROPIC_AUTH_TOKEN"))


@dataclass(frozen=True)
class Endpoint:
    env: Mapping[str, str] | None  # the stub's variables, or None for the real API
    model: str | None  # the model name to ask for (None: the CLI's default)


def stub_path(model: str | None) -> Path | None:
    if model is None or not model.startswith(STUB_PREFIX):
        return None
    path = model[len(STUB_PREFIX) :]
    if not path:
        raise UserError("--model stub: needs a script path", field="--model", hint="stub:PATH")
    return Path(path)


def check_endpoint(model: str | None, environ: Mapping[str, str], why: str) -> None:
    """Fail before anything starts when a model is needed and none can be reached."""
    if stub_path(model) is None and not has_endpoint(environ):
        raise UserError(
            f"{why} needs a model: set ANTHROPIC_API_KEY, or run offline with --model stub:PATH",
            hint="or leave the reviewer out (--reviewer skip / --no-reviewer)",
        )


@contextmanager
def open_endpoint(model: str | None, default_model: str | None) -> Iterator[Endpoint]:
    """The endpoint for `--model` (a stub server is started and stopped here)."""
    path = stub_path(model)
    if path is None:
        yield Endpoint(env=None, model=model or default_model)
        return
    from ci_evals.endpoints.stub_model import StubServer, load_script  # noqa: PLC0415 - heavy

    script = load_script(path)
    with StubServer(script) as server:
        yield Endpoint(env=server.cli_env(), model=default_model)
