"""The `loop` agent's tools: each one an argv run inside the stage's sandbox.

Nothing here touches the host's files or runs a host shell. The model's
command string is one argv element of `sh -c` *inside* the sandbox; a path
is one argv element of a fixed script (`write_file`) or of `cat`/`find`; a
file's content travels on stdin. So `$(...)`, quotes, `;` and newlines in
anything the model sends are data to the host, and the sandbox's own view
(bwrap's mounts, docker's container) decides what a path can reach. Not
`Sandbox.put/get`: those run on the host, where a link the agent planted in
the workspace would be followed.

Every tool answers with text for the model and a `ToolRun` for the
trajectory: a failure (a non-zero exit, a timeout, a missing file, bad
arguments) is output the model reads and acts on, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci_evals.process import ExecResult
from ci_evals.sandbox.base import Sandbox

# mkdir the parents, then write stdin to the file. "$1" is the model's path,
# never part of the script.
_WRITE_SCRIPT = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
_LIST_DEPTH = "2"
FILE_OP_TIMEOUT_S = 60.0  # writing, reading or listing a file (a FIFO must not hang the loop)

SPECS: dict[str, dict[str, Any]] = {
    "run_command": {
        "description": (
            "Run a command in the workspace and return its exit code, stdout and stderr. "
            "Give `command` (a string run by `sh -c`) or `argv` (a list, run as is)."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "a shell command line"},
                "argv": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "number", "description": "seconds before it is killed"},
            },
        },
    },
    "write_file": {
        "description": "Write text to a file (relative to the workspace), creating folders.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    "read_file": {
        "description": "Return the text of a file (relative to the workspace).",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    "list_directory": {
        "description": "List the files and folders under a path, two levels deep.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "default: ."}},
        },
    },
    "final_submit": {
        "description": "Say the work is complete and ready for grading. Ends the task.",
        "input_schema": {
            "type": "object",
            "properties": {"summary": {"type": "string", "description": "what was built"}},
        },
    },
}


@dataclass(frozen=True)
class ToolRun:
    """One tool call's result: the text the model gets, and what the trajectory keeps."""

    output: str
    is_error: bool = False
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0


