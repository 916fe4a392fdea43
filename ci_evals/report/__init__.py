"""Reports of a saved run for CI: JUnit XML (`junit`) and a Markdown summary (`markdown`).

Both read only `results.json` (a `RunResult`) and share the rules here: how a
stage's status maps to an outcome, which criteria failed, and how text an agent
wrote is made safe to embed. The rules fail closed: a stage nobody saw finish
(`pending`/`running`, or skipped because the run stopped early or its budget
ran out) is an error, never a pass, and so is a stage with graders left
`completed` (never graded). A run that did not pass never reports green: one
that did not finish, or recorded no stage, is an error of its own in both
reports (`run_reason`), whatever its stages say — the rule `run_passed` (the
exit code) applies.
A file that disagrees with itself (`verify.problems`: statuses against
verdicts, verdicts against their criteria, summaries against the stages) is
an error of the whole run: both reports say so first, and it never passes.
Requests the stub model's script had no answer for (`endpoint_misses`) are named
in both, first in the stage's reason: they are why such a stage is an error.
Files a stage wrote into the plugin copy (`plugin_changes`: through a
workspace link such as superpowers' `docs/`) are named last in its reason:
no grader saw them, often why a check found no file.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from ci_evals.results import NOT_GRADED, miss_source

if TYPE_CHECKING:
    from ci_evals.results.criteria import Criterion
    from ci_evals.results.model import RunResult, ScenarioResult, StageResult

Outcome = Literal["passed", "failure", "error", "skipped"]

INTERRUPTED = "run interrupted"
INCONSISTENT = "results file inconsistent"

# XML 1.0 allows tab, LF, CR and everything from U+0020 except surrogates and
# U+FFFE/U+FFFF. Agent output can hold any of the rest (ANSI escapes, NUL, lone
# surrogates from undecodable file names); one of them makes the whole file
# unreadable to a CI reporter.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# The same, plus the C1 controls and DEL: invisible in Markdown, and a terminal
# escape in a log.
_NOT_PRINTABLE = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def xml_safe(text: str) -> str:
    """`text` with every character XML 1.0 forbids written as a visible `\\xNN` escape."""
    return _NOT_XML.sub(_visible, text)


def printable(text: str) -> str:
    """`text` with control characters written as visible `\\xNN` escapes."""
    return _NOT_PRINTABLE.sub(_visible, text)


def cap(text: str, limit: int) -> str:
    """At most `limit` characters; a cut text ends with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    note = f"... ({len(text) - limit} more characters)"
    return text[: max(0, limit - len(note))] + note


def scenario_label(result: RunResult, scenario: ScenarioResult) -> str:
    """The scenario id, with `#N` (1-based) when the run repeated the scenario."""
    return result.label_of(scenario)


def stage_label(stage: StageResult) -> str:
    return f"{stage.number} {stage.name}"


def outcome(result: RunResult, stage: StageResult, *, after_a_stop: bool = False) -> Outcome:
    """How a CI report shows the stage: a pass only for one that was seen to pass.

    A skipped stage is `skipped` (a reporter's grey) only `after_a_stop`: after
    a stage of its own scenario that ran and did not pass, which is already red
    and says why (`scenario_outcomes` knows; a lone stage does not, so it is
    red). Skipped for any other reason (the run budget was spent, the run
    stopped) nothing judged it, and the run cannot pass: an error with the reason.
    """
    status = stage.status
    if status == "completed" and stage.graded:
        return "error"  # graders were configured, and nobody ran them
    if status in ("passed", "completed"):
        return "passed"
    if status in ("failed", "limit"):
        return "failure"
    if status == "skipped" and result.status == "completed" and after_a_stop:
        return "skipped"
    # error, pending, running, and skipped in a run that stopped early or ran out of budget.
    return "error"


def scenario_outcomes(
    result: RunResult, scenario: ScenarioResult
) -> list[tuple[StageResult, Outcome]]:
    """Each stage of `scenario` with its outcome, in one pass (in order, so a skipped
    stage knows whether one before it ran and did not pass). A run without the plugin
    (`ablation: with-without`) is compared with the run with it, never a verdict:
    each of its stages is `skipped` to a reporter, whatever it did."""
    if scenario.arm == "without":
        return [(stage, "skipped") for stage in scenario.stages]
    found: list[tuple[StageResult, Outcome]] = []
    stopped = False
    for stage in scenario.stages:
        kind = outcome(result, stage, after_a_stop=stopped)
        found.append((stage, kind))
        stopped = stopped or (stage.status != "skipped" and kind in ("failure", "error"))
    return found


