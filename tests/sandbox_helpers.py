"""A sandbox of a parametrized kind, ready for a test: it fails saying why when the
kind cannot run here (docs/isolation.md says how to install it); an image-running
kind (docker) gets the test image, as `prepare` would give it the suite's."""

from __future__ import annotations

import pytest

from ci_evals.sandbox.base import SandboxConfig
from ci_evals.sandbox.registry import KINDS


def needs(kind: str) -> None:
    """Fail the test, saying why, when sandbox kind `kind` cannot run here."""
    if (why := KINDS.get(kind).available()) is not None:
        pytest.fail(f"{kind}: {why}")


def ready_sandbox(kind: str, request: pytest.FixtureRequest) -> SandboxConfig:
    needs(kind)
    backend = KINDS.get(kind)
    if backend.runs_images:
        return SandboxConfig(kind, backend.image_options(request.getfixturevalue("docker_image")))
    return SandboxConfig(kind)
