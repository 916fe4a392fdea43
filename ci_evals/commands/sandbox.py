"""`ci-evals sandbox build RECIPE`: build a sandbox image from its recipe; `ci-evals
sandbox check`: which sandbox a run would use and whether it can run here
(docs/isolation.md).

RECIPE is a recipe file, a folder holding `recipe.yaml`, or the name of a
shipped recipe (`python-mcp`). The image (`ci-evals/<name>:<hash of the
recipe>`) is built only when the engine does not have it yet (`--force`:
build anyway); the root file system and the wheels are cached in the cache
folder (`--cache`, default `$CI_EVALS_CACHE` or `~/.cache/ci-evals`). Progress
goes to stderr, the tag to stdout. Exit 0 when the image exists, 2 on a bad
recipe, a missing debootstrap or engine, or a failed build step.

`check [--suite FILE] [--isolation KIND]` prints the kind `run` would open
(the suite's `sandbox:`, or `--isolation`; `none` is `local`) and exits 0 when
it can run on this machine, 1 when it cannot (why, and what to install or
allow, in one line on stderr), 2 on a bad suite. The composite action runs it
before the run to prepare the runner (bubblewrap, AppArmor) or stop naming its
`isolation:` input. It starts nothing and builds no image.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ci_evals.errors import EXIT_FAIL, EXIT_OK
from ci_evals.run import isolation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build (or find) the image of a recipe")
    build.add_argument("recipe", metavar="RECIPE", help="recipe file or folder, or shipped name")
    build.add_argument("--cache", type=Path, metavar="DIR", help="cache folder")
    build.add_argument("--force", action="store_true", help="build even when the image exists")
    check = actions.add_parser(
        "check", help="print the sandbox kind a run would use; exit 1 when it cannot run here"
    )
    check.add_argument(
        "--suite", type=Path, help="the suite file (default: ci-evals.yaml found upwards)"
    )
    isolation.add_option(check)


def run(args: argparse.Namespace) -> int:
    if args.action == "check":
        return _check(args)
    return _build(args)


def _check(args: argparse.Namespace) -> int:
    from ci_evals.sandbox import registry  # noqa: PLC0415
    from ci_evals.suite.load import find_suite, load_suite  # noqa: PLC0415

    found = args.suite or find_suite(Path.cwd())
    suite = load_suite(found, None if args.suite else os.path.relpath(found))
    kind = registry.kind_of(isolation.asked(args, suite))
    print(kind.name, flush=True)
    why = kind.available() if kind.isolated else None
    if why is None:
        return EXIT_OK
    print(f"ci-evals: the {kind.name} sandbox cannot run here: {why}", file=sys.stderr)
    return EXIT_FAIL


def _build(args: argparse.Namespace) -> int:
    from ci_evals.errors import UserError  # noqa: PLC0415
    from ci_evals.sandbox.docker import engine, image_build, recipe  # noqa: PLC0415

    found = recipe.load_recipe(recipe.find_recipe(args.recipe, Path.cwd()))
    why = engine.available()
    if why is not None:
        raise UserError(why)
    cache = args.cache or image_build.cache_dir(os.environ)
    if args.force:
        tag = image_build.build_image(found, cache)
    else:
        tag = image_build.ensure_image(found, cache)
    print(tag, flush=True)
    return EXIT_OK
