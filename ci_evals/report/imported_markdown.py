"""The Markdown section of a run imported from `claude plugin eval`: per case, the CLI's
score beside ci-evals' verdict, and the without-plugin arm the CLI ran.

The verdicts above it are ci-evals' reading of the CLI's runs, failing closed where
the CLI does not (docs/plugin-evals.md, *Results both ways*); this table shows both
readings side by side, so a case the CLI passed and ci-evals did not is seen at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ci_evals.report.markdown import CELL_LIMIT, text

if TYPE_CHECKING:
    from ci_evals.results.model import RunResult

ROWS_SHOWN = 100


def imported_section(result: RunResult) -> str:
    """`### Imported from claude plugin eval`, or "" for a run ci-evals ran."""
    imported = result.imported_from
    if imported is None:
        return ""
    summaries = {s.scenario: s.summary for s in result.summaries}
    arm = imported.ablation == "with-without"
    lines = [
        "### Imported from claude plugin eval",
        "",
        f"Run and graded by `claude plugin eval` {text(imported.claude_version, CELL_LIMIT)}; "
        "ci-evals read its runs and fails closed where the CLI does not (a run that errored, "
        "or whose paid graders were skipped, is an error here, whatever the CLI scored).",
        "",
        "| case | the CLI's score | ci-evals | score |"
        + (" without the plugin | delta |" if arm else ""),
        "|---|---|---|---|" + ("---|---|" if arm else ""),
    ]
    for case in imported.cases[:ROWS_SHOWN]:
        summary = summaries.get(case.scenario)
        verdict = "-" if summary is None else summary.verdict
        mean = None if summary is None else summary.binary_score.mean
        row = (
            f"| {text(case.name, CELL_LIMIT)} | {case.score:.2f} | {verdict} | "
            f"{'-' if mean is None else f'{mean / 100:.2f}'} |"
        )
        if arm:
            without = "-" if case.score_without is None else f"{case.score_without:.2f}"
            delta = "-" if case.delta is None else f"{case.delta:+.2f}"
            row += f" {without} | {delta} |"
        lines.append(row)
    if len(imported.cases) > ROWS_SHOWN:
        lines.append(f"\n... and {len(imported.cases) - ROWS_SHOWN} more case(s)")
    return "\n".join(lines) + "\n"
