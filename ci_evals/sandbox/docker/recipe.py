"""Image recipes: how a sandbox image is built from local files, without a registry.

A recipe is a YAML file in the repository (`image:` in the suite names it, or
one of the recipes shipped in `recipes/`):

    name: python-mcp               # the image is ci-evals/<name>:<hash>
    suite: bookworm                # Debian release, made with debootstrap --variant=minbase
    mirror: http://deb.debian.org/debian
    packages: [python3]            # Debian packages added to minbase
    wheels: ["mcp==2.3.0"]         # fetched from PyPI on the host, installed in the image
    files: {bin: /usr/local/bin}   # from beside the recipe: a file to that path, a tree there
    env: {LANG: C.UTF-8}

Nothing assumes one language: `packages` can be a compiler or a runtime;
`wheels` is optional (and then needs `python3` in `packages`). The image's tag
is a hash of everything that decides its content (`Recipe.digest`), so an
edit to the recipe or a copied file builds a new image and an unchanged one
is reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ci_evals.config.yaml_source import ANY_KEY, LocatedNode, load
from ci_evals.errors import UserError
from ci_evals.fs.walk import walk

RECIPES = Path(__file__).with_name("recipes")  # shipped recipes, by folder name
RECIPE_FILE = "recipe.yaml"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Bumped when the builder changes what an image holds for the same recipe
# (2: the wheels' bytecode compiled in; 3: no ci-evals=1 label inherited from the
# build container); ROOTFS_VERSION when it changes the
# root file system (its cached tarball) too.
BUILDER_VERSION = 3
ROOTFS_VERSION = 1
_KEYS = ("name", "suite", "mirror", "packages", "wheels", "files", "env")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_SUITE = re.compile(r"[a-z][a-z0-9-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Recipe:
    file: Path  # the recipe file (absolute)
    name: str
    suite: str
    mirror: str
    packages: tuple[str, ...]
    wheels: tuple[str, ...]
    files: tuple[tuple[Path, PurePosixPath], ...]  # (source on the host, destination inside)
    env: tuple[tuple[str, str], ...]

    @property
    def rootfs_key(self) -> str:
        """What the debootstrap root file system depends on (its cache entry)."""
        return sha256(
            json.dumps([ROOTFS_VERSION, self.suite, self.mirror, sorted(self.packages)]).encode()
        )

    def digest(self) -> str:
        """A hash of everything that decides the image: the root file system, the
        wheels, every copied file's path, mode and bytes, the environment."""
        hasher = hashlib.sha256()
        head = [BUILDER_VERSION, self.rootfs_key, list(self.wheels), list(self.env)]
        hasher.update(json.dumps(head).encode())
        for source, destination in self.files:
            hasher.update(f"\0{destination}\0".encode())
            for path, relative, kind in _tree(source):
                mode = path.lstat().st_mode & 0o7777
                hasher.update(f"{relative}\0{kind}\0{mode:o}\0".encode())
                if kind == "file":
                    hasher.update(sha256(path.read_bytes()).encode())
                elif kind == "link":
                    hasher.update(os.readlink(path).encode())
        return hasher.hexdigest()

    @property
    def tag(self) -> str:
        return f"ci-evals/{self.name}:{self.digest()[:16]}"


def find_recipe(reference: str, base: Path) -> Path:
    """The recipe file `reference` names: a path (a recipe file, or a folder
    holding `recipe.yaml`) relative to `base`, else a shipped recipe's name."""
    path = base / reference
    if path.is_dir():
        path = path / RECIPE_FILE
    if path.is_file():
        return path.resolve()
    shipped = RECIPES / reference / RECIPE_FILE
    if _NAME.fullmatch(reference) and shipped.is_file():
        return shipped
    known = ", ".join(sorted(p.name for p in RECIPES.iterdir() if (p / RECIPE_FILE).is_file()))
    raise UserError(
        f"no image recipe {reference!r} (neither a file nor a shipped recipe)",
        hint=f"give a recipe.yaml path, or one of: {known}",
    )


def load_recipe(path: Path, display: str | None = None) -> Recipe:
    """Read and validate a recipe; any mistake is a one-line `UserError` at file:line."""
    root = load(path, display)
    keys = root.mapping(_KEYS, required=("name", "suite", "packages"))
    name = _matching(keys["name"], _NAME, "lower-case letters, digits, '.', '_', '-'")
    suite = _matching(keys["suite"], _SUITE, "a Debian release name such as bookworm")
    mirror = keys["mirror"].as_str() if "mirror" in keys else DEFAULT_MIRROR
    if not mirror.startswith(("http://", "https://", "file:/")):
        raise keys["mirror"].error("must be an http(s):// or file:/ URL")
    packages = [
        _matching(f, _PACKAGE, "a Debian package name") for f in keys["packages"].sequence()
    ]
    wheels: list[str] = []
    for item in keys["wheels"].sequence() if "wheels" in keys else []:
        text = item.as_str().strip()
        if text.startswith("-") or any(c.isspace() for c in text):  # pip would read an option
            raise item.error("must be one requirement (a name, optionally a version)")
        wheels.append(text)
    if wheels and "python3" not in packages:
        raise keys["wheels"].error("wheels need python3 in packages", hint="add python3")
    files = _files(keys["files"], path.parent) if "files" in keys else ()
    env: list[tuple[str, str]] = []
    if "env" in keys:
        for key, value in keys["env"].mapping(ANY_KEY).items():
            if not _ENV_NAME.fullmatch(key):
                raise value.error(f"{key!r} is not an environment variable name")
            env.append((key, value.as_str(allow_empty=True)))
    return Recipe(
        file=path,
        name=name,
        suite=suite,
        mirror=mirror,
        packages=tuple(packages),
        wheels=tuple(wheels),
        files=files,
        env=tuple(env),
    )


def _matching(field: LocatedNode, pattern: re.Pattern[str], what: str) -> str:
    value = field.as_str()
    if not pattern.fullmatch(value):
        raise field.error(f"{value!r} is not valid", hint=f"use {what}")
    return value


def _files(field: LocatedNode, base: Path) -> tuple[tuple[Path, PurePosixPath], ...]:
    pairs: list[tuple[Path, PurePosixPath]] = []
    for source_text, destination in field.mapping(ANY_KEY).items():
        source = (base / source_text).resolve()
        if not source.exists():
            raise destination.error(f"{source_text!r} does not exist beside the recipe")
        if base.resolve() not in (source, *source.parents):
            raise destination.error(f"{source_text!r} is outside the recipe's folder")
        inside = PurePosixPath(destination.as_str())
        if not inside.is_absolute() or ".." in inside.parts:
            raise destination.error("must be an absolute path inside the image")
        pairs.append((source, inside))
    return tuple(pairs)


def _tree(source: Path) -> list[tuple[Path, str, str]]:
    """(path, relative path, kind) of `source` and everything under it, links not followed."""
    if not source.is_dir():
        return [(source, "", "file")]
    return [(source, "", "dir")] + [(source / rel, rel, kind) for rel, kind, _ in walk(source)]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
