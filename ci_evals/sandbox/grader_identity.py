"""Two identities in a command grader's sandbox: the grader's, and the code under test's.

A hidden test starts the agent's program (`server.py`) and judges it; run as
one uid in one PID namespace, that program could SIGSTOP the test, ptrace it,
write to its stdout through `/proc/<pid>/fd/1`, or replace its results file,
and pass every check without doing the work. So a sandbox opened with
`SandboxSpec.grader_results` gives the command two things in its environment:

- `CI_EVALS_RESULTS`: a folder only the grader's identity can write (the
  caller's host folder, empty, read back after the command ends; `junit:` and
  `json_results:` name files in it);
- `CI_EVALS_AS_AGENT`: a launcher that runs its arguments as the code under
  test's identity, out of the grader's reach:
  - as root (`bwrap` as root, `docker`): `setpriv` to uid `AGENT_UID` with
    no capabilities and `no_new_privs`. The grader keeps only what it needs
    to start and stop it (`GRADER_CAPS`: setuid, setgid, kill, and
    dac_override to write a folder handed to that uid); uid 10001 may neither
    signal nor ptrace a root process, nor open its `/proc` entries, nor enter
    the results folder (root's, mode 0700);
  - without root (`bwrap` under a normal user, one uid): a nested bwrap with
    a PID namespace and `/proc` of its own, the launcher's folder (and the
    results in it) covered by an empty tmpfs, every capability dropped: the
    grader's processes have no pid there, and no mount to reveal them
    (mounts from the outer namespace are locked).

The launchers are constant shell text ("$@" is the argv, never parsed).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

RESULTS_ENV = "CI_EVALS_RESULTS"
AS_AGENT_ENV = "CI_EVALS_AS_AGENT"
# Where the launcher's folder appears inside bwrap and docker; results under it.
INSIDE = "/run/ci-evals-grader"
LAUNCHER = "as-agent"
RESULTS = "results"
AGENT_UID = 10001  # the docker image's `sandbox` user; any uid that is not ours
GRADER_CAPS = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE")

_SETPRIV = f"""#!/bin/sh
# ci-evals: run "$@" as the code under test (uid {AGENT_UID}), never as the grader.
exec setpriv --reuid={AGENT_UID} --regid={AGENT_UID} --clear-groups --inh-caps=-all \\
  --no-new-privs -- "$@"
"""
_NESTED = f"""#!/bin/sh
# ci-evals: run "$@" as the code under test, in PID and mount namespaces of its
# own where the grader's processes and {INSIDE} do not exist.
exec bwrap --unshare-user --unshare-pid --die-with-parent --cap-drop ALL \\
  --bind / / --proc /proc --tmpfs {INSIDE} -- "$@"
"""
_SAME = """#!/bin/sh
# ci-evals: the local sandbox has one identity; "$@" runs as the grader.
exec "$@"
"""


def as_root() -> bool:
    """Whether this process can hand a folder to another uid (and so run code under one)."""
    return os.geteuid() == 0


class Launcher:
    """A private host folder holding the `as-agent` launcher and an empty
    `results` mount point; `close()` removes it."""

    def __init__(self, kind: str) -> None:
        text = {"setpriv": _SETPRIV, "nested": _NESTED, "same": _SAME}[kind]
        self.folder = Path(tempfile.mkdtemp(prefix="ci-evals-grader-"))
        (self.folder / RESULTS).mkdir()
        script = self.folder / LAUNCHER
        script.write_text(text)
        script.chmod(0o755)
        self.folder.chmod(0o755)  # readable by the code under test's uid: it runs the launcher

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def environment(results: str, launcher: str) -> dict[str, str]:
    """The two variables a command grader gets, at their paths inside."""
    return {RESULTS_ENV: results, AS_AGENT_ENV: launcher}
