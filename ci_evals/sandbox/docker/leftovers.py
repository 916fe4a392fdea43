"""What a crashed ci-evals left in the Docker engine, and removing it (`ci-evals gc`).

Every container ci-evals starts (sandboxes, image builds) carries the label
`ci-evals=1` and `ci-evals.owner=host:pid:start`. One is left over when its
owner is gone: on this host, no process with that pid started at that time
(a pid reused later is another process); from another host (a shared engine)
we cannot tell, so only age counts — older than `older_than_s`, which also
catches live owners that have run far too long. The engine's other
containers are never looked at.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from ci_evals.fs.abandoned import process_start
from ci_evals.sandbox.docker import engine


@dataclass(frozen=True)
class Leftover:
    id: str
    name: str
    run_id: str
    why: str  # "owner gone" | "older than N s"


def find(older_than_s: float | None = None) -> list[Leftover]:
    """The ci-evals containers to remove; see the module doc."""
    found: list[Leftover] = []
    now = time.time()
    host = socket.gethostname()
    containers: list[Any] = engine.client().containers.list(
        all=True, filters={"label": f"{engine.LABEL}=1"}
    )
    for container in containers:
        labels = container.labels or {}
        why = _why(labels, host, now, older_than_s)
        if why is not None:
            found.append(
                Leftover(container.id, container.name, labels.get(engine.LABEL_RUN, ""), why)
            )
    return found


def _why(labels: dict[str, str], host: str, now: float, older_than_s: float | None) -> str | None:
    owner_host, _, rest = labels.get(engine.LABEL_OWNER, "").partition(":")
    pid_text, _, started = rest.partition(":")
    if owner_host == host and pid_text.isdigit():
        if process_start(int(pid_text)) != started:
            return "owner gone"
    elif owner_host != host and older_than_s is None:
        return None
    created = labels.get(engine.LABEL_CREATED, "")
    if older_than_s is not None and created.isdigit() and now - int(created) > older_than_s:
        return f"older than {older_than_s:g} s"
    return None


def remove(leftovers: list[Leftover]) -> list[str]:
    """Remove each (force: what runs in it is killed); returns one-line problems."""
    from docker.errors import APIError, NotFound  # noqa: PLC0415

    problems: list[str] = []
    for item in leftovers:
        try:
            engine.client().containers.get(item.id).remove(force=True, v=True)
        except NotFound:
            continue  # removed meanwhile (its owner's own finally)
        except APIError as exc:
            problems.append(f"{item.name}: {exc.explanation or exc}")
    return problems
