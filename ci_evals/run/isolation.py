"""`--isolation`, shared by every command that runs an agent or a grader's program
(`run`, `grade`, `check-fixtures`): one option, one rule (`sandbox.registry.choose`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ci_evals.errors import UserError
    from ci_evals.sandbox.base import SandboxConfig
    from ci_evals.suite.load import Suite

NONE = "none"  # unisolated: the host's own sandbox kind


def add_option(parser: argparse.ArgumentParser) -> None:
    # No `choices`: a package may add kinds (entry points, read only when one is named).
    parser.add_argument(
        "--isolation",
        metavar="KIND",
        help="where agents and graders' programs run: a sandbox kind (bwrap: bubblewrap "
        "namespaces; docker: a container of the suite's image; or one a package adds), or "
        "none (unisolated: only when asked; see docs/isolation.md); default: the suite's "
        "`sandbox:`",
    )


def choose(
    args: argparse.Namespace, suite: Suite, environ: Mapping[str, str], *, needed: bool
) -> SandboxConfig:
    """The sandbox for this command. `needed`: something will run in it (an agent, a
    command grader); when nothing will, there is nothing to isolate. A kind other
    than the suite's runs with the options the suite's `sandbox:` gives it, else
    with its defaults (`SandboxKind.load(None)`), which a kind that needs options
    (docker's image) refuses; `prepare` readies it."""
    from ci_evals.agents.environment import secret_names  # noqa: PLC0415
    from ci_evals.errors import UserError  # noqa: PLC0415
    from ci_evals.run.shard_mac import KEY_ENV  # noqa: PLC0415
    from ci_evals.sandbox import registry  # noqa: PLC0415
    from ci_evals.sandbox.base import SandboxConfig  # noqa: PLC0415

    if not needed:
        return SandboxConfig(registry.HOST)
    requested = asked(args, suite)
    name = args.isolation
    # In GitHub Actions the suite is the pull request's: it may not turn isolation
    # off, nor may the host stand in for a sandbox that cannot run; only the
    # workflow's own command line can (docs/isolation.md, *In GitHub Actions*).
    in_actions = environ.get("GITHUB_ACTIONS") == "true"
    unisolated = not registry.kind_of(requested).isolated
    if in_actions and name is None and unisolated:
        raise _turned_off(suite, requested.kind)
    # The shard key signs the verdict (docs/scale-out.md): an agent of our uid could read
    # it where we are (the CI step's shell's /proc environ, our memory) and sign a forged
    # shard. So with it set nothing runs unisolated, not even when asked.
    if unisolated and environ.get(KEY_ENV):
        raise UserError(
            f"{KEY_ENV} is set: an unisolated agent could read it and sign a forged shard, "
            f"so sandbox: {requested.kind} (--isolation none) is refused",
            hint="run the shard in a sandbox (bwrap, docker), or without the key (unsigned)",
        )
    return registry.choose(
        requested, secrets=secret_names(environ), may_fall_back_to_host=not in_actions
    )


def asked(args: argparse.Namespace, suite: Suite) -> SandboxConfig:
    """The sandbox the command line (`--isolation`) or else the suite asks for, before
    any rule of where it may run (`choose`); `none` is the host's kind."""
    from ci_evals.errors import UserError  # noqa: PLC0415
    from ci_evals.sandbox import registry  # noqa: PLC0415
    from ci_evals.sandbox.base import SandboxConfig  # noqa: PLC0415

    requested = suite.sandbox
    name = args.isolation
    if name == NONE:
        return SandboxConfig(registry.HOST)
    if name is not None and name in suite.sandbox_options:
        return SandboxConfig(name, suite.sandbox_options[name])
    if name is not None and name != requested.kind:
        try:
            return SandboxConfig(name, registry.KINDS.get(name).load(None, suite.root))
        except UserError as exc:
            # The suite may give it options beside its own kind's (suite.backends).
            beside = f"sandbox: {{kind: {requested.kind}, {name}: {{...}}}}"
            raise UserError(
                f"--isolation {name}: {exc.message}",
                file=suite.display,
                hint=f"{exc.hint}; or, for --isolation, {beside}" if exc.hint else beside,
            ) from None
    return requested


def _turned_off(suite: Suite, kind: str) -> UserError:
    """The one-line refusal of a suite whose `sandbox:` runs the agent unisolated."""
    from ci_evals.config.yaml_source import ANY_KEY  # noqa: PLC0415
    from ci_evals.errors import UserError  # noqa: PLC0415

    message = (
        f"sandbox: {kind} runs the agent unisolated, refused in GitHub Actions: the pull "
        "request's own ci-evals.yaml may not turn isolation off"
    )
    hint = "remove it (the default is bwrap), or pass --isolation none in the workflow"
    field = suite.source.mapping(ANY_KEY).get("sandbox") if suite.source is not None else None
    if field is not None:
        return field.error(message, hint=hint)
    return UserError(message, file=suite.display, hint=hint)


def prepare(
    config: SandboxConfig, environ: Mapping[str, str], run_id: str | None = None
) -> SandboxConfig:
    """`config` ready before anything runs in it (`SandboxKind.prepare`: docker builds
    the suite's image when the engine lacks it, and labels its containers with
    `run_id`); passed, as it is, to everything that opens a sandbox."""
    import dataclasses  # noqa: PLC0415

    from ci_evals.sandbox.registry import kind_of  # noqa: PLC0415

    options = kind_of(config).prepare(config.options, environ, run_id)
    return dataclasses.replace(config, options=options)
