"""The flake ledger: each criterion's pass rate over the base branch's recent runs.

`report --history RUN` (repeatable: run folders, results files or `baseline
fetch` folders of main's last runs) counts, per (scenario, stage, criterion),
how many of the graded runs (every repeat, the with-plugin arm) it passed. A
criterion whose pass rate on main lies strictly between the bounds
(`--flaky-bounds LOW,HIGH`, default 0,1: it both passed and failed) is
flaky, and the comparison says so next to a delta on it: "fails 2 of 10 on
main (flaky)". A criterion main never ran says so too ("not run on main").

`--gate stable`: the report's exit code gates only on stable criteria — a
stage whose every failing criterion is flaky on main does not fail the
report, and the summary lists each of them as *Not gated (flaky on main)*:
it reports, it never silently passes. A stage that failed for anything else
(an error, a limit, a stable criterion, no history for it, a stage that did not
run: skipped after the flaky failure) still fails.
The suite's `gate: stable` (with `flaky_bounds:`), recorded in the results
file, does the same when `--gate` is not given; with no history it gates on
every criterion and says so (nothing is known flaky: fail closed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ci_evals.results.model import RunResult

Key = tuple[str, int, str, str]  # scenario, stage number, criterion id, kind


@dataclass(frozen=True)
class Rate:
    passed: int
    runs: int

    @property
    def failed(self) -> int:
        return self.runs - self.passed

    def flaky(self, low: float, high: float) -> bool:
        return self.runs > 0 and low < self.passed / self.runs < high

    def text(self, low: float, high: float) -> str:
        mark = " (flaky)" if self.flaky(low, high) else ""
        return f"fails {self.failed} of {self.runs} on main{mark}"


@dataclass(frozen=True)
class FlakeLedger:
    rates: dict[Key, Rate]
    runs: int  # how many results files it was built from
    low: float = 0.0
    high: float = 1.0

    def rate(self, scenario: str, stage: int, criterion: str, kind: str) -> Rate | None:
        return self.rates.get((scenario, stage, criterion, kind))

    def flaky(self, key: Key) -> bool:
        rate = self.rates.get(key)
        return rate is not None and rate.flaky(self.low, self.high)


def build(history: Iterable[RunResult], low: float = 0.0, high: float = 1.0) -> FlakeLedger:
    """Every criterion's pass count over the graded runs of `history`."""
    passed: dict[Key, int] = {}
    runs: dict[Key, int] = {}
    count = 0
    for result in history:
        count += 1
        for scenario in result.scenarios:
            if scenario.arm != "with":
                continue
            for stage in scenario.stages:
                if stage.grading is None:
                    continue
                for criterion in stage.grading.criteria:
                    key = (scenario.id, stage.number, criterion.id, criterion.kind)
                    runs[key] = runs.get(key, 0) + 1
                    passed[key] = passed.get(key, 0) + (1 if criterion.passed else 0)
    rates = {key: Rate(passed[key], total) for key, total in runs.items()}
    return FlakeLedger(rates, count, low, high)


def parse_bounds(text: str) -> tuple[float, float]:
    """`LOW,HIGH` (0 <= LOW < HIGH <= 1), or ValueError saying what is wrong."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(f"not LOW,HIGH: {text!r}")
    low, high = float(parts[0]), float(parts[1])
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"need 0 <= LOW < HIGH <= 1, got {text!r}")
    return low, high


def gate_of(
    result: RunResult, given: str | None, history: Sequence[object] | None
) -> tuple[str, str]:
    """The gate the report applies — `--gate`, else the suite's `gate:` as the run
    recorded it — and a note for the summary when the suite's `stable` cannot apply:
    without main's history nothing is known flaky, so every criterion gates."""
    if given is not None:
        return given, ""
    if result.gate == "stable" and not history:
        return "all", (
            "**Gated on every criterion:** the suite's `gate: stable` needs main's recent "
            "runs (`report --history RUN`, the action's `baseline: true`); none given, so "
            "no criterion is treated as flaky."
        )
    return result.gate, ""


def ungated(result: RunResult, ledger: FlakeLedger) -> tuple[list[str], bool]:
    """With `--gate stable`: the failing criteria that are flaky on main (one line each),
    and whether every stage that did not pass failed only on such criteria."""
    lines: list[str] = []
    only_flaky = True
    for scenario in result.scenarios:
        if scenario.arm != "with":
            continue
        label = result.label_of(scenario)
        for stage in scenario.stages:
            # A stage skipped or pending did not run: nothing says it would pass (the
            # stages after a flaky failure are skipped), so it is gated.
            if stage.status in {"passed", "completed"}:
                continue
            verdict = stage.grading
            if stage.status != "failed" or verdict is None:
                only_flaky = False
                continue
            failing = [c for c in verdict.criteria if not c.passed and not c.advisory]
            for criterion in failing:
                key = (scenario.id, stage.number, criterion.id, criterion.kind)
                rate = ledger.rates.get(key)
                if rate is None or not ledger.flaky(key):
                    only_flaky = False
                    continue
                lines.append(
                    f"{label} stage {stage.number} ({stage.name}): {criterion.id} "
                    f"({criterion.kind}) — {rate.text(ledger.low, ledger.high)}"
                )
            if not failing:
                only_flaky = False
    return lines, only_flaky


def history_note(ledger: FlakeLedger, scenario: str, stage: int, what: str) -> str:
    """The ledger's word on a delta's criterion (`what`: "criterion ID (KIND)"), or ""."""
    if not what.startswith("criterion ") or not what.endswith(")"):
        return ""
    ident, _, kind = what[len("criterion ") : -1].rpartition(" (")
    rate = ledger.rate(scenario, stage, ident, kind)
    if rate is None:
        return f"not run on main in {ledger.runs} run(s)"
    return rate.text(ledger.low, ledger.high)


def annotate(lines: Sequence[str]) -> str:
    """The *Not gated* section, or ""."""
    if not lines:
        return ""
    body = "\n".join(f"- {line}" for line in lines)
    return (
        "### Not gated (flaky on main)\n\n"
        "These failed, and fail on main too now and then (`--gate stable`): reported, "
        f"not gated.\n\n{body}\n"
    )
