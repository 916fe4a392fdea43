"""The *Changed fixtures* section: what `check-fixtures` said of the fixtures a change touched.

A fixture k is stage k's curated output and stage k+1's input. A change to it
runs from stage k+1, and on the stub model stage k's answer *is* fixture k, so
no run grades it: CI grades it with `check-fixtures --stage k`
(`compute-stage`'s `fixture_stages` output) and `report --fixtures FILE`
puts that verdict here — in the summary and the PR comment — and fails the
report when a fixture did not pass or was not graded at all (fail closed).
Pure: the caller reads the file (`check-fixtures.json`).
"""

from __future__ import annotations

from ci_evals.report.markdown import text

# How much of a fixture's name and reason the section shows.
_NAME_LIMIT = 120
_REASON_LIMIT = 300


def fixtures_section(report: object, source: str) -> tuple[str, bool]:
    """(the Markdown section, whether every listed fixture passed) for the parsed
    `check-fixtures.json` `report` (None: the file is missing or unreadable)."""
    head = "### Changed fixtures (graded by `ci-evals check-fixtures`, no model)\n\n"
    rows = fixture_rows(report)
    if rows is None:
        why = f"{text(source, _NAME_LIMIT)} is missing or not a check-fixtures report"
        return head + f"**not graded**: {why}, so they count as failed.\n", False
    if not rows:
        return head + "**not graded**: the report lists no fixture.\n", False
    failed = sum(verdict != "passed" for _, _, verdict, _ in rows)
    verdict_line = (
        f"**failed**: {failed} of {len(rows)} fixture(s) did not pass; the report fails.\n"
        if failed
        else f"**passed**: {len(rows)} fixture(s).\n"
    )
    lines = [head + verdict_line, "| stage | fixture | verdict | reason |", "|---|---|---|---|"]
    for stage, name, verdict, reason in rows:
        lines.append(
            f"| {stage} | {text(name, _NAME_LIMIT)} | {text(verdict, 20)} "
            f"| {text(reason, _REASON_LIMIT)} |"
        )
    return "\n".join(lines) + "\n", not failed


def fixture_rows(report: object) -> list[tuple[int, str, str, str]] | None:
    """(stage, fixture, verdict, reason) per item of a check-fixtures report; None
    when it is not one (not a list, an item without those fields of those types)."""
    if not isinstance(report, list):
        return None
    rows: list[tuple[int, str, str, str]] = []
    for item in report:
        if not isinstance(item, dict):
            return None
        stage, name, verdict = item.get("stage"), item.get("fixture"), item.get("verdict")
        reason = item.get("reason", "")
        if type(stage) is not int or not all(isinstance(v, str) for v in (name, verdict, reason)):
            return None
        rows.append((stage, str(name), str(verdict), str(reason)))
    return rows
