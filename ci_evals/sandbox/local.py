"""`local`: processes run on the host as ci-evals itself, with no isolation.

Only the environment is ours (the caller passes the allow-listed one), and
every process starts through `launch.py` (`launcher.Launcher`): a reaper that
is a child subreaper, so what the CLI's Bash tool starts in sessions of its
own, double forks and `setsid env -i …` included, is re-parented to it and
killed when the program ends, when `close()` stops it, or when ci-evals dies.
The same limits as `bwrap` hold (a cgroup where one can be made, rlimits, the
disk quota). A marker in the environment (`processes`) finds, at `close()`,
what left the reaper's tree some other way. A hostile agent can still read
other processes' /proc entries, write anywhere the user can, and kill its own
reaper (then only the marker and the cgroup find its processes): use it only
where namespaces are unavailable, and only when asked (`--isolation none`).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci_evals import process
from ci_evals.process import ExecResult
from ci_evals.sandbox import grader_identity
from ci_evals.sandbox.base import DEFAULT_OUTPUT_CAP, SandboxSpec, Spawn
from ci_evals.sandbox.host_kind import HostKind
from ci_evals.sandbox.launcher import Launched, Launcher
from ci_evals.sandbox.processes import MARK_NAME, kill_marked, new_mark


class LocalSandbox(Launched):
    name = "local"
    isolated = False

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self._mark = new_mark()
        self._launcher = Launcher(spec)
        # One identity here: a grader's code under test can reach the grader
        # (and anything else of ours); the variables are set all the same.
        self._grader: grader_identity.AsAgentLauncher | None = None
        self._grader_env: dict[str, str] = {}
        if spec.grader_results is not None:
            self._grader = grader_identity.AsAgentLauncher("same")
            self._grader_env = grader_identity.environment(
                str(spec.grader_results), str(self._grader.folder / grader_identity.LAUNCHER)
            )

    def _argv(
        self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], *, grader: bool = False
    ) -> list[str]:
        _check_runnable(argv, cwd, env)
        extra = self._grader_env if grader else {}
        return self._launcher.argv(argv, {**env, **extra, MARK_NAME: self._mark})

    def spawn(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Spawn:
        return Spawn(argv=tuple(self._argv(argv, cwd, env)), env={}, cwd=cwd)

    def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: bytes | None = None,
        timeout: float,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        merge_stderr: bool = False,
    ) -> ExecResult:
        launched = self._argv(argv, cwd, env, grader=True)
        try:
            done = process.run(
                launched,
                cwd=cwd,
                env={},
                stdin=stdin,
                timeout=timeout,
                output_cap=output_cap,
                merge_stderr=merge_stderr,
            )
        finally:
            self._launcher.wait(launched)  # its reaper has killed what it left
            kill_marked(self._mark)  # what left the reaper's tree too
        return dataclasses.replace(done, argv=tuple(argv))  # what was asked

    def put(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def get(self, path: Path) -> bytes:
        return path.read_bytes()

    def close(self) -> None:
        self._launcher.close()  # each reaper stopped and waited for; the cgroup emptied
        kill_marked(self._mark)
        if self._grader is not None:
            self._grader.close()

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _check_runnable(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
    """Raise as Popen would (OSError) when `argv[0]` cannot be run: the launcher would
    only find out after it started, and callers tell "cannot start" from a failure."""
    if not argv:
        raise ValueError("nothing to run")
    program = argv[0]
    if "/" in program:
        found = os.access(cwd / program, os.X_OK) and not (cwd / program).is_dir()
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


KIND = HostKind("local", isolated=False, make=LocalSandbox)
