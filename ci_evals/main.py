"""The `ci-evals` command line: dispatch to one module per subcommand.

Only the chosen subcommand's module is imported, so `ci-evals check-coverage`
(run on every commit) never pays for the agent SDK that `ci-evals run` needs.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Protocol, cast

from ci_evals.commands import COMMANDS, NEEDS_RUN_EXTRA, NO_AGENT_FLAGS
from ci_evals.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UserError,
    error_handler,
    note_interrupt,
)


class CommandModule(Protocol):
    """What every `ci_evals.commands.*` module provides."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _top_parser() -> argparse.ArgumentParser:
    lines = [f"  {name:<16} {summary}" for name, (_, summary) in COMMANDS.items()]
    parser = argparse.ArgumentParser(
        prog="ci-evals",
        description="Evaluate phased AI agents in CI.",
        epilog="commands:\n"
        + "\n".join(lines)
        + "\n\nRun `ci-evals COMMAND --help` for its options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="print the version (and commit) and exit"
    )
    parser.add_argument("command", nargs="?", metavar="COMMAND")
    return parser


class _Version(argparse.Action):
    """`--version`: the commit is looked up (git, `direct_url.json`) only when asked."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from ci_evals.version import version_line  # noqa: PLC0415 - runs git

        print(version_line())
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    top = _top_parser()
    if not args_list or args_list[0].startswith("-"):
        top.parse_args(args_list)  # handles --help / --version, exits
        top.print_help(sys.stderr)
        return EXIT_USAGE
    name, rest = args_list[0], args_list[1:]
    if name not in COMMANDS:
        with error_handler() as code:  # printed as every user error is
            raise UserError(f"unknown command {name!r}", hint=f"valid: {', '.join(COMMANDS)}")
        return code[0]
    module_name, summary = COMMANDS[name]
    if name in NEEDS_RUN_EXTRA:  # before the import, which would fail with a traceback
        from ci_evals.requirements import require_run_extra  # noqa: PLC0415

        flag = NO_AGENT_FLAGS.get(name)
        agent = flag is None or (flag != "" and flag not in rest)
        with error_handler() as code:
            require_run_extra(name, agent=agent)
        if code[0] != EXIT_OK:
            return code[0]
    module = cast(CommandModule, importlib.import_module(module_name))
    parser = argparse.ArgumentParser(prog=f"ci-evals {name}", description=summary)
    module.add_arguments(parser)
    if "--json" in rest:
        from ci_evals.commands.output import json_usage_errors  # noqa: PLC0415

        json_usage_errors(parser, rest)
    args = parser.parse_args(rest)
    with error_handler() as code:
        try:
            if getattr(args, "json_command", None) and args.json:
                from ci_evals.commands.output import json_output  # noqa: PLC0415

                with json_output(args):
                    code[0] = module.run(args)
            else:
                code[0] = module.run(args)
        finally:
            _close_sandboxes()
    return code[0]


def _close_sandboxes() -> None:
    """End every sandbox the command left open: after Ctrl-C, a grader's worker
    thread may still be inside one (its container or namespace would outlive
    us, and the interpreter would wait for the thread). Imported only if used."""
    # A signal may land while the registry is being imported: in sys.modules,
    # its body not run yet (then nothing can be open either).
    close_all = getattr(sys.modules.get("ci_evals.sandbox.registry"), "close_all", None)
    if close_all is not None:
        close_all()


# Run on every commit and pull request over up to 100,000 paths; they leave
# nothing behind to clean up (no child process, no temporary file).
QUICK_EXIT = frozenset({"compute-stage", "check-coverage"})


def _interrupt(signum: int, frame: object) -> None:
    # Before the exception unwinds: `asyncio.run` would first wait for its
    # worker threads, and a grader's thread may be inside a sandbox's `exec`
    # until that command's timeout; closing the sandboxes ends it now.
    note_interrupt(signum)  # pydantic-core may swallow the exception into one of its own
    _close_sandboxes()
    raise KeyboardInterrupt


def _note_signals(received: list[int]) -> None:
    """From now on a SIGINT or SIGTERM is only noted in `received`, never raised."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda number, _frame: received.append(number))


def entry() -> None:
    """Console-script entry point.

    One signal rule from here on: SIGTERM means what Ctrl-C does (a
    `KeyboardInterrupt`, so also while the command's modules are imported), and
    either one, at any moment, ends the command with exit 130 and one line, no
    traceback. `ci-evals run` handles them itself while stages run (partial
    results, see commands/run.py); once the command has returned, a late signal
    is only noted, and still makes the exit code 130; at the very end they are
    ignored (interpreter shutdown would reset a Python handler to the default,
    and a SIGTERM there would end the process with 143).
    """
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored by our parent
        signal.signal(signal.SIGINT, _interrupt)  # (asyncio.run then leaves it to us)
    quick = len(sys.argv) > 1 and sys.argv[1] in QUICK_EXIT
    if quick:
        # 100,000+ objects and no cycles among them: the cyclic collector
        # would only re-scan the growing heap (~10% of a big run).
        gc.disable()
    received: list[int] = []
    try:
        try:
            code = main()
        finally:
            _note_signals(received)
    except KeyboardInterrupt:  # outside the command's own handler: imports, argument parsing
        print("ci-evals: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    if received:
        code = EXIT_INTERRUPTED
    if not quick:
        sys.exit(code)
    # Interpreter shutdown would free every object one by one and collect
    # once more (~10-15 ms after a 100,000-path diff) for nothing: flush the
    # answer and leave. Python itself exits 120 when it cannot flush stdout.
    for stream in (sys.stdout, sys.stderr):  # None when started with the stream closed
        if stream is not None and not stream.closed:
            try:
                stream.flush()
            except (OSError, ValueError):  # the reader went away
                code = code or 120
    os._exit(code)
