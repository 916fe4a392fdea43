"""`local`: processes run on the host as ci-evals itself, with no isolation.

Only the environment is ours (the caller passes the allow-listed one) and
every process is found again at `close()` by a marker in its environment
(`processes`), since the CLI's Bash tool starts commands in sessions of their
own. A hostile agent can still read other processes' /proc entries and write
anywhere the user can: use it only where namespaces are unavailable, and only
when asked (`--isolation none`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ci_evals import process
from ci_evals.process import ExecResult
from ci_evals.sandbox import grader_identity
from ci_evals.sandbox.base import DEFAULT_OUTPUT_CAP, SandboxSpec, Spawn
from ci_evals.sandbox.processes import MARK_NAME, kill_marked, new_mark


class LocalSandbox:
    name = "local"
    isolated = False

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self._mark = new_mark()
        # One identity here: a grader's code under test can reach the grader
        # (and anything else of ours); the variables are set all the same.
        self._launcher = None
        self._grader_env: dict[str, str] = {}
        if spec.grader_results is not None:
            self._launcher = grader_identity.Launcher("same")
            self._grader_env = grader_identity.environment(
                str(spec.grader_results), str(self._launcher.folder / grader_identity.LAUNCHER)
            )

    def spawn(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Spawn:
        return Spawn(argv=tuple(argv), env={**env, MARK_NAME: self._mark}, cwd=cwd)

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
        try:
            return process.run(
                argv,
                cwd=cwd,
                env={**env, **self._grader_env, MARK_NAME: self._mark},
                stdin=stdin,
                timeout=timeout,
                output_cap=output_cap,
                merge_stderr=merge_stderr,
            )
        finally:
            kill_marked(self._mark)  # what left the group (setsid) goes too

    def put(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def get(self, path: Path) -> bytes:
        return path.read_bytes()

    def close(self) -> None:
        kill_marked(self._mark)
        if self._launcher is not None:
            self._launcher.close()
