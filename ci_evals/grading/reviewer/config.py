"""A stage's `reviewer:` key (see `ci_evals.grading.config`), validated at load:
the review agent, its prompt, its rubrics (found and read now, so a typo fails
the suite at its line) and an optional judge model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ci_evals.errors import Problems, UserError
from ci_evals.grading.reviewer.rubrics import RubricSet, discover

if TYPE_CHECKING:
    from ci_evals.config.yaml_source import LocatedNode

REVIEWER_KEYS = ("agent", "rubrics", "prompt", "model", "require_all")


@dataclass(frozen=True)
class ReviewerConfig:
    agent: str  # relative to the plugin folder
    prompt: str  # a template, rendered by the runner like a stage prompt
    # Folders or globs relative to the plugin folder; `suite:PATH` to the suite's folder.
    rubrics: tuple[str, ...]
    model: str | None = None
    require_all: bool = False

    def rubric_set(self, plugin_dir: Path, suite_dir: Path | None = None) -> RubricSet:
        """The rubrics as found in `plugin_dir` and, for `suite:` ones, `suite_dir`
        (grade against the copies the reviewer read)."""
        return discover(plugin_dir, self.rubrics, suite_dir)


def load_reviewer(
    value: LocatedNode, plugin_dir: Path, suite_dir: Path, problems: Problems
) -> ReviewerConfig:
    """A stage's `reviewer:` mapping; a rubric problem goes to `problems`."""
    # The agent file itself is checked by the suite (ci_evals.suite.references),
    # which knows the plugin's agents and lists them.
    keys = value.mapping(REVIEWER_KEYS, required=("agent", "rubrics", "prompt"), what="reviewer")
    config = ReviewerConfig(
        agent=keys["agent"].as_str(),
        prompt=keys["prompt"].as_str(),
        rubrics=tuple(keys["rubrics"].as_str_list(allow_empty=False)),
        model=keys["model"].as_str() if "model" in keys else None,
        require_all=keys["require_all"].as_bool() if "require_all" in keys else False,
    )
    try:
        config.rubric_set(plugin_dir, suite_dir)  # fail at load on a typo or a bad rubric
    except UserError as exc:
        where = keys["rubrics"]
        detail = f"{exc.message} ({exc.file})" if exc.file else exc.message
        problems.report(where.error(detail, hint=exc.hint))
    return config
