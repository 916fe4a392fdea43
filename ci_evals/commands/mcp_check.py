"""`ci-evals mcp-check -- COMMAND [ARG...]`: the mcp grader's sub-tests against any server.

The sub-tests run against processes of COMMAND in the current folder: those
that cannot poison a session share one, the others get one each, concurrently
(`ci_evals.mcp.check`). Where it runs:

- by default on the host, through the `local` sandbox: the server is the
  user's own command, with its interpreter and packages wherever they are
  installed (bubblewrap shows only the system folders);
- `--isolation KIND`: in a sandbox of that kind (`bwrap`: bubblewrap
  namespaces), the current folder writable, the command's own installation
  (a virtualenv) read-only, no network;
- `--image IMAGE`: in a container of IMAGE, through the sandbox kind that
  runs images (`SandboxKind.runs_images`: `docker`, or `--isolation KIND`).

Prints a table, or with `--json` one object `{"protocol", "requested",
"subtests": [{"id", "passed", "required", "reason"}], "score"}`. Exit 0 when every required
sub-test passed, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_evals.errors import EXIT_FAIL, EXIT_OK, UserError

if TYPE_CHECKING:
    from ci_evals.mcp.check import Report
    from ci_evals.sandbox.base import SandboxConfig, SandboxSpec

# Passed on to the server from our environment when set (more with --env).
PASSED_NAMES = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "VIRTUAL_ENV")
PASSED_PREFIXES = ("LC_",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ci_evals.mcp import revisions  # noqa: PLC0415 - small, stdlib only

    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--protocol",
        metavar="REV",
        help=f"the spec revision to check: {', '.join(revisions.KNOWN)}; a server that does "
        "not serve it fails serves-revision (default: ask for "
        f"{revisions.DEFAULT} and check the revision the server negotiates)",
    )
    parser.add_argument(
        "--image",
        metavar="IMAGE",
        help="run the server in a container of IMAGE (docker, or --isolation KIND)",
    )
    parser.add_argument(
        "--isolation",
        metavar="KIND",
        default=None,
        help="on the host (none, the default), in bubblewrap namespaces (bwrap), or in a "
        "sandbox of another kind",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="every wait (default: 10)"
    )
    parser.add_argument(
        "--advisory", action="append", default=[], metavar="ID", help="a sub-test not to require"
    )
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="ID",
        help="a sub-test to require although advisory by default (parse-error, invalid-request)",
    )
    parser.add_argument(
        "--unknown-tool",
        choices=("error-or-isError", "error"),
        default="error-or-isError",
        help="what calling an unknown tool must give (default: a JSON-RPC error or a result "
        "with isError: true, as the official SDKs answer)",
    )
    parser.add_argument(
        "--call",
        "--tool",
        dest="tool",
        metavar="TOOL",
        help="the tool tools-call calls (default: the first without required arguments, else "
        "the first); with --arguments it must succeed (tools-call-success, required)",
    )
    parser.add_argument(
        "--arguments", metavar="JSON", help="its arguments (default: built from its inputSchema)"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="pass an environment variable to the server (by default only "
        + ", ".join(PASSED_NAMES)
        + ", LC_*)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARG...]")


def run(args: argparse.Namespace) -> int:
    from ci_evals.mcp import revisions, subtests  # noqa: PLC0415
    from ci_evals.mcp.check import DEFAULT_ADVISORY, Policy, run_check  # noqa: PLC0415
    from ci_evals.sandbox.registry import open_sandbox  # noqa: PLC0415

    argv = list(args.command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UserError("no server command", hint="ci-evals mcp-check -- python3 server.py")
    revision = revisions.check_known(args.protocol or revisions.DEFAULT)
    if not math.isfinite(args.timeout) or args.timeout <= 0:  # NaN compares false with 0
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    advisory = set(DEFAULT_ADVISORY)
    for name in [*args.advisory, *args.require]:
        if name not in subtests.ALL_IDS:
            raise UserError(
                f"unknown sub-test {name!r}", hint=f"known: {', '.join(subtests.ALL_IDS)}"
            )
    options = subtests.Options(
        revision=revision,
        timeout_s=args.timeout,
        unknown_tool_is_error_result=args.unknown_tool == "error-or-isError",
        tool=args.tool,
        arguments=_arguments(args.arguments),
        explicit=args.protocol is not None,
    )
    if options.named_call:  # a call the user named must succeed
        advisory.discard(subtests.TOOLS_CALL_SUCCESS)
    advisory.update(args.advisory)
    advisory.difference_update(args.require)
    env = _environment(args.env)
    cwd = Path.cwd()
    config, spec = _sandbox(args, argv, env, cwd)
    with open_sandbox(config, spec) as box:
        report = run_check(
            box,
            argv,
            cwd=cwd,
            env=env,
            options=options,
            policy=Policy(advisory=frozenset(advisory)),
        )
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(_table(report, argv))
    return EXIT_OK if report.required_passed else EXIT_FAIL


def _sandbox(
    args: argparse.Namespace, argv: list[str], env: dict[str, str], cwd: Path
) -> tuple[SandboxConfig, SandboxSpec]:
    from ci_evals.grading.kinds.mcp import program_paths  # noqa: PLC0415
    from ci_evals.sandbox.base import SandboxConfig, SandboxSpec  # noqa: PLC0415
    from ci_evals.sandbox.registry import HOST, KINDS  # noqa: PLC0415

    if args.image is not None:
        name = args.isolation or next((n for n in KINDS.builtin if KINDS.get(n).runs_images), None)
        if name is None or name == "none" or not KINDS.get(name).runs_images:
            raise UserError(
                f"--image needs a sandbox kind that runs images, not {name}",
                hint="leave --isolation out (docker), or name such a kind",
            )
        kind = KINDS.get(name)
        why = kind.available()
        if why is not None:
            raise UserError(f"--image: {why}")
        return SandboxConfig(name, kind.image_options(args.image)), SandboxSpec(writable=(cwd,))
    program = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if program is None or not os.access(program, os.X_OK):
        raise UserError(f"command not found: {argv[0]}", hint="give a program on PATH or its path")
    if not os.path.isfile(program):  # a folder is "executable" too
        raise UserError(f"not a program: {argv[0]}", hint="give a program on PATH or its path")
    if args.isolation not in (None, "none"):
        kind = KINDS.get(args.isolation)
        why = kind.available()
        if why is not None:
            raise UserError(f"--isolation {args.isolation}: {why}")
        options = kind.load(None, cwd)  # a kind that needs options says so here
        readonly = program_paths(argv[0], env)
        return SandboxConfig(kind.name, options), SandboxSpec(writable=(cwd,), readonly=readonly)
    return SandboxConfig(HOST), SandboxSpec(writable=(cwd,))


def _arguments(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserError(f"--arguments is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UserError("--arguments must be a JSON object (the tool's arguments)")
    return value


def _environment(extra: list[str]) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name in PASSED_NAMES or name.startswith(PASSED_PREFIXES)
    }
    for item in extra:
        name, has_value, value = item.partition("=")
        if not name:
            raise UserError(f"--env {item!r}: no variable name")
        if has_value:
            env[name] = value
        elif name in os.environ:
            env[name] = os.environ[name]
        else:
            raise UserError(
                f"--env {name}: not set here", hint=f"give it a value: --env {name}=VALUE"
            )
    return env


def _table(report: Report, argv: list[str]) -> str:
    from ci_evals.mcp.check import escape_controls  # noqa: PLC0415

    width = max(len(sub.id) for sub in report.subtests)
    asked = f" (asked for {report.requested}; negotiated)" if report.requested else ""
    lines = [f"MCP {report.protocol}{asked}: {' '.join(argv)}"]
    # The server's stderr, last line, once per distinct line: the sub-tests sharing
    # a process (or a server failing at start) would print the same line each.
    stderr: dict[str, list[str]] = {}
    for sub in report.subtests:
        # An advisory failure is not the server failing the check: `warn`, not `FAIL`.
        mark = "pass" if sub.passed else ("FAIL" if sub.required else "warn")
        kind = "required" if sub.required else "advisory"
        lines.append(f"  {mark}  {sub.id:<{width}}  {kind:<8}  {sub.reason}")
        last = sub.stderr.strip().splitlines()[-1:] if not sub.passed else []
        if last and last[0].strip():
            stderr.setdefault(escape_controls(last[0].strip()[:200]), []).append(sub.id)
    for line, where in stderr.items():
        lines.append(f"server stderr (last line), in {_sessions(where)}: {line}")
    lines.append(_verdict(report))
    return "\n".join(lines)


def _sessions(ids: list[str]) -> str:
    if len(ids) == 1:
        return f"{ids[0]}'s session"
    return f"the sessions of {len(ids)} sub-tests ({', '.join(ids)})"


def _verdict(report: Report) -> str:
    """`passed`, `passed (N advisory)` or `failed`, then what failed, then the score."""
    passed = sum(sub.passed for sub in report.subtests)
    score = f"score {report.score:.1f} ({passed} of {len(report.subtests)} sub-tests passed)"
    required = [sub.id for sub in report.subtests if sub.required and not sub.passed]
    advisory = [sub.id for sub in report.subtests if not sub.required and not sub.passed]
    if required:
        return f"failed: required sub-test(s) failed: {', '.join(required)}; {score}"
    if advisory:
        return (
            f"passed ({len(advisory)} advisory): every required sub-test passed; "
            f"advisory failed: {', '.join(advisory)}; {score}"
        )
    return f"passed: every sub-test passed; {score}"
