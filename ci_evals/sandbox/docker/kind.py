"""The `docker` kind: its options (`sandbox: {kind: docker, image: RECIPE, network: …}`),
read at load, and what a command does once before its containers start (build the
image). The containers themselves are `engine` (imported only to open one:
it pulls in the docker SDK)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import UserError
from ci_evals.sandbox.base import Enforced, Sandbox, SandboxOptions, SandboxSpec
from ci_evals.sandbox.docker.recipe import find_recipe, load_recipe

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

KEYS = ("kind", "image", "network")


@dataclass(frozen=True)
class DockerOptions(SandboxOptions):
    recipe: Path | None = None  # the image's recipe file (`recipe`), validated at load
    image_tag: str | None = None  # its built tag (`prepare`), or a ready image (`mcp-check`)
    run_id: str | None = None  # labels the containers, so `ci-evals gc` knows the run


class DockerKind:
    name = "docker"
    isolated = True
    # The image is part of the task (its tools, its /workspace): without an
    # engine the command stops; it never falls back to running on the host.
    falls_back_to_host = False
    runs_images = True

    def load(self, value: LocatedNode | None, suite_dir: Path) -> DockerOptions:
        if value is None:
            raise UserError(
                "the docker sandbox needs an image",
                hint="write sandbox: {kind: docker, image: RECIPE} (e.g. python-mcp)",
            )
        keys = value.mapping(KEYS, required=("image",))
        network = keys["network"].as_bool() if "network" in keys else False
        image = keys["image"]
        try:
            recipe = find_recipe(image.as_str(), suite_dir)
        except UserError as exc:
            raise image.error(exc.message, hint=exc.hint) from None
        load_recipe(recipe)  # its own mistakes at its own file:line
        return DockerOptions(network=network, recipe=recipe)

    def available(self) -> str | None:
        from ci_evals.sandbox.docker import engine  # noqa: PLC0415 - the SDK only when asked

        return engine.available()

    def prepare(
        self, options: SandboxOptions, environ: Mapping[str, str], run_id: str | None
    ) -> DockerOptions:
        """The recipe's image, built when the engine lacks it (the first run)."""
        docker_options = _own(options)
        if docker_options.recipe is None:
            return dataclasses.replace(docker_options, run_id=run_id)
        from ci_evals.sandbox.docker.image_build import cache_dir, ensure_image  # noqa: PLC0415

        tag = ensure_image(load_recipe(docker_options.recipe), cache_dir(environ))
        return dataclasses.replace(docker_options, image_tag=tag, run_id=run_id)

    def image_options(self, image: str) -> DockerOptions:
        return DockerOptions(image_tag=image)

    def limits(self) -> Enforced:
        from ci_evals.sandbox.docker import seccomp  # noqa: PLC0415 - json + resources, on use

        spec = SandboxSpec(writable=())
        return Enforced("docker", spec.pids, spec.memory_bytes, None, None, seccomp.SUMMARY)

    def open(self, spec: SandboxSpec, options: SandboxOptions) -> Sandbox:
        from ci_evals.sandbox.docker.engine import DockerSandbox  # noqa: PLC0415

        own = _own(options)
        if own.image_tag is None:
            raise UserError("the docker sandbox's image was not built (DockerKind.prepare)")
        return DockerSandbox(spec, image=own.image_tag, network=own.network, run_id=own.run_id)


def _own(options: SandboxOptions) -> DockerOptions:
    if not isinstance(options, DockerOptions):  # another kind's, or none: a bug of the caller
        raise TypeError(f"the docker sandbox got {type(options).__name__}, not DockerOptions")
    return options


KIND = DockerKind()
