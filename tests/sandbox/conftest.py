"""The lock the tests that leave containers behind, or run `ci-evals gc`, share.

`ci-evals gc` removes every ci-evals container whose owner is gone, whoever left
it: a test that leaves one on purpose and then checks what gc says of it saw
another test's gc remove it first (under `-n 2`, or another checkout's test
session on the same engine), or two gcs removing the same one, the loser
reporting a failure. The lock is a file in the shared cache, so every session
on the machine sees it; the tests that hold it run one at a time.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator

import pytest

from ci_evals.sandbox.docker.image_build import cache_dir


@pytest.fixture
def gc_alone() -> Iterator[None]:
    """Held from before a test leaves a container until its gc has run."""
    path = cache_dir(os.environ) / "tests-docker-gc.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield
