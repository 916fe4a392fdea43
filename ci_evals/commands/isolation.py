"""`--isolation`, shared by every command that runs an agent or a grader's program
(`run`, `grade`, `check-fixtures`): one option, one rule (`sandbox.registry.choose`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--isolation",
        choices=("bwrap", "none"),
        help="where agents and graders' programs run: bubblewrap namespaces (default: the "
        "suite's `sandbox:`), or none (unisolated: only when asked; see docs/isolation.md)",
    )


def choose(
    args: argparse.Namespace, suite_sandbox: str, environ: Mapping[str, str], *, needed: bool
) -> str:
    """The sandbox kind for this command. `needed`: something will run in it (an
    agent, a command grader); when nothing will, there is nothing to isolate."""
    if not needed:
        return "local"
    from ci_evals.agents.environment import secret_names  # noqa: PLC0415
    from ci_evals.sandbox import registry  # noqa: PLC0415

    return registry.choose(args.isolation or suite_sandbox, secrets=secret_names(environ))
