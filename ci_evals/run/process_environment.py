"""What `ci-evals run` takes from its process's environment: read once, when the command
starts, then handed down: no module of `run/` reads `os.environ` (below it,
only settings no credential is in: `DOCKER_HOST`, git's, the CLI lookup).

Taking it is also the run's first security step, before anything starts: the
shard key leaves the process environment (`shard_mac.take_key`: no child
inherits it, `/proc/<pid>/environ` no longer shows it) and the credentials are
wiped from `/proc/<pid>/environ` yet kept in the process's memory, where the
model proxy and the judge read them (`hide_credentials`; docs/isolation.md).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

from ci_evals.errors import UserError
from ci_evals.run import environ_block, shard_mac
from ci_evals.run.shard_mac import ShardKey


@dataclass(frozen=True)
class RunEnvironment:
    """The environment a run was started with, and the shard key taken out of it."""

    # As given, the shard key's name and value included: held in our memory it is
    # still a credential the sandbox's choice weighs (`isolation.choose`); what the
    # run hands on is without it (`shard_mac.without_key`).
    variables: Mapping[str, str] = field(repr=False)
    shard_key: ShardKey | None  # None: unset or empty (unsigned shards)


def take(process: MutableMapping[str, str]) -> RunEnvironment:
    """The run's environment, read from `process` — the process's own (`os.environ`,
    which the command hands in) — then the key out of it and the credentials out of
    its `/proc` entry."""
    variables = dict(process)
    # Out of the process environment (and its /proc entry) before anything starts: no
    # child inherits the shard key.
    key = shard_mac.take_key(process)
    hide_credentials(process)
    return RunEnvironment(variables, key)


def hide_credentials(process: Mapping[str, str]) -> None:
    """The model's key and token, and whatever else `secret_names` takes for a
    credential in `process` (the process's environment), wiped from our
    `/proc/<pid>/environ` but kept in the process's memory (the proxy and the judge
    read them there): a grader's read of `/proc/self/environ`, or any process of our
    uid, finds none of them (docs/isolation.md)."""
    from ci_evals.agents.environment import secret_names  # noqa: PLC0415

    names = {*secret_names(process), "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}
    try:
        environ_block.hide_kept(names)
    except OSError as exc:
        raise UserError(
            f"cannot wipe the credentials from this process's /proc environ ({exc}): any "
            "process of this user could read them there",
            hint="run ci-evals on Linux with /proc mounted",
        ) from None
