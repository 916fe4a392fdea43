"""The seccomp profile of every `docker` sandbox: Docker's default, minus reaching into others.

Docker's default profile (20.10) allows `ptrace` to any container on a kernel
of 4.8 or later, so code of the agent's could attach to a process of the same
uid in its container (a hidden test it is judged by, a CLI beside it) and
stop it or rewrite what it writes. `process_vm_readv`, `process_vm_writev`
and `pidfd_getfd` it allows only with `CAP_SYS_PTRACE`, which no container of
ours gets. The profile here is moby's own, vendored unchanged
(`moby_seccomp/moby-default-v20.10.24.json`, its source and licence beside it),
with those four names taken out of every rule that lets a call through,
conditional rules included: each then falls to the default action, EPERM —
the same four calls `launch.py` refuses under `bwrap` and `local`.

Derived in code rather than written by hand, so every other call stays
exactly as Docker allows it: what runs in a Docker container runs in ours,
except a debugger (`strace`, `gdb`), as under bwrap. A profile whose default lets calls
through could not deny by removal: that is refused, and no container opens.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

# The calls no process in a container may make (as launch.py's filter).
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")
VENDORED = "moby-default-v20.10.24.json"
# What results.json records as the filter a docker sandbox's processes ran under.
SUMMARY = f"moby v20.10.24 default without {', '.join(DENIED)} (EPERM)"
# Actions that refuse a call; any other (ALLOW, LOG, TRACE, NOTIFY) lets it run.
_REFUSING = {
    "SCMP_ACT_ERRNO",
    "SCMP_ACT_KILL",
    "SCMP_ACT_KILL_THREAD",
    "SCMP_ACT_KILL_PROCESS",
    "SCMP_ACT_TRAP",
}


class ProfileError(RuntimeError):
    """The vendored profile cannot be reduced safely: no container may open."""


def without_denied(profile: dict[str, Any]) -> dict[str, Any]:
    """`profile` with every `DENIED` name removed from each rule that does not
    refuse (a rule left with no name is dropped); a new dict, `profile` untouched."""
    if profile.get("defaultAction") not in _REFUSING:
        raise ProfileError(
            f"the seccomp profile's defaultAction is {profile.get('defaultAction')!r}: "
            "removing a call from its rules would not refuse it"
        )
    rules: list[dict[str, Any]] = []
    for original in profile.get("syscalls") or ():
        rule = dict(original)
        if rule.get("action") not in _REFUSING:
            if "name" in rule:  # the older single-name form
                rule["names"] = [rule.pop("name"), *rule.get("names", ())]
            rule["names"] = [name for name in rule.get("names", ()) if name not in DENIED]
            if not rule["names"]:
                continue
        rules.append(rule)
    return {**profile, "syscalls": rules}


@functools.cache
def profile_json() -> str:
    """The profile for `security_opt=["seccomp=<this>"]` (the JSON text itself)."""
    text = (
        resources.files("ci_evals.sandbox.docker")
        .joinpath("moby_seccomp")
        .joinpath(VENDORED)
        .read_text()
    )
    return json.dumps(without_denied(json.loads(text)), separators=(",", ":"))
