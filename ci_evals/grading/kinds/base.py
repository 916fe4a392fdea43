"""The Grader Protocol: what turns a stage's files into a `GraderResult`.

A grader kind is one module: a `GraderKind` validates its own key of a stage
in `ci-evals.yaml` (`GraderKind.load`, file:line errors) into frozen graders,
and each grader grades a folder (`Grader.grade`). The registry (`registry`,
a `ci_evals.registry.Registry`) maps stage keys to kinds, built in or from a
package's `ci_evals.graders` entry point; `grading.config.load_stage_grading`
and `grade_state.files` only loop over what it gives them. What a grader can do
beyond grading (its own scoring defaults, grading without a trajectory) is
part of the Protocol, never looked up by name or attribute probing.

The reviewer is the one grader that is an agent: it is loaded with the
others (`grading.reviewer.config.ReviewerConfig`) but runs through the Agent
seam, from the grading pipeline, which can also re-use a saved scorecard by
its fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ci_evals.sandbox.base import ON_HOST, SandboxConfig

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode
    from ci_evals.results.criteria import GraderResult
    from ci_evals.results.verdict import PolicyOverride


@dataclass(frozen=True)
class LoadContext:
    """Where a grader's config may point: files next to the suite, or in the plugin,
    all resolving inside `within` (the repository, `fs.copyable.confinement`), outside
    .git: each path through `fs.copyable.named_problem`."""

    suite_dir: Path
    plugin_dir: Path
    within: Path


@dataclass(frozen=True)
class ModelEndpoint:
    """The run's model endpoint, for a grader that asks a model itself (a judge): its
    requests are the stage's, so the proxy meters them against the run budget and
    the stub counts an unanswered one against the stage."""

    env: Mapping[str, str] = field(repr=False)  # `OpenEndpoint.env`: URL, run token or key
    budget_usd: float | None = None  # what is left of the run budget (None: no budget)


@dataclass(frozen=True)
class GradeContext:
    """One stage state to grade."""

    folder: Path  # the stage's files (a private copy when any grader `writes`)
    trajectory: Path | None  # the stage's trajectory.jsonl; None for a fixture
    out_dir: Path | None = None  # where graders keep their logs
    sandbox: SandboxConfig = ON_HOST  # where graders that run programs run them
    env: Mapping[str, str] | None = None  # their environment (None: a minimal one)
    endpoint: ModelEndpoint | None = None  # for graders that ask a model (None: there is none)


class Grader(Protocol):
    @property
    def name(self) -> str:
        """What results call it: "checks", "command:<id>"."""

    @property
    def writes(self) -> bool:
        """It may change the folder: it gets a private copy."""

    @property
    def sandboxed(self) -> bool:
        """It runs programs (the agent's code, often): in the run's sandbox."""

    @property
    def scoring(self) -> PolicyOverride | None:
        """The advisory flags and weights it gives its own criteria (an mcp grader's
        sub-tests), applied through the stage's policy; None: none."""

    def files_only(self) -> Grader:
        """The grader for a folder with no trajectory (a fixture): itself, or a copy
        without what reads the trajectory."""

    def grade(self, ctx: GradeContext) -> GraderResult: ...


class GraderKind(Protocol):
    """One grader kind, as the registry knows it."""

    @property
    def name(self) -> str:
        """Its key in a stage of ci-evals.yaml (`checks`, `graders`, `mcp`)."""

    def load(self, value: LocatedNode, ctx: LoadContext) -> tuple[Grader, ...]:
        """Its graders from its key's value; mistakes are `LocatedNode.error`s at
        their file:line."""

    def available(self) -> str | None:
        """Why its graders cannot run on this machine, in one line; None when they can.
        A suite that uses a kind that cannot run fails at load, at the kind's key."""