@dataclass(frozen=True)
class ToolBox:
    """The tools of one stage, bound to its sandbox, folder and environment."""

    sandbox: Sandbox
    cwd: Path
    env: Mapping[str, str]
    output_chars: int
    command_timeout_s: float

    def definitions(self, names: tuple[str, ...]) -> list[dict[str, Any]]:
        """The Messages API `tools` for the configured tool set."""
        return [{"name": name, **SPECS[name]} for name in names]

    def call(self, name: str, given: Mapping[str, Any], *, time_left: float) -> ToolRun:
        """Run tool `name` (not `final_submit`) with the model's input."""
        handler = self._handlers().get(name)
        if handler is None:
            return ToolRun(f"unknown tool {name!r}", is_error=True)
        try:
            return handler(given, max(time_left, 0.001))
        except _BadInput as exc:
            return ToolRun(f"bad input for {name}: {exc}", is_error=True)
        except OSError as exc:  # the sandbox could not start the model's argv (Sandbox.exec)
            return ToolRun(f"{name} could not run: {exc}", is_error=True)

    def _handlers(self) -> dict[str, Callable[[Mapping[str, Any], float], ToolRun]]:
        return {
            "run_command": self._run_command,
            "write_file": self._write_file,
            "read_file": self._read_file,
            "list_directory": self._list_directory,
        }

    # -- the tools ------------------------------------------------------------------

    def _run_command(self, given: Mapping[str, Any], time_left: float) -> ToolRun:
        command, argv = given.get("command"), given.get("argv")
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            full = [str(a) for a in argv]
        elif isinstance(command, str) and command.strip():
            full = ["sh", "-c", command]
        else:
            raise _BadInput("give `command` (a string) or `argv` (a non-empty list of strings)")
        asked = given.get("timeout_s")
        timeout = self.command_timeout_s
        if isinstance(asked, (int, float)) and not isinstance(asked, bool) and asked > 0:
            timeout = min(float(asked), timeout)
        result = self._exec(full, timeout=min(timeout, time_left))
        return self._report(result, timeout=min(timeout, time_left), show_exit=True)

    def _write_file(self, given: Mapping[str, Any], time_left: float) -> ToolRun:
        path, content = _path(given), given.get("content")
        if not isinstance(content, str):
            raise _BadInput("`content` must be a string")
        data = content.encode("utf-8")
        argv = ["sh", "-c", _WRITE_SCRIPT, "sh", path]
        _, failed = self._file_op(argv, time_left, stdin=data)
        return failed or ToolRun(f"wrote {len(data)} bytes to {path}", exit_code=0)

    def _read_file(self, given: Mapping[str, Any], time_left: float) -> ToolRun:
        result, failed = self._file_op(["cat", "--", _path(given)], time_left)
        return failed or self._report(result, timeout=FILE_OP_TIMEOUT_S, show_exit=False)

    def _list_directory(self, given: Mapping[str, Any], time_left: float) -> ToolRun:
        argv = ["find", _path(given, default="."), "-maxdepth", _LIST_DEPTH]
        result, failed = self._file_op(argv, time_left)
        lines = sorted(_text(result.stdout).splitlines())
        return failed or ToolRun(self._cut("\n".join(lines)), exit_code=0)

    # -- helpers ---------------------------------------------------------------------

    def _file_op(
        self, argv: list[str], time_left: float, stdin: bytes | None = None
    ) -> tuple[ExecResult, ToolRun | None]:
        """Run a file tool's fixed argv; the failure report when it did not exit 0."""
        timeout = min(FILE_OP_TIMEOUT_S, time_left)
        result = self._exec(argv, timeout=timeout, stdin=stdin)
        if result.returncode == 0:
            return result, None
        return result, self._report(result, timeout=timeout, show_exit=True)

    def _exec(self, argv: list[str], *, timeout: float, stdin: bytes | None = None) -> ExecResult:
        # The stdout/stderr tails the model can be shown, with room for both.
        return self.sandbox.exec(
            argv,
            cwd=self.cwd,
            env=self.env,
            stdin=stdin,
            timeout=timeout,
            output_cap=max(4 * self.output_chars, 64 * 1024),
        )

    def _report(self, result: ExecResult, *, timeout: float, show_exit: bool) -> ToolRun:
        parts: list[str] = []
        if result.timed_out:
            parts.append(f"timed out after {timeout:g} s (killed); output so far:")
        elif show_exit:
            parts.append(f"exit code: {result.returncode}")
        stdout, stderr = _text(result.stdout), _text(result.stderr)
        if show_exit or result.timed_out:
            parts.append(f"--- stdout ---\n{stdout}" if stdout else "--- stdout: empty ---")
            if stderr:
                parts.append(f"--- stderr ---\n{stderr}")
        else:
            parts.append(stdout)
        return ToolRun(
            self._cut("\n".join(parts)),
            is_error=result.timed_out or result.returncode != 0,
            exit_code=result.returncode,
            timed_out=result.timed_out,
            duration_s=result.duration_s,
        )

    def _cut(self, text: str) -> str:
        """At most `output_chars`: the head and the tail (errors are often at the end)."""
        limit = self.output_chars
        if len(text) <= limit:
            return text
        head, tail = limit // 2, limit - limit // 2
        dropped = len(text) - head - tail
        return f"{text[:head]}\n[... {dropped} characters cut ...]\n{text[-tail:]}"


class _BadInput(ValueError):
    pass


def _path(given: Mapping[str, Any], default: str | None = None) -> str:
    path = given.get("path", default)
    if not isinstance(path, str) or not path or "\0" in path:
        raise _BadInput("`path` must be a non-empty string")
    # `find` and `cat` read a leading `-` as an option; `./-x` is the same file.
    return path if path.startswith(("/", ".")) else f"./{path}"


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
