"""The Grader Protocol: what turns a stage's files into a `GraderResult`.

A grader kind is one module: it validates its own part of a stage in
`ci-evals.yaml` (`GraderKind.load`, file:line errors) into frozen graders, and
each grader grades a folder (`Grader.grade`). The registry (`registry`) maps
stage keys to kinds; `config.load_stage_grading` and `grading.files` only
loop over what the registry gives them.

The reviewer is the one grader that is an agent: it is loaded here too
(`config.ReviewerConfig`) but runs through the Agent seam, from the grading
pipeline, which can also re-use a saved scorecard by its fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ci_evals.sandbox.base import ON_HOST, SandboxConfig

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import Field
    from ci_evals.results.criteria import GraderResult


@dataclass(frozen=True)
class LoadContext:
    """Where a grader's config may point: files next to the suite, or in the plugin."""

    suite_dir: Path
    plugin_dir: Path


@dataclass(frozen=True)
class GradeContext:
    """One stage state to grade."""

    folder: Path  # the stage's files (a private copy when any grader `writes`)
    trajectory: Path | None  # the stage's trajectory.jsonl; None for a fixture
    out_dir: Path | None = None  # where graders keep their logs
    sandbox: SandboxConfig = ON_HOST  # where graders that run programs run them
    env: Mapping[str, str] | None = None  # their environment (None: a minimal one)


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

    def grade(self, ctx: GradeContext) -> GraderResult: ...


class GraderKind(Protocol):
    @property
    def key(self) -> str:
        """Its key in a stage of ci-evals.yaml."""

    def load(self, value: Field, ctx: LoadContext) -> tuple[Grader, ...]: ...
