"""`stub:PATH`: the stub model (`stub_model`) serving a script on 127.0.0.1.

No credential: the run needs no key and can run anywhere, offline. With
`--record` the stub writes every exchange as the forwarding proxy does, so a
stub run can be replayed (`replay:RUN_DIR`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.endpoints.base import EndpointOptions, OpenEndpoint
from ci_evals.errors import UserError

if TYPE_CHECKING:
    from ci_evals.endpoints.stub_model import Script

PREFIX = "stub:"


class StubEndpoint:
    def __init__(self, script: Path) -> None:
        self.script = script
        self.name = f"{PREFIX}{script}"
        self._loaded: Script | None = None

    def check(self, environ: Mapping[str, str], why: str, hint: str | None = None) -> None:
        self._load()  # a broken script fails now, with its file:line

    def unserved(self, needs: Sequence[tuple[str, str | None, tuple[str, ...]]]) -> list[str]:
        """For each stage (its name, the `PLUGIN:cmd` its prompt runs, the subagents
        its checks want), one line per command or agent no rule of the script can
        answer: the run would be an `ERROR:stub` (`ci-evals check` lists them)."""
        rules = self._load().rules
        shown = self.script.as_posix()
        found = []
        for stage, command, agents in needs:
            if command is not None and not any(
                rule.match.command == command
                or (
                    rule.match.command is None
                    and rule.match.agent is None
                    and rule.match.subagent is not True
                    and rule.match.prompt_contains is None  # a plain prompt's rule
                )
                for rule in rules
            ):
                found.append(
                    f"stage {stage} runs /{command}, but {shown} has no rule for it "
                    f"(match: {{command: {command}}})"
                )
            for agent in agents:
                if not any(
                    rule.match.agent == agent
                    or (
                        rule.match.agent is None
                        and rule.match.command is None
                        and rule.match.subagent is not False
                        and rule.match.prompt_contains is None
                    )
                    for rule in rules
                ):
                    found.append(
                        f"stage {stage} checks that the subagent {agent} ran, but {shown} has "
                        f"no rule for it (match: {{agent: {agent}}}, launched by an agent: call)"
                    )
        return found

    def _load(self) -> Script:
        from ci_evals.endpoints.stub_model import load_script  # noqa: PLC0415 - heavy

        if self._loaded is None:
            self._loaded = load_script(self.script)
        return self._loaded

    @contextmanager
    def open(self, environ: Mapping[str, str], options: EndpointOptions) -> Iterator[OpenEndpoint]:
        from ci_evals.endpoints.stub_model import StubServer  # noqa: PLC0415

        script = self._load()
        with StubServer(script, record_path=options.record_path) as server:
            yield OpenEndpoint(
                name=self.name,
                env=server.cli_env(),
                model=options.default_model,
                new_caller=server.new_caller,
                notes=_variant_notes(script),
            )


def _variant_notes(script: Script) -> tuple[str, ...]:
    """A rule with `variants:` answers the units of a plan with different ones: a
    newcomer seeing repeats score differently should know why."""
    rotating = [f"'{rule.name}' ({len(rule.variants)})" for rule in script.rules if rule.variants]
    if not rotating:
        return ()
    which = "rule" if len(rotating) == 1 else "rules"
    verb = "rotates its" if len(rotating) == 1 else "rotate their"
    return (
        f"stub: the {which} {', '.join(rotating)} {verb} variants by the unit's place "
        "in the plan: what they answer, and so the scores, change between repeats and "
        "scenarios by design, the same in every run and every split into shards "
        "(docs/stub-model.md, Variants)",
    )


class _StubKind:
    name = "stub"

    def load(self, value: str | None) -> Path:
        if not value:
            raise UserError("--model stub: needs a script path", field="--model", hint="stub:PATH")
        return Path(value)

    def available(self) -> str | None:
        return None  # it serves on the loopback, offline

    def create(self, options: object) -> StubEndpoint:
        assert isinstance(options, Path)  # what `load` gave
        return StubEndpoint(options)


KIND = _StubKind()
