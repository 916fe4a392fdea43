"""`report --baseline`: load the baseline, check it is comparable, render the sections.

The I/O half of the comparison (`ci_evals.report.baseline` is the pure half):
reading the baseline's results file (any earlier version, migrated), what
`ci-evals baseline fetch` wrote next to it (`github.artifacts.read_source`:
which workflow run it came from, or why there was none), the merge base for
the staleness check (`git merge-base` of the run's commit and `--base`).
A baseline that is missing, unreadable or inconsistent becomes *No baseline*
with the reason; one of another suite is refused (`UserError`, exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from ci_evals import git
from ci_evals.errors import UserError
from ci_evals.github.artifacts import read_source
from ci_evals.report import flakes
from ci_evals.report.baseline import (
    Comparison,
    NoBaseline,
    compare,
    revision_notes,
    same_suite,
)
from ci_evals.report.baseline_markdown import comparison_section, cost_section, not_compared
from ci_evals.report.costs import cost_summary
from ci_evals.report.verify import problems as inconsistencies
from ci_evals.results.model import (
    RESULTS_FILE,
    RunResult,
    path_name_problems,
    read_results,
)
from ci_evals.text import inert


def against_baseline(
    result: RunResult,
    args: argparse.Namespace,
    problems: Sequence[str] = (),
    *,
    compared: tuple[Comparison | NoBaseline | None, str | None] | None = None,
) -> str:
    """The *Against the baseline* (with `--baseline`) and *Cost* sections.

    Nothing in a results file that disagrees with itself (`problems`) can be
    believed, its costs included: then there is nothing to compare. `compared`:
    what `baseline_comparison` gave, when the caller already asked it.
    """
    if problems:
        return not_compared("this run's results file is inconsistent") if args.baseline else ""
    comparison, source = compared or baseline_comparison(result, args)
    if comparison is None:
        return cost_section(cost_summary(result, None))
    if isinstance(comparison, NoBaseline):
        costs = cost_summary(result, None)
        return comparison_section(comparison, source) + "\n" + cost_section(costs)
    costs = cost_summary(result, comparison.baseline)
    return comparison_section(comparison, source) + "\n" + cost_section(costs)


def baseline_comparison(
    result: RunResult, args: argparse.Namespace
) -> tuple[Comparison | NoBaseline | None, str | None]:
    """The comparison with `--baseline` (None without it) and where the baseline came from."""
    if args.baseline is None:
        return None, None
    source, reason = read_source(args.baseline)
    baseline, missing = load_baseline(args.baseline, reason)
    if baseline is None:
        print(f"ci-evals report: --baseline: no baseline: {inert(missing)}", file=sys.stderr)
        return NoBaseline(missing), source
    notes = same_suite(result, baseline, baseline_file=_results_file(args.baseline))
    merge_base, why = merge_base_of(result, args.base)
    notes += revision_notes(result, baseline, merge_base, why)
    comparison = compare(result, baseline, notes)
    ledger = history_ledger(args)
    if ledger is not None:
        comparison = with_history(comparison, ledger)
    return comparison, source


def history_ledger(args: argparse.Namespace) -> flakes.FlakeLedger | None:
    """`--history`'s runs as a flake ledger (None without it); an unreadable one: one line."""
    given: list[Path] = getattr(args, "history", None) or []
    if not given:
        return None
    runs = []
    for path in given:
        file = _results_file(path)
        try:
            runs.append(read_results(file))
        except UserError as exc:
            raise UserError(f"{exc.message}", file=file, field="--history") from None
    low, high = getattr(args, "flaky_bounds", None) or (0.0, 1.0)
    return flakes.build(runs, low, high)


def with_history(comparison: Comparison, ledger: flakes.FlakeLedger) -> Comparison:
    """Each criterion's delta with its pass rate on main beside it."""
    deltas = []
    for delta in comparison.deltas:
        number = int(delta.stage.split(" ", 1)[0])
        note = flakes.history_note(ledger, delta.scenario, number, delta.what)
        deltas.append(dataclasses.replace(delta, history=note) if note else delta)
    return dataclasses.replace(comparison, deltas=tuple(deltas))


def _results_file(path: Path) -> Path:
    return path / RESULTS_FILE if path.is_dir() else path


def load_baseline(path: Path, reason: str | None = None) -> tuple[RunResult | None, str]:
    """The baseline run, or None and why there is none to compare with."""
    file = _results_file(path)
    if reason is not None:  # the fetch said none (or its record is unreadable): believed
        return None, reason
    if not file.exists():
        return None, f"{file} does not exist"
    try:
        baseline = read_results(file)
    except UserError as exc:
        return None, f"the baseline cannot be read: {exc}"
    unsafe = path_name_problems(baseline)  # `report --html` reads its folder by them
    if unsafe:
        field, why = unsafe[0]
        return None, f"the baseline's results file has an id that is no name: {field}: {why}"
    unusable = _unusable(baseline)
    if unusable is not None:
        return None, unusable
    return baseline, ""


def _unusable(baseline: RunResult) -> str | None:
    """Why a readable baseline still cannot be compared with, or None."""
    found = inconsistencies(baseline)
    if found:
        return (
            f"the baseline's results file is inconsistent ({len(found)} problem(s)), so none of "
            f"its numbers can be believed: {found[0]}"
        )
    # A partial `claude plugin eval` document, or one whose paid graders were skipped,
    # left cases unjudged: compared, they would read as changes that never happened.
    refusal = baseline.imported_from.baseline_refusal if baseline.imported_from else None
    return None if refusal is None else f"the baseline is not usable: {refusal}"


def merge_base_of(result: RunResult, base: str | None) -> tuple[str | None, str]:
    """Where a baseline of this change should have run, or None and why it is not known."""
    revision = result.revision
    if base is None:
        if revision is not None and revision.merge_base is not None:
            return revision.merge_base, ""
        return None, "this run records no merge base: staleness not checked (pass --base REV)"
    if revision is None or revision.commit is None:
        return None, "this run records no commit: staleness not checked"
    try:
        top = git.toplevel(Path.cwd())
    except UserError:
        return None, "--base: not inside a git repository: staleness not checked"
    resolved = git.rev_parse(top, base)
    found = None if resolved is None else git.merge_base(top, revision.commit, resolved)
    if found is None:
        return None, (
            f"no merge base of {revision.commit[:12]} and {base!r} in this clone (an unknown "
            "revision, or a shallow clone): staleness not checked"
        )
    return found, ""
