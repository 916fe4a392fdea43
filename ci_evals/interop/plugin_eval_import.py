"""A `claude plugin eval` document as a ci-evals run: `ci-evals import plugin-eval`.

The document (`plugin_eval_doc`) becomes a `results.json` of the current version,
so `report` (Markdown, JUnit, `--html`), the sticky comment and `--baseline` read
it as any run: each case a case unit, each run's graders the criteria of one
`plugin_eval` grader, the stage's verdict evaluated from them by ci-evals' own
scoring (so `report` re-checks it), the without-plugin arm kept beside the cases,
out of every verdict and cost.

Fail closed where the CLI does not: a run with an `error`, one an agent mock
aborted, and one whose paid graders the cost ceiling skipped are `error` stages,
never a pass; a partial document's missing runs are `skipped`, the run
`interrupted`, and such a document is refused as a baseline
(`ImportedFrom.baseline_refusal`). `tracePath` is never read: the document may
name any file on this machine, and the run folder is uploaded. Field by field:
docs/plugin-evals.md (*Importing a run of the CLI*).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from ci_evals import __version__
from ci_evals.fs.names import MAX_NAME, as_name, name_problem
from ci_evals.interop.plugin_eval_doc import DocCase, Document, Run
from ci_evals.results import normalize_id
from ci_evals.results.criteria import Criterion, GraderResult, StageVerdict
from ci_evals.results.model import (
    IMPORTED_TOOL,
    ImportedCase,
    ImportedFrom,
    Revision,
    RunResult,
    ScenarioResult,
    StageResult,
    SuiteIdentity,
)
from ci_evals.results.summary import summarize_run
from ci_evals.results.verdict import ScoringPolicy, evaluate
from ci_evals.text import display_path, one_line

GRADER = "plugin_eval"  # the one grader of a case unit, as `plugin_evals:` grades it
# Where the agent ran (the CLI's child, not a sandbox of ci-evals') and who asked the
# model (the CLI, with its own credential): the run's `sandbox` and `model_endpoint`.
SANDBOX = ENDPOINT = IMPORTED_TOOL
DETAIL_LIMIT = 2000  # characters of a grader's explanation kept


def imported_run(document: Document, *, commit: str | None = None) -> RunResult:
    """The run `document` records, as ci-evals would have recorded it (failing closed)."""
    ids = _scenario_ids(document.cases)
    scenarios: list[ScenarioResult] = []
    cases: list[ImportedCase] = []
    for case, sid in zip(document.cases, ids, strict=True):
        ids_of = _criterion_ids(case)
        for index in range(case.runs_per_case):
            run = case.with_runs[index] if index < len(case.with_runs) else None
            scenarios.append(
                ScenarioResult(
                    id=sid,
                    repeat=index,
                    repeats=case.runs_per_case,
                    unit="case",
                    stages=[_stage(sid, run, ids_of)],
                )
            )
        without = [_stage(sid, run, ids_of) for run in case.without_runs or ()]
        cases.append(
            ImportedCase(
                scenario=sid,
                name=case.name,
                dir=case.dir,
                score=case.score,
                score_without=case.score_without,
                delta=case.delta,
                without=without,
            )
        )
    skipped = sum(
        run.skipped_paid_graders
        for case in document.cases
        for run in (*case.with_runs, *(case.without_runs or ()))
    )
    plugin = document.plugins[0].name if document.plugins else Path(document.root).name
    result = RunResult(
        run_id=f"import-{document.started_at:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}",
        tool_version=__version__,
        started_at=document.started_at,
        finished_at=document.started_at + timedelta(seconds=document.duration_s),
        status="interrupted" if document.partial else "completed",
        model=document.model,
        model_endpoint=ENDPOINT,
        sandbox=SANDBOX,
        isolated=False,
        from_stage=1,
        suite_file=display_path(document.file),
        # Two imports compare when they are of the same plugin's cases (not the same
        # checkout: a CI runner's folder differs from run to run).
        suite=SuiteIdentity(path=IMPORTED_TOOL, plugin=plugin),
        revision=None if commit is None else Revision(commit=commit),
        score_at_least=document.threshold if document.threshold < 1.0 else None,
        scenarios=scenarios,
        imported_from=ImportedFrom(
            file=display_path(document.file),
            sha256=document.sha256,
            schema_version=1,
            claude_version=document.claude_version,
            partial=document.partial,
            partial_reason=document.partial_reason,
            ablation=document.ablation,
            skipped_paid_graders=skipped,
            cost_usd=document.cost_usd,
            cases=cases,
        ),
    )
    result.total_cost_usd = result.stages_cost_usd
    result.summaries = summarize_run(result, None)
    return result


def _scenario_ids(cases: tuple[DocCase, ...]) -> list[str]:
    """Each case's scenario id: its name as a folder name, unique (`-2`, `-3` after
    the first of two names that read alike), at most `MAX_NAME` characters."""
    taken: set[str] = set()
    ids = []
    for case in cases:
        base = as_name(case.name, "case").lstrip("_.-")[:MAX_NAME] or "case"
        base = "case" if name_problem(base) else base
        sid, n = base, 1
        while sid in taken:
            n += 1
            suffix = f"-{n}"
            sid = base[: MAX_NAME - len(suffix)] + suffix
        taken.add(sid)
        ids.append(sid)
    return ids


def _criterion_ids(case: DocCase) -> dict[str, str]:
    """Grader name -> criterion id: the name, made unique as ci-evals compares ids
    (`normalize_id`: case, `_` and spaces, a path's stem), which the CLI does not."""
    names = [g.name for g in case.graders]
    for run in (*case.with_runs, *(case.without_runs or ())):
        names += [g.name for g in run.graders if g.name not in names]
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        cid, n = name, 1
        while normalize_id(cid) in taken or not normalize_id(cid):
            n += 1
            cid = f"{name} ({n})"
        taken.add(normalize_id(cid))
        ids[name] = cid
    return ids


def _stage(sid: str, run: Run | None, ids: dict[str, str]) -> StageResult:
    """One run as the case unit's stage; None: a run the partial document never ran."""
    if run is None:
        return StageResult(number=1, name=sid, status="skipped", error=_NEVER_RAN)
    verdict = _verdict(run, ids)
    why = _not_judged(run)
    if why is not None:
        # The CLI's grading (if any) is kept to be read, under an error verdict.
        verdict = verdict and verdict.model_copy(
            update={"verdict": "error", "reason": why, "error": why}
        )
    status = "error" if why is not None or verdict is None else verdict.verdict
    judges = run.judge_cost_usd if verdict is not None else None  # a verdict's cost
    return StageResult(
        number=1,
        name=sid,
        status=status,
        error=why,
        started_at=run.started_at,
        duration_s=run.duration_s,
        turns=run.turns,
        cost_usd=max(0.0, run.cost_usd - (judges or 0.0)),
        grading=verdict,
        grading_cost_usd=judges,
    )


SKIPPED_PAID = (
    "claude plugin eval: the cost ceiling skipped its llm/baseline graders (the CLI counts "
    "them failed): not judged"
)
_NEVER_RAN = "not run: the claude plugin eval document is partial (the CLI stopped before it)"


def _not_judged(run: Run) -> str | None:
    """Why the run is an error whatever its graders said, or None."""
    if run.error is not None:
        graded = f" (the CLI graded it anyway: score {run.score:.2f})" if run.graders else ""
        return one_line(f"claude plugin eval: the run failed: {run.error}{graded}", 1000)
    if run.aborted is not None:
        return one_line(f"claude plugin eval: an agent mock aborted the run: {run.aborted}", 1000)
    if run.skipped_paid_graders:
        return SKIPPED_PAID
    return None


def _verdict(run: Run, ids: dict[str, str]) -> StageVerdict | None:
    """The run's graders as ci-evals' verdict (None: the CLI graded nothing)."""
    if not run.graders:
        return None
    criteria = tuple(
        Criterion(
            id=ids[g.name],
            kind="checklist",
            score=1.0 if g.passed else 0.0,
            passed=g.passed,
            weight=g.weight,
            advisory=not g.scored,
            source=GRADER,
            detail=one_line(g.explanation, DETAIL_LIMIT),
        )
        for g in run.graders
    )
    policy = ScoringPolicy(
        weights={c.id: c.weight for c in criteria},
        advisory=frozenset(c.id for c in criteria if c.advisory),
    )
    # The reader checked the CLI's score is this share: the binary score is it x 100.
    return evaluate((GraderResult(grader=GRADER, criteria=criteria),), policy)