def run_outcomes(result: RunResult) -> list[tuple[ScenarioResult, StageResult, Outcome]]:
    """`scenario_outcomes` of every scenario, in order."""
    return [
        (scenario, stage, kind)
        for scenario in result.scenarios
        for stage, kind in scenario_outcomes(result, scenario)
    ]


def unfinished(result: RunResult, stage: StageResult) -> bool:
    """True for a stage the run never got to judge because it stopped early."""
    if stage.status in ("pending", "running"):
        return True
    return stage.status == "skipped" and result.status != "completed"


_UNFINISHED = {
    "running": "the run never finished: results.json still says running "
    "(the runner was killed or is still writing), so nothing vouches for the rest",
    "interrupted": "the run was interrupted before it finished",
}


def run_reason(result: RunResult, problems: Sequence[str] | None = None) -> str:
    """Why the run itself did not pass, beyond its stages ('' when it passed, or when
    a stage's own failure or error already says why).

    A run that did not finish (`running`: its writer was killed; `interrupted`;
    `error`) never passes, even when every stage it recorded did, and neither
    does one that recorded no stage: the reports must show that as an error of
    its own, else a reporter counting test cases shows them green.
    """
    if result.status != "completed":
        return _UNFINISHED.get(
            result.status, f"the run ended in {result.status} before it finished"
        )
    stages = [stage for scenario in result.scenarios for stage in scenario.stages]
    if not stages:
        return "the run recorded no stage"
    told = (
        run_problems(result, problems)  # an inconsistent file is an error of its own
        or run_passed(result, problems)
        or any(kind in ("failure", "error") for _, _, kind in run_outcomes(result))
    )
    return (
        "" if told else "the run did not pass (its verdict over repeats), though no stage says why"
    )


def status_word(stage: StageResult) -> str:
    """The stage's status as one short word (`limit:turns` names the limit,
    `error:stub` an error because the stub model's script had no answer,
    `error:replay` because the replayed recording had none: it diverged)."""
    if stage.status == "limit" and stage.limit_hit:
        return f"limit:{stage.limit_hit}"
    if stage.status == "error" and stage.endpoint_misses:
        return f"error:{miss_source(stage.endpoint_misses)}"
    if stage.status == "completed" and stage.graded:
        return "completed:ungraded"
    return stage.status


def reason(result: RunResult, stage: StageResult) -> str:
    """One line on why the stage did not pass ('' for a pass)."""
    if outcome(result, stage) == "passed":
        return ""
    if stage.status == "completed":  # and graded: never graded
        return NOT_GRADED
    if unfinished(result, stage):
        detail = stage.error or f"stage was {stage.status}"
        return f"{INTERRUPTED}: {detail}" if result.status != "running" else detail
    parts: list[str] = []
    if stage.endpoint_misses and stage.error:
        parts.append(stage.error)  # the cause: what was graded was never scripted
    if stage.status == "limit":
        parts.append(f"hit its {stage.limit_hit or 'a'} limit")
    if stage.grading is not None:
        parts.append(stage.grading.reason)
    if stage.error and stage.error not in parts:
        parts.append(stage.error)
    if stage.plugin_changes:  # often why a check found no file: it is not in the workspace
        parts.append(plugin_changes_line(stage))
    return "; ".join(parts) or stage.status


PLUGIN_CHANGES_SHOWN = 3


def plugin_changes_line(stage: StageResult) -> str:
    """What the stage wrote into the plugin copy, which no grader sees, in one line."""
    changes = stage.plugin_changes
    shown = ", ".join(f"{c.path} ({c.change})" for c in changes[:PLUGIN_CHANGES_SHOWN])
    more = len(changes) + stage.plugin_changes_omitted - PLUGIN_CHANGES_SHOWN
    if more > 0:
        shown += f" and {more} more"
    first = changes[0].path.split("/")[0]
    via = (
        f" through the workspace's {first}/, a link into the plugin"
        if "/" in changes[0].path and not first.startswith(".")
        else ""
    )
    return (
        f"{len(changes) + stage.plugin_changes_omitted} file(s) written into the plugin "
        f"copy{via}, where no grader looks: "
        f"{shown} (plugin-changes.json)"
    )


