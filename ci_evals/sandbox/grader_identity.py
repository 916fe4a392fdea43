"""Two identities in a command grader's sandbox: the grader's, and the code under test's.

A hidden test starts the agent's program (`server.py`) and judges it; run as
one uid in one PID namespace, that program could SIGSTOP the test, ptrace it,
write to its stdout through `/proc/<pid>/fd/1`, or replace its results file,
and pass every check without doing the work. So a sandbox opened with
`SandboxSpec.grader_results` gives the command `CI_EVALS_RESULTS` (a folder
only the grader's identity can write) and `CI_EVALS_AS_AGENT` (a launcher that
runs its arguments as the code under test's identity: as root, `setpriv` to
`AGENT_UID` while the grader keeps only `GRADER_CAPS`; without root, a nested
bwrap whose `/tmp` and folders are bound again from `nested-args`, a NUL-separated
file read by `bwrap --args`). Neither launcher passes on the grader's variables
or open files. Only a grader with `isolate_agent_code: true` gets any of this
(`grading.kinds.command`).

The launchers are constant shell text ("$@" is the argv, never parsed). What
each identity can and cannot do: docs/isolation.md (*A command grader's two
identities*).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

RESULTS_ENV = "CI_EVALS_RESULTS"
AS_AGENT_ENV = "CI_EVALS_AS_AGENT"
# Where the launcher's folder appears inside bwrap and docker; results under it.
INSIDE = "/run/ci-evals-grader"
LAUNCHER = "as-agent"
RESULTS = "results"
AGENT_UID = 10001  # the docker image's `sandbox` user; any uid that is not ours
# SETPCAP: to empty the code under test's bounding set (`setpriv --bounding-set`).
GRADER_CAPS = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "SETPCAP")

NESTED_ARGS = "nested-args"  # the nested bwrap's binds, NUL-separated (`bwrap --args`)
# Run first, still as the grader: closes every file descriptor above 2 (a
# results file the grader holds open, a pipe to it: /proc/self/fd lists
# exactly what is open), opens the file its first argument names (unless `-`)
# as fd 3 for `bwrap --args 3`, and execs the rest.
_CLOSE_FDS = (
    "import os, sys\n"
    "for fd in os.listdir('/proc/self/fd'):\n"
    "    if int(fd) > 2:\n"
    "        try: os.close(int(fd))\n"
    "        except OSError: pass\n"
    "if sys.argv[1] != '-':\n"
    "    fd = os.open(sys.argv[1], os.O_RDONLY)\n"
    "    if fd != 3: sys.exit('ci-evals: as-agent: fd 3 is taken')\n"
    "    os.set_inheritable(fd, True)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)
# Neither the grader's variables nor its open files reach the code under test.
_PREAMBLE = f"""unset {RESULTS_ENV} {AS_AGENT_ENV}
exec python3 -I -S -c "{_CLOSE_FDS}" \\
"""
_SETPRIV = f"""#!/bin/sh
# ci-evals: run "$@" as the code under test (uid {AGENT_UID}), never as the grader:
# no capabilities (bounding set included), no_new_privs.
{_PREAMBLE}  - setpriv --reuid={AGENT_UID} --regid={AGENT_UID} --clear-groups --inh-caps=-all \\
  --bounding-set=-all --no-new-privs -- "$@"
"""
_NESTED = f"""#!/bin/sh
# ci-evals: run "$@" as the code under test, in PID and mount namespaces of its
# own where the grader's processes, its /tmp and {INSIDE} do not exist (the
# sandbox's own folders are bound again over the fresh /tmp: {NESTED_ARGS}).
{_PREAMBLE}  {INSIDE}/{NESTED_ARGS} bwrap --unshare-user --unshare-pid --die-with-parent \\
  --cap-drop ALL --bind / / --proc /proc --tmpfs /tmp --args 3 --tmpfs {INSIDE} -- "$@"
"""
_SAME = """#!/bin/sh
# ci-evals: the local sandbox has one identity; "$@" runs as the grader.
exec "$@"
"""


def as_root() -> bool:
    """Whether this process can hand a folder to another uid (and so run code under one)."""
    return os.geteuid() == 0


class AsAgentLauncher:
    """A private host folder holding the `as-agent` launcher and an empty
    `results` mount point; `close()` removes it."""

    def __init__(
        self, kind: str, *, writable: Sequence[Path] = (), readonly: Sequence[Path] = ()
    ) -> None:
        text = {"setpriv": _SETPRIV, "nested": _NESTED, "same": _SAME}[kind]
        self.folder = Path(tempfile.mkdtemp(prefix="ci-evals-grader-"))
        (self.folder / RESULTS).mkdir()
        # The nested launcher's own /tmp hides any of the sandbox's folders in the
        # grader's: bound again, in bwrap's own NUL-separated format (no shell).
        words: list[str] = []
        for option, paths in (("--bind", writable), ("--ro-bind", readonly)):
            for path in paths:
                words += [option, str(path), str(path)]
        (self.folder / NESTED_ARGS).write_bytes(b"".join(w.encode() + b"\0" for w in words))
        script = self.folder / LAUNCHER
        script.write_text(text)
        script.chmod(0o755)
        self.folder.chmod(0o755)  # readable by the code under test's uid: it runs the launcher

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def environment(results: str, launcher: str) -> dict[str, str]:
    """The two variables a command grader gets, at their paths inside."""
    return {RESULTS_ENV: results, AS_AGENT_ENV: launcher}
