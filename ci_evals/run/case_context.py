"""A case unit's `context:` laid out before its agent starts: scaffold, history, add_dirs.

`claude plugin eval` runs a case's `scaffold_script` with `bash` as the user
running it, on the host, in the run's folder; resumes `history_file` in place
(writing the new transcript into the plugin's own case folder on every run); and
grants reads of each `add_dirs` folder where it lies. ci-evals keeps all three
inside the sandbox and out of the plugin's tree: the case's folder is copied
read-only beside the workspace; the scaffold runs in a sandbox of the run's
kind, as the agent's user, in the fresh workspace, with the CLI's environment
and time limit, its output in `scaffold.log`; the history is resumed from a copy
in the agent's private folder; each add_dirs folder of the copy is bound
read-only into the agent's sandbox.

The runner then takes the `before` snapshot: what the scaffold left is no file
the stage created (`SCAFFOLD_FILES`, which the `plugin_eval` grader reads). In
full: docs/plugin-evals.md (*A case's context*).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci_evals.fs.copy import copy_many
from ci_evals.fs.plugin_copy import copy_plugin
from ci_evals.fs.walk import walk
from ci_evals.grading.kinds.plugin_eval import SCAFFOLD_FILES
from ci_evals.sandbox.base import SandboxConfig, SandboxSpec
from ci_evals.sandbox.registry import open_sandbox
from ci_evals.suite.case_context import CaseContext
from ci_evals.text import one_line

CASE_COPY = "case"  # under the scenario's temp folder
HISTORY_DIR = "history"  # under the agent's private folder
SCAFFOLD_LOG = "scaffold.log"  # beside the stage's trajectory
SCAFFOLD_TIMEOUT_S = 120.0  # the CLI's: then SIGKILL
SCAFFOLD_OUTPUT_CAP = 1 << 20  # of each stream, in the log
_ERROR_CHARS = 500  # of its stderr in the stage's error, as the CLI's

# What the CLI gives a scaffold besides PATH, HOME and TMPDIR (`claude plugin eval`).
_SCAFFOLD_FIXED = {
    "TERM": "dumb",
    "GIT_CONFIG_NOSYSTEM": "1",
    "USER_TYPE": "external",
    "NODE_ENV": "production",
}


@dataclass(frozen=True)
class Laid:
    """What the stage's agent gets of its case's context."""

    readonly: tuple[Path, ...] = ()  # the add_dirs, bound read-only
    resume: Path | None = None  # the history's copy, resumed


class ScaffoldFailed(Exception):
    """The scaffold ended non-zero or timed out: the stage's error, in one line."""


def copy_case(context: CaseContext, parent: Path, *, within: Path) -> Path:
    """The case's folder copied to `parent/case/` (its links followed inside
    `within` only), then made read-only: what the sandbox binds of it."""
    dest = parent / CASE_COPY
    copy_plugin(context.folder, dest, within=within)
    # The copy holds no link (copy_plugin copies what one leads to): each entry is its own.
    for path in [*(entry.path for _, _, entry in walk(dest)), os.fspath(dest)]:
        os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~0o222)
    return dest


def scaffold_env(stage_env: Mapping[str, str]) -> dict[str, str]:
    """The CLI's scaffold environment, from the stage's own: its PATH and private
    HOME/TMPDIR, nothing of the model endpoint."""
    env = {name: stage_env[name] for name in ("PATH", "HOME", "TMPDIR") if name in stage_env}
    if "HOME" in env:
        env["USERPROFILE"] = env["HOME"]
    if "TMPDIR" in env:
        env["TMP"] = env["TEMP"] = env["TMPDIR"]
    return {**env, **_SCAFFOLD_FIXED}


def run_scaffold(
    script: str,
    case_copy: Path,
    *,
    workspace: Path,
    private_root: Path,
    env: Mapping[str, str],
    sandbox: SandboxConfig,
    log: Path,
    max_output_bytes: int,
) -> None:
    """`bash <script>` in `workspace`, inside a sandbox of `sandbox`'s kind;
    `ScaffoldFailed` when it ends non-zero or runs past its time."""
    spec = SandboxSpec(
        writable=(workspace, private_root),
        readonly=(case_copy,),
        disk_bytes=max_output_bytes,
    )
    argv = ["bash", str(case_copy / script)]
    with open_sandbox(sandbox, spec) as box:
        done = box.exec(
            argv,
            cwd=workspace,
            env=env,
            timeout=SCAFFOLD_TIMEOUT_S,
            output_cap=SCAFFOLD_OUTPUT_CAP,
        )
    stdout = done.stdout.decode("utf-8", "replace")
    stderr = done.stderr.decode("utf-8", "replace")
    ended = "timed out" if done.timed_out else f"exit {done.returncode}"
    log.write_text(
        f"$ bash {script}  ({ended}, {done.duration_s:.1f} s)\n"
        f"--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n",
        encoding="utf-8",
    )
    if done.timed_out:
        raise ScaffoldFailed(
            f"scaffold failed (timed out after {SCAFFOLD_TIMEOUT_S:g} s): {script} "
            f"(its output: {SCAFFOLD_LOG})"
        )
    if done.returncode != 0:
        said = one_line(stderr, _ERROR_CHARS, ellipsis="…")
        raise ScaffoldFailed(
            f"scaffold failed (exit {done.returncode}): {script}"
            + (f": {said}" if said else "")
            + f" (its output: {SCAFFOLD_LOG})"
        )


def lay_history(history: str, case_copy: Path, private_root: Path) -> Path:
    """The history's copy in the agent's private folder, which the CLI resumes (and
    writes its new transcript beside). Called before the scaffold runs: the folder
    must hold nothing a sandboxed process made (a link, a fifo)."""
    folder = private_root / HISTORY_DIR
    folder.mkdir(mode=0o700)  # a fresh folder: nothing of the sandbox's is written through
    dest = folder / Path(history).name
    for _ in copy_many([(str(case_copy / history), str(dest))]):
        pass
    os.chmod(dest, 0o600, follow_symlinks=False)
    return dest


def record_scaffold(stage_dir: Path, paths: list[str]) -> None:
    """What the scaffold left (relative paths), for the `files` target and `file_exists`."""
    (stage_dir / SCAFFOLD_FILES).write_text(json.dumps(sorted(paths), indent=0) + "\n")
