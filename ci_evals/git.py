"""The one place that runs git.

Always argv lists (never a shell string), always machine-readable output
(`-z`, `--no-renames`, `--no-color`, `--no-ext-diff`), and parsing kept in pure
functions that tests can feed a plain string. GitPython is not used: importing
it costs ~0.2 s, which the pre-commit hook and `compute-stage` cannot afford,
and it runs these same git subprocesses underneath.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ci_evals.errors import UserError


@dataclass(frozen=True)
class GitResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: str


class GitError(Exception):
    """A git command failed in a way the caller did not expect."""

    def __init__(self, result: GitResult) -> None:
        command = " ".join(result.argv)
        super().__init__(f"`{command}` exited {result.returncode}: {result.stderr.strip()}")
        self.result = result


def run(repo: Path, *args: str, check: bool = True) -> GitResult:
    """Run `git -C repo ARGS...`; stdout is returned as bytes (names may not be UTF-8)."""
    argv = ("git", "-C", str(repo), *args)
    proc = subprocess.run(argv, capture_output=True, check=False)
    result = GitResult(
        argv=argv,
        returncode=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr.decode("utf-8", "replace"),
    )
    if check and result.returncode != 0:
        raise GitError(result)
    return result


def split_z(output: bytes) -> list[str]:
    """Split NUL-terminated git output into paths.

    Names are decoded as UTF-8 with `surrogateescape`, so a name that is not
    valid UTF-8 still round-trips to the same bytes instead of being mangled.
    """
    if not output:
        return []
    parts = output.split(b"\0")
    if parts[-1] == b"":
        parts.pop()
    return [part.decode("utf-8", "surrogateescape") for part in parts]


def toplevel(cwd: Path) -> Path:
    """The work tree root containing `cwd`; a clear error outside a repository."""
    result = run(cwd, "rev-parse", "--show-toplevel", check=False)
    if result.returncode != 0:
        raise UserError(
            "not inside a git repository",
            file=str(cwd),
            hint="run ci-evals from your repository, or pass --map with a path inside one",
        )
    return Path(result.stdout.decode("utf-8", "surrogateescape").rstrip("\n"))


def ls_files(repo: Path) -> list[str]:
    """Every path in the index (what a commit would contain), repo-relative, POSIX."""
    return split_z(run(repo, "ls-files", "-z", "--cached").stdout)
