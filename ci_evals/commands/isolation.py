"""`--isolation`, shared by every command that runs an agent or a grader's program
(`run`, `grade`, `check-fixtures`): one option, one rule (`sandbox.registry.choose`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ci_evals.suite.load import Suite


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--isolation",
        choices=("bwrap", "docker", "none"),
        help="where agents and graders' programs run: bubblewrap namespaces, a container "
        "of the suite's `image:` (docker), or none (unisolated: only when asked; see "
        "docs/isolation.md); default: the suite's `sandbox:`",
    )


def choose(
    args: argparse.Namespace, suite: Suite, environ: Mapping[str, str], *, needed: bool
) -> str:
    """The sandbox kind for this command. `needed`: something will run in it (an
    agent, a command grader); when nothing will, there is nothing to isolate.
    `docker` needs the suite's `image:`; `prepare` builds it."""
    if not needed:
        return "local"
    from ci_evals.agents.environment import secret_names  # noqa: PLC0415
    from ci_evals.errors import UserError  # noqa: PLC0415
    from ci_evals.sandbox import registry  # noqa: PLC0415

    kind = registry.choose(args.isolation or suite.sandbox, secrets=secret_names(environ))
    if kind == "docker" and suite.image is None:
        raise UserError(
            "--isolation docker needs the suite's image: (a recipe)", file=suite.display
        )
    return kind


def prepare(kind: str, suite: Suite, environ: Mapping[str, str], run_id: str | None = None) -> None:
    """Before anything runs in sandboxes of `kind`: for `docker`, the suite's image
    is built when the engine lacks it (the first run), and it, `network:` and
    `run_id` are fixed for every sandbox the command opens
    (`sandbox.registry.configure`). Nothing to do for the other kinds."""
    if kind != "docker" or suite.image is None:
        return
    from ci_evals.sandbox import registry  # noqa: PLC0415
    from ci_evals.sandbox.image_build import cache_dir, ensure_image  # noqa: PLC0415
    from ci_evals.sandbox.recipe import load_recipe  # noqa: PLC0415

    tag = ensure_image(load_recipe(suite.image), cache_dir(environ))
    registry.configure("docker", image=tag, network=suite.network, run_id=run_id)
