"""What the `ci-evals-fixtures` hook costs per commit, against the coverage hook beside it.

Both as a commit runs them: a fresh `ci-evals` process in a copy of the labsmith
example (its own git repository). `check-fixtures --contracts-only` loads the
suite (pydantic, jsonschema) and checks 28 contract items on two fixture sets;
`check-coverage` is the baseline every commit already pays. `--copies N` makes
each fixture file N times (more chapters), to see how it grows with fixtures.

    .venv/bin/python benchmarks/bench_fixture_contracts.py [--repeats 7] [--copies 1]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import median_seconds
from tests.conftest import copy_example


def _example(dest: Path, copies: int) -> Path:
    repo = copy_example(dest / "labsmith").root  # the layout of this repository's top
    for chapter in sorted(repo.glob("fixtures/**/lab/chapters/*.md")):
        for n in range(1, copies):
            shutil.copy(chapter, chapter.with_name(f"{50 + n:02d}-{chapter.name[3:]}"))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--copies", type=int, default=1)
    args = parser.parse_args()
    ci_evals = [sys.executable, "-m", "ci_evals"]
    with tempfile.TemporaryDirectory() as temp:
        repo = _example(Path(temp), args.copies)

        def command(*argv: str) -> None:
            subprocess.run([*ci_evals, *argv], cwd=repo, check=True, capture_output=True)

        coverage = median_seconds(
            lambda: command("check-coverage", "--map", "stage_map.yaml"), args.repeats
        )
        contracts = median_seconds(
            lambda: command("check-fixtures", "--contracts-only"), args.repeats
        )
    print(f"check-coverage (baseline)       {coverage * 1000:7.0f} ms")
    print(
        f"check-fixtures --contracts-only {contracts * 1000:7.0f} ms  ({contracts / coverage:.1f}x)"
    )


if __name__ == "__main__":
    main()
