"""`ci-evals sandbox build RECIPE`: build a sandbox image from its recipe (docs/isolation.md).

RECIPE is a recipe file, a folder holding `recipe.yaml`, or the name of a
shipped recipe (`python-mcp`). The image (`ci-evals/<name>:<hash of the
recipe>`) is built only when the engine does not have it yet (`--force`:
build anyway); the root file system and the wheels are cached in the cache
folder (`--cache`, default `$CI_EVALS_CACHE` or `~/.cache/ci-evals`). Progress
goes to stderr, the tag to stdout. Exit 0 when the image exists, 2 on a bad
recipe, a missing debootstrap or engine, or a failed build step.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ci_evals.errors import EXIT_OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build (or find) the image of a recipe")
    build.add_argument("recipe", metavar="RECIPE", help="recipe file or folder, or shipped name")
    build.add_argument("--cache", type=Path, metavar="DIR", help="cache folder")
    build.add_argument("--force", action="store_true", help="build even when the image exists")


def run(args: argparse.Namespace) -> int:
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
