"""`report --html`'s diffs of large modified files: the bounded matcher against the old
behaviour (difflib's `unified_diff` of the whole texts, then cut to 2,000 lines).

Two cases, each FILES pairs of about KB kilobytes (the same for both sides):

- `swapped`: distinct lines, every pair swapped in the new text. difflib's
  search finds one-line matches only and peels two lines at a time off a range
  it scans whole: quadratic in the lines (five 84 KB files took 80-90 s once).
- `edited`: one line changed in the middle, what a stage usually does to a
  large file; both are fast, and the diff is the same.

Each measurement is in this process, after the texts are built; the ratio is
old / new on the same machine, and the steps are what the budget counted.

    .venv/bin/python benchmarks/bench_report_diffs.py [--files 5] [--kb 84] [--repeats 1]
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import median_seconds
from ci_evals.report.html.files import DIFF_LINES, DiffBudget, unified

Pair = tuple[list[str], list[str]]


def swapped(size: int, tag: str) -> Pair:
    old = [f"{tag} line {i:06d}" for i in range(size // (len(tag) + 13))]
    new = [line for i in range(0, len(old) - 1, 2) for line in (old[i + 1], old[i])]
    return old, new


def edited(size: int, tag: str) -> Pair:
    old = [f"{tag} line {i:06d}" for i in range(size // (len(tag) + 13))]
    new = list(old)
    new[len(new) // 2] = "changed"
    return old, new


def old_way(pairs: list[Pair]) -> None:
    for old, new in pairs:
        lines = list(difflib.unified_diff(old, new, "before", "after", lineterm=""))
        del lines[DIFF_LINES:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--kb", type=int, default=84)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    for name, make in (("swapped", swapped), ("edited", edited)):
        pairs = [make(args.kb * 1000, f"f{k}") for k in range(args.files)]
        budgets: list[DiffBudget] = []

        def new_way(pairs: list[Pair] = pairs, budgets: list[DiffBudget] = budgets) -> None:
            budget = DiffBudget()  # one site's
            budgets.append(budget)
            for old, new in pairs:
                unified(old, new, budget)

        before = median_seconds(lambda pairs=pairs: old_way(pairs), args.repeats)
        after = median_seconds(new_way, args.repeats)
        steps = budgets[-1].spent
        print(
            f"{name:<8} {args.files} files of {len(pairs[0][0]):,} lines: "
            f"old {before:7.3f} s  new {after:6.3f} s  x{before / after:6.1f}  "
            f"({steps:,} steps counted, site budget {budgets[-1].per_site:,})"
        )


if __name__ == "__main__":
    main()
