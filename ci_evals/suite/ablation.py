"""The with/without-plugin arm (`ablation: with-without`): what each arm of a unit runs.

Under ablation every unit (a scenario's repeat, a case's run) runs twice: with
the plugin, as always, and without it -- no plugin copy offered to the agent,
so none of its commands, skills, agents, hooks or MCP servers. What differs
between the arms is decided here, from the loaded suite: the prompt
(`prompt_without` in the without-arm); whether a stage can run without the
plugin at all (a plugin slash command without `prompt_without` cannot, nor can
the stages after it, nor a case resuming a session: single-arm, the reason
recorded); and a case's with-only graders
(`grading.kinds.plugin_eval.with_only`).

Graders are not part of an arm: reviewers and command graders get the pristine
plugin copy in both (the runner makes it, and only the with-arm's agent is
given it). docs/run.md (*Ablation: with and without the plugin*).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from ci_evals.suite import references
from ci_evals.suite.load import Stage

Arm = Literal["with", "without"]
ARMS: tuple[Arm, ...] = ("with", "without")


def single_arm_reason(stage: Stage) -> str | None:
    """Why `stage` cannot run without the plugin, or None when it can."""
    if stage.case is not None and stage.case.single_arm:
        # As `claude plugin eval` runs a resumed case: single-arm.
        return (
            "it resumes a session (context.history_file) whose history carries the plugin "
            "into both arms"
        )
    if stage.prompt_without is not None:
        return None
    commands = references.slash_commands(stage.prompt)
    if not commands:
        return None
    name, command = commands[0]
    return (
        f"its prompt is the plugin command /{name}:{command}, which nothing expands without "
        "the plugin, and the stage has no prompt_without"
    )


def unrunnable(stages: tuple[Stage, ...]) -> dict[int, str]:
    """Stage number -> why its without-arm cannot run, for a scenario's stages in order:
    the first stage that needs the plugin, and every stage after it."""
    found: dict[int, str] = {}
    first: Stage | None = None
    for stage in stages:
        if first is None and (reason := single_arm_reason(stage)) is not None:
            first = stage
            found[stage.number] = reason
        elif first is not None:
            found[stage.number] = (
                f"stage {first.number} ({first.name}) before it runs only with the plugin"
            )
    return found


def stage_for_arm(stage: Stage, arm: Arm | None) -> Stage:
    """`stage` as `arm` of a two-arm run grades it (None: a single-arm run, unchanged):
    a case's graders under the with-only rule (`StageGrading.for_arm`)."""
    grading = stage.grading.for_arm(arm)
    return stage if grading is stage.grading else replace(stage, grading=grading)
