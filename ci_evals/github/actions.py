"""Talking to GitHub Actions through its files and workflow commands.

Outputs go to `$GITHUB_OUTPUT`, the step summary to `$GITHUB_STEP_SUMMARY`,
annotations to stdout as `::error file=...::message`. Everything printed into a
workflow command is escaped, because a file name is data and can contain `%`,
newlines or `::` — unescaped, a crafted name injects commands into the log
(tj-actions GHSA-mcph-m25j-8j63).

Text that came from a results file (a fork's, an agent's) is printed inside
`commands_stopped`: between `::stop-commands::TOKEN` and `::TOKEN::`, with a
random TOKEN the text cannot know, the runner reads no workflow command at all
(GitHub's documented way to echo untrusted output); each such line is also
`text.inert`, in case it lands outside (another stream, another runner).

Settings are read from the environment once, into `ActionsEnv`; the rest of the
code receives that record and never reads `os.environ` itself.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

Level = Literal["error", "warning", "notice"]

# GitHub shows only 10 annotations of each level per step; the rest vanish
# silently, so callers print at most this many and put the full list in the
# step summary.
MAX_ANNOTATIONS_PER_LEVEL = 10
SUMMARY_LIMIT_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ActionsEnv:
    """The GitHub Actions settings ci-evals uses. None of them is a secret."""

    output_file: Path | None
    summary_file: Path | None
    event_name: str | None
    event_path: Path | None
    sha: str | None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ActionsEnv | None:
        """The settings, or None when not running in GitHub Actions."""
        env = os.environ if environ is None else environ
        if env.get("GITHUB_ACTIONS") != "true" and "GITHUB_OUTPUT" not in env:
            return None

        def path(name: str) -> Path | None:
            value = env.get(name)
            return Path(value) if value else None

        return cls(
            output_file=path("GITHUB_OUTPUT"),
            summary_file=path("GITHUB_STEP_SUMMARY"),
            event_name=env.get("GITHUB_EVENT_NAME") or None,
            event_path=path("GITHUB_EVENT_PATH"),
            sha=env.get("GITHUB_SHA") or None,
        )


def escape_data(text: str) -> str:
    """Escape a workflow command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command property value (`file=`, `title=`)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: Level,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    column: int | None = None,
    title: str | None = None,
) -> str:
    """One `::level file=F,line=L,col=C,title=T::message` workflow command line."""
    props: list[str] = []
    if file is not None:
        props.append(f"file={escape_property(file)}")
    if line is not None:
        props.append(f"line={line}")
    if column is not None:
        props.append(f"col={column}")
    if title is not None:
        props.append(f"title={escape_property(title)}")
    head = f"::{level}"
    if props:
        head += " " + ",".join(props)
    return f"{head}::{escape_data(message)}"


def format_outputs(outputs: Mapping[str, str]) -> str:
    """`$GITHUB_OUTPUT` text: `name=value`, or a heredoc with a random delimiter.

    Any value with a newline uses the heredoc form; the delimiter is drawn until
    it occurs in no value, so a value can never end the block early.
    """
    lines: list[str] = []
    for name, value in outputs.items():
        if "\n" not in value and "\r" not in value:
            lines.append(f"{name}={value}")
            continue
        import secrets  # noqa: PLC0415 - ~10 ms (hashlib, OpenSSL); only multi-line outputs

        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        lines.extend([f"{name}<<{delimiter}", value, delimiter])
    return "".join(line + "\n" for line in lines)


def write_outputs(env: ActionsEnv, outputs: Mapping[str, str]) -> None:
    if env.output_file is None:
        return
    with env.output_file.open("a", encoding="utf-8") as fh:
        fh.write(format_outputs(outputs))


def append_summary(env: ActionsEnv, markdown: str) -> None:
    """Append to the step summary, cut to GitHub's 1 MiB limit with a note."""
    if env.summary_file is None:
        return
    data = markdown.encode("utf-8")
    if len(data) > SUMMARY_LIMIT_BYTES:
        note = "\n\n… (cut: the step summary is limited to 1 MiB)\n".encode()
        data = data[: SUMMARY_LIMIT_BYTES - len(note)] + note
        markdown = data.decode("utf-8", "ignore")
    with env.summary_file.open("a", encoding="utf-8") as fh:
        fh.write(markdown if markdown.endswith("\n") else markdown + "\n")


def capped(lines: Sequence[str], limit: int = MAX_ANNOTATIONS_PER_LEVEL) -> list[str]:
    """The first `limit` annotation lines, plus a notice saying how many were left out."""
    if len(lines) <= limit:
        return list(lines)
    rest = len(lines) - limit
    return [
        *lines[:limit],
        annotation("notice", f"{rest} more not shown here; see the step summary"),
    ]


@contextlib.contextmanager
def commands_stopped(env: ActionsEnv | None, stream: TextIO | None = None) -> Iterator[None]:
    """While inside, the runner takes nothing written to `stream` as a workflow command.

    `::stop-commands::TOKEN` before, `::TOKEN::` after (even on an exception), both
    on `stream` (default stdout), the stream the untrusted text goes to: the
    runner reads stdout and stderr apart, so a marker on the other one may be
    read before or after the text. TOKEN is random, so the text cannot resume
    commands early. Outside GitHub Actions (`env` None), or when `stream` is a
    file (`report RUN > summary.md`: not the log, and the markers would be in
    the file), nothing is printed.
    """
    out = sys.stdout if stream is None else stream
    if env is None or _is_file(out):
        yield
        return
    import secrets  # noqa: PLC0415 - ~10 ms (hashlib, OpenSSL); only in Actions

    token = f"ci-evals-{secrets.token_hex(16)}"
    print(f"::stop-commands::{token}", file=out, flush=True)
    try:
        yield
    finally:
        out.flush()
        print(f"::{token}::", file=out, flush=True)


def _is_file(stream: TextIO) -> bool:
    """Whether `stream` writes to a regular file (a redirect), not to a pipe or terminal."""
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError):  # no descriptor (io.UnsupportedOperation is an OSError)
        return False