def arms_rows(result: RunResult) -> list[tuple[str, str, str, str, str, str]]:
    """Under `ablation: with-without`, per (scenario, stage): scenario, stage, score
    with, score without, delta (signed) and why there is none; [] for one arm."""
    rows = []
    for item in result.summaries:
        arms = item.arms
        if arms is None:
            continue
        rows.append(
            (
                item.scenario,
                f"{item.stage} {item.name}",
                score_text(arms.score),
                score_text(arms.score_without),
                delta_text(arms.delta),
                arms.note or "",
            )
        )
    return rows


def score_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def delta_text(value: float | None) -> str:
    """`+0.50`, `-0.25`, `0.00`; `—` when there is none (as the CLI shows it)."""
    if value is None:
        return "—"
    shown = f"{value:+.2f}"
    return "0.00" if shown in ("+0.00", "-0.00") else shown


def without_note(stage: StageResult) -> str:
    """What a reporter says of a stage of the run without the plugin."""
    return (
        f"without the plugin: {status_word(stage)} (compared with the run with it, never a verdict)"
    )


def counted_criteria(stage: StageResult) -> list[Criterion]:
    """The criteria that decide the verdict (advisory ones never do)."""
    if stage.grading is None:
        return []
    return [c for c in stage.grading.criteria if not c.advisory]


def failed_criteria(stage: StageResult) -> list[Criterion]:
    return [c for c in counted_criteria(stage) if not c.passed]


def flagged_criteria(stage: StageResult) -> list[Criterion]:
    """Advisory flags a person should look at, whatever the verdict: a file the
    stage left that addresses its reviewer or grader (`grading.reviewer.untrusted`)."""
    from ci_evals.grading.reviewer.untrusted import CRITERION_ID  # noqa: PLC0415 - report reads results

    if stage.grading is None:
        return []
    return [c for c in stage.grading.criteria if c.id == CRITERION_ID and not c.passed]


def grader_errors(stage: StageResult) -> list[str]:
    """`grader: error` for every grader that could not produce a scorecard."""
    if stage.grading is None:
        return []
    return [f"{g.grader}: {g.error}" for g in stage.grading.graders if g.error]


def endpoint_miss_lines(stage: StageResult) -> list[str]:
    """What the endpoint answered (`stub: no rule matched ...`, `replay: request
    #2 ...`), per distinct request it had no answer for; `(xN)` when the same one
    came N times (a retry asks again)."""
    counts = Counter(miss.text for miss in stage.endpoint_misses)
    return [line + (f" (x{n})" if n > 1 else "") for line, n in counts.items()]


def endpoint_miss_count(result: RunResult) -> tuple[int, int]:
    """(requests the stub or the replay had no answer for, stages they were in) over the run."""
    stages = [s for sc in result.scenarios for s in sc.stages if s.endpoint_misses]
    return sum(len(s.endpoint_misses) for s in stages), len(stages)


def criterion_line(criterion: Criterion) -> str:
    """`id (checklist, score 0): why` — the rationale, else the check's detail."""
    score = "-" if criterion.score is None else f"{criterion.score:g}"
    why = criterion.rationale or criterion.detail
    line = f"{criterion.id} ({criterion.kind}, score {score})"
    return f"{line}: {why}" if why else line


def run_problems(result: RunResult, problems: Sequence[str] | None) -> Sequence[str]:
    """`problems` when the caller has them, else `verify.problems(result)`."""
    if problems is not None:
        return problems
    from ci_evals.report.verify import problems as find  # noqa: PLC0415 - the scoring rules

    return find(result)


def run_passed(result: RunResult, problems: Sequence[str] | None = None) -> bool:
    """The command's exit rule: every stage passed or completed, in a finished run
    whose results file agrees with itself.

    The rule is `ci_evals.results.summary.exit_code` (k-of-n over repeats; a
    run that did not finish, or recorded no stage, never passes), on a file
    with no `verify.problems` (computed here unless given).
    """
    from ci_evals.results.summary import exit_code  # noqa: PLC0415 - only the report needs it

    if run_problems(result, problems):
        return False
    return exit_code(result) == 0
