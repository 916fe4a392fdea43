"""The Docker engine in tests: the sandbox image, built once per session with the real
`ci-evals sandbox build` (its root file system and wheels cached in ~/.cache/ci-evals,
so a CI job bootstraps Debian once), and containers counted by label."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ci_evals.sandbox.docker import engine

TEST_RECIPE = "python-mcp"  # shipped: Debian minbase + python3 + the mcp package


def build_test_image() -> str:
    """The tag of the shipped `python-mcp` image, built when the engine lacks it;
    the test fails with the engine's one-line reason when there is none."""
    why = engine.available()
    if why is not None:
        pytest.fail(why)
    done = subprocess.run(
        [sys.executable, "-m", "ci_evals", "sandbox", "build", TEST_RECIPE],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"ci-evals sandbox build {TEST_RECIPE} failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def containers(**labels: str) -> list[str]:
    """Ids of the containers (running or not) carrying every label given."""
    wanted = [f"{key}={value}" for key, value in labels.items()]
    # sparse: no inspect per container, which fails (404) for one another test
    # removes between the list and the inspect (pytest-xdist)
    found = engine.client().containers.list(all=True, filters={"label": wanted}, sparse=True)
    return [str(container.id) for container in found]
