"""A sandbox of a parametrized kind, ready for a test: it fails saying why when the
kind cannot run here (docs/isolation.md says how to install it); an image-running
kind (docker) gets the test image, as `prepare` would give it the suite's."""

from __future__ import annotations

import pytest

from ci_evals.sandbox.base import SandboxConfig
from ci_evals.sandbox.registry import KINDS


def ready_sandbox(kind: str, request: pytest.FixtureRequest) -> SandboxConfig:
    backend = KINDS.get(kind)
    if (why := backend.available()) is not None:
        pytest.fail(f"{kind}: {why}")
    if backend.runs_images:
        return SandboxConfig(kind, backend.image_options(request.getfixturevalue("docker_image")))
    return SandboxConfig(kind)
